//! The run's fingerprint (see `tack_trace::RunFingerprint`): taken when the
//! run starts, but for the models that answered, which only the finished
//! trials know.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tack_sandbox::{CommandSpec, Confinement};
use tack_suite::Task;
use tack_trace::{
    EnvironmentFingerprint, RunFingerprint, TaskFingerprint, VariantFingerprint, VariantInfo,
};

use crate::{RunError, RunPlan};

/// A version command that takes longer is stuck, not slow.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Versions are a line or two; this keeps a runaway command's output short.
const OUTPUT_LIMIT: usize = 4096;

pub(crate) async fn take(
    plan: &RunPlan,
    tasks: &[&Task],
    variants: &[VariantInfo],
) -> Result<RunFingerprint, RunError> {
    let mut task_prints = BTreeMap::new();
    for task in tasks {
        task_prints.insert(task.id.clone(), task_fingerprint(task)?);
    }
    let variants = variants
        .iter()
        .map(|info| {
            let print = VariantFingerprint {
                config_hash: config_hash(info),
                models_answered: Vec::new(),
            };
            (info.name.clone(), print)
        })
        .collect();
    Ok(RunFingerprint {
        tasks: task_prints,
        environment: environment(plan).await,
        variants,
    })
}

fn task_fingerprint(task: &Task) -> Result<TaskFingerprint, RunError> {
    let hashes = tack_suite::task_hashes(task)?;
    Ok(TaskFingerprint {
        task_toml: hashes.task_toml,
        solution: hashes.solution,
        fixture: hashes.fixture,
        checks: hashes.checks,
        directory: hashes.directory,
        image: task.ready_image().map(|image| image.id.clone()),
        services: task
            .ready_image()
            .map(|image| {
                image
                    .services
                    .iter()
                    .map(|s| (s.name.clone(), s.id.clone()))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Over the variant's recorded configuration, less its name and
/// description: two variants configured alike hash alike, so a comparison
/// of differently named variants can tell whether anything but the name
/// differs.
fn config_hash(info: &VariantInfo) -> String {
    let mut config = info.config.clone();
    if let Some(object) = config.as_object_mut() {
        object.remove("name");
        object.remove("description");
    }
    tack_suite::json_hash(&config)
}

async fn environment(plan: &RunPlan) -> EnvironmentFingerprint {
    EnvironmentFingerprint {
        os: kernel_value("ostype").unwrap_or_else(|| std::env::consts::OS.to_string()),
        kernel: kernel_value("osrelease").unwrap_or_else(|| "unknown".to_string()),
        distribution: distribution(),
        tack_commit: env!("TACK_GIT_COMMIT").to_string(),
        toolchains: toolchains(plan).await,
    }
}

/// What `uname` reports, from where it reads it.
fn kernel_value(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(Path::new("/proc/sys/kernel").join(name)).ok()?;
    Some(text.trim().to_string()).filter(|value| !value.is_empty())
}

fn distribution() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))
        .map(|value| value.trim().trim_matches('"').to_string())
}

/// Runs each `[suite] fingerprint` command as the trials' commands run:
/// in the `strict` sandbox, in an empty workspace, with the suite's tasks
/// and the traces hidden. What cannot run is recorded as the value, so a
/// machine without the sandbox or the toolchain says so in the manifest.
async fn toolchains(plan: &RunPlan) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    if plan.suite.fingerprint.is_empty() {
        return versions;
    }
    let workspace = match ScratchDir::create(&plan.run_id) {
        Ok(workspace) => workspace,
        Err(error) => {
            for command in &plan.suite.fingerprint {
                versions.insert(command.clone(), format!("error: {error}"));
            }
            return versions;
        }
    };
    let confinement = Confinement::strict(&workspace.0).hiding(plan.hidden_paths());
    for command in &plan.suite.fingerprint {
        let spec = CommandSpec {
            script: command,
            cwd: &workspace.0,
            env: &[],
            timeout: COMMAND_TIMEOUT,
            output_limit: OUTPUT_LIMIT,
            confinement: &confinement,
        };
        let value = match tack_sandbox::run(&spec).await {
            Ok(output) if output.timed_out => {
                format!("timed out after {}s", COMMAND_TIMEOUT.as_secs())
            }
            Ok(output) => {
                let (stdout, stderr) = (output.stdout.trim(), output.stderr.trim());
                // Some tools print their version on stderr (`java -version`).
                let printed = if stdout.is_empty() { stderr } else { stdout };
                match output.exit_code {
                    Some(0) => printed.to_string(),
                    Some(code) => format!("exit {code}: {printed}"),
                    None => format!("killed by signal {}", output.signal.unwrap_or(0)),
                }
            }
            Err(error) => format!("error: {error}"),
        };
        versions.insert(command.clone(), value);
    }
    versions
}

/// An empty directory for the fingerprint commands, removed when dropped.
struct ScratchDir(PathBuf);

/// Without the scratch directory no command runs; each one's value says why.
#[derive(Debug, thiserror::Error)]
#[error("could not create {}: {source}", path.display())]
struct ScratchError {
    path: PathBuf,
    source: std::io::Error,
}

impl ScratchDir {
    /// Unique per call: runs with the same id can be taking their
    /// fingerprints at once (tests do), and one must not remove the other's.
    fn create(run_id: &str) -> Result<ScratchDir, ScratchError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "tack-fingerprint-{run_id}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        match std::fs::create_dir(&path) {
            Ok(()) => Ok(ScratchDir(path)),
            Err(source) => Err(ScratchError { path, source }),
        }
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
