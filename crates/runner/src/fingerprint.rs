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
                config_hash: config_hash(info, &plan.suite.root),
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
/// description, and the content of the suite's files it names: two
/// variants configured alike hash alike, so a comparison of differently
/// named variants can tell whether anything but the name differs, and an
/// edited rules file or reviewer script is a changed configuration.
fn config_hash(info: &VariantInfo, suite_root: &Path) -> String {
    let mut config = info.config.clone();
    let files = named_files(&config, suite_root);
    if let Some(object) = config.as_object_mut() {
        object.remove("name");
        object.remove("description");
        if !files.is_empty() {
            object.insert("named_files".to_string(), serde_json::json!(files));
        }
    }
    tack_suite::json_hash(&config)
}

/// The suite's files a variant's harness names, by name, with the hash of
/// each: its permission rules, the words of its reviewer script and of its
/// MCP servers' commands that are files of the suite.
fn named_files(config: &serde_json::Value, suite_root: &Path) -> BTreeMap<String, String> {
    let harness = &config["harness"];
    let mut names: Vec<&str> = Vec::new();
    names.extend(harness["permissions"].as_str().filter(|p| *p != "default"));
    names.extend(
        harness["approver"]["script"]
            .as_str()
            .map(str::split_whitespace)
            .into_iter()
            .flatten(),
    );
    for server in harness["mcp_servers"].as_array().into_iter().flatten() {
        names.extend(server["command"].as_str());
        names.extend(
            server["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str()),
        );
    }
    names
        .into_iter()
        .filter_map(|name| {
            let path = suite_root.join(name);
            let hash = path
                .is_file()
                .then(|| tack_suite::content_hash(&path).ok())??;
            Some((name.to_string(), hash))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn info(config: serde_json::Value) -> VariantInfo {
        VariantInfo {
            name: "v".to_string(),
            model: "sim".to_string(),
            simulated: true,
            description: String::new(),
            config,
        }
    }

    /// Editing the rules file or the reviewer script a variant names is a
    /// change of the variant, as editing its table is.
    #[test]
    fn the_files_a_variant_names_are_part_of_its_configuration() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("rules.toml"), "fallback = \"ask\"\n").unwrap();
        std::fs::write(root.path().join("review.py"), "print('yes')\n").unwrap();
        let variant = info(serde_json::json!({
            "name": "v",
            "harness": {
                "permissions": "rules.toml",
                "approver": {"script": "python3 review.py --strict"},
            },
        }));
        let before = config_hash(&variant, root.path());
        assert_eq!(config_hash(&variant, root.path()), before);
        std::fs::write(root.path().join("rules.toml"), "fallback = \"deny\"\n").unwrap();
        let after_rules = config_hash(&variant, root.path());
        assert_ne!(after_rules, before);
        std::fs::write(root.path().join("review.py"), "print('no')\n").unwrap();
        assert_ne!(config_hash(&variant, root.path()), after_rules);
        // Nothing named, nothing added: the hash of older runs stands.
        let plain = info(serde_json::json!({"name": "v", "harness": {"permissions": "default"}}));
        assert_eq!(
            config_hash(&plain, root.path()),
            tack_suite::json_hash(&serde_json::json!({"harness": {"permissions": "default"}}))
        );
    }
}
