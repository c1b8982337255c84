//! The tools a task's commands need from outside its fixture, provisioned
//! before the first trial: the Debian packages it lists (checked on the
//! host, never installed by tack), a Python environment with its `python`
//! requirements (one per distinct list, cached by its hash), and, for
//! scripts written for a container, offline stand-ins for what they would
//! install as they run (`apt-get`, the uv installer, `uv`/`uvx`). The
//! directories go first on the `PATH` of every command of the task's
//! trials ([`Task::tool_path`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tack_protocol::shell_quote;
use tack_sandbox::{CommandSpec, Confinement};

use crate::{Suite, Task};

const APT_GET: &str = include_str!("stand_ins/apt-get.sh");
const FETCH: &str = concat!(
    include_str!("stand_ins/fetch.sh"),
    include_str!("stand_ins/pass-through.sh")
);
const UV: &str = include_str!("stand_ins/uv.sh");
/// Changes when the layout changes, so old caches are not reused for new
/// ones; the stand-ins' text is part of each environment's key.
const LAYOUT: &str = "tack-tool-env-1";
const INSTALL_TIMEOUT: Duration = Duration::from_secs(900);
/// Written into an environment's directory when it is ready.
const COMPLETE: &str = "COMPLETE";

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error(
        "task `{task}` needs Debian packages this host lacks: {missing}; install them \
         (`sudo apt-get install {missing}`) or leave the task out (`--task`)"
    )]
    MissingDebian { task: String, missing: String },
    #[error(
        "task `{task}` lists Debian packages, but this host cannot say which it has \
         (`dpkg-query` could not run: {error}); run it on a Debian or Ubuntu host"
    )]
    /// `error` is not a `source()`, which the CLI would print again.
    NoDpkg { task: String, error: std::io::Error },
    #[error(
        "task `{task}`: installing its Python environment ({requirements}) failed: {output}\n\
         hint: the requirements come from the package index (pip honours PIP_INDEX_URL and \
         PIP_FIND_LINKS); check that it is reachable and that each requirement exists"
    )]
    Python {
        task: String,
        requirements: String,
        output: String,
    },
    #[error(
        "task `{task}` works in its own /tmp (it has a workdir), so it cannot see tool \
         environments under {root}; set TACK_TOOL_ENVS to a directory outside /tmp"
    )]
    RootOutOfSight { task: String, root: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Images(#[from] crate::ImagesError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProvisionError + '_ {
    move |source| ProvisionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where tool environments are cached: `$TACK_TOOL_ENVS`, else
/// `$XDG_CACHE_HOME/tack/tool-envs`, else `~/.cache/tack/tool-envs`.
pub fn tool_env_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TACK_TOOL_ENVS") {
        return PathBuf::from(dir);
    }
    tack_cache("tool-envs")
}

/// `$XDG_CACHE_HOME/tack/NAME`, else `~/.cache/tack/NAME`.
pub(crate) fn tack_cache(name: &str) -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("tack")
        .join(name)
}

/// What provisioning did, a line each, for the front end to show.
pub type ProvisionNote<'a> = &'a (dyn Fn(String) + Sync);

/// Provisions every task of `suite` that asks for tools (tasks that
/// require a container, or run in an image, are left alone) and sets its `tool_path`. With
/// `confined`, installs run in the sandbox (the package index's build
/// scripts run in them), writable only in the new environment; without,
/// unconfined, for a host whose commands all run so.
pub async fn provision_suite(
    suite: &mut Suite,
    confined: bool,
    note: ProvisionNote<'_>,
) -> Result<(), ProvisionError> {
    let mut host = HostPackages::default();
    let mut ready: BTreeMap<String, PathBuf> = BTreeMap::new();
    let root = tool_env_root();
    // Part of every environment's key; asked once, when first needed.
    let mut python: Option<String> = None;
    for task in &mut suite.tasks {
        let env = &task.environment;
        let wanted = !env.python.is_empty() || env.stand_ins || !env.debian.is_empty();
        if task.requires_container() || task.wants_image() || !wanted {
            continue;
        }
        host.require(task)?;
        if env.python.is_empty() && !env.stand_ins {
            continue;
        }
        if task.environment.workdir.is_some()
            && std::path::absolute(&root).is_ok_and(|root| root.starts_with("/tmp"))
        {
            return Err(ProvisionError::RootOutOfSight {
                task: task.id.clone(),
                root,
            });
        }
        let spec = EnvSpec::of(task, python.get_or_insert_with(host_python));
        let dir = match ready.get(&spec.key) {
            Some(dir) => dir.clone(),
            None => {
                let dir = spec.ensure(&root, &task.id, confined, note).await?;
                ready.insert(spec.key.clone(), dir.clone());
                dir
            }
        };
        task.tool_path = vec![dir.join("bin"), dir.join("venv").join("bin")];
    }
    Ok(())
}

/// The Debian packages the host has, asked once each.
#[derive(Default)]
struct HostPackages {
    known: BTreeMap<String, bool>,
}

impl HostPackages {
    fn require(&mut self, task: &Task) -> Result<(), ProvisionError> {
        let mut missing = Vec::new();
        for package in &task.environment.debian {
            let has = match self.known.get(package) {
                Some(has) => *has,
                None => {
                    let has = installed(package).map_err(|error| ProvisionError::NoDpkg {
                        task: task.id.clone(),
                        error,
                    })?;
                    self.known.insert(package.clone(), has);
                    has
                }
            };
            if !has {
                missing.push(package.as_str());
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ProvisionError::MissingDebian {
                task: task.id.clone(),
                missing: missing.join(" "),
            })
        }
    }
}

fn installed(package: &str) -> std::io::Result<bool> {
    let output = std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Abbrev}", package])
        .output()?;
    Ok(output.status.success() && String::from_utf8_lossy(&output.stdout).starts_with("ii"))
}

/// One tool environment: the requirements, sorted, and whether it has the
/// stand-ins, keyed with the host's Python by hash.
struct EnvSpec {
    requirements: Vec<String>,
    key: String,
}

impl EnvSpec {
    fn of(task: &Task, host_python: &str) -> EnvSpec {
        let requirements: BTreeSet<String> = task
            .environment
            .python
            .iter()
            .map(|r| r.trim().to_string())
            .collect();
        let requirements: Vec<String> = requirements.into_iter().collect();
        let mut hasher = Sha256::new();
        // A stand-in changed in the source is a new environment: the old
        // one's copy would otherwise be used for good.
        for part in [LAYOUT, APT_GET, FETCH, UV, host_python] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        for requirement in &requirements {
            hasher.update(requirement.as_bytes());
            hasher.update([0]);
        }
        let digest = hasher.finalize();
        let key = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        EnvSpec { requirements, key }
    }

    /// The environment's directory, built first if the cache lacks it. A
    /// virtual environment names its own path in its scripts, so it is
    /// built where it stays; its `COMPLETE` marker is written last, so a
    /// build cut short is never taken for a finished one, and a lock keeps
    /// two runs from building the same one at once.
    async fn ensure(
        &self,
        root: &Path,
        task: &str,
        confined: bool,
        note: ProvisionNote<'_>,
    ) -> Result<PathBuf, ProvisionError> {
        let dir = root.join(&self.key);
        let complete = dir.join(COMPLETE);
        if complete.is_file() {
            return Ok(dir);
        }
        std::fs::create_dir_all(root).map_err(io(root))?;
        let _lock = BuildLock::acquire(root.join(format!("{}.lock", self.key)), note).await?;
        if complete.is_file() {
            return Ok(dir);
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
        }
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        note(match self.requirements.is_empty() {
            true => format!(
                "task `{task}`: making its tool environment in {}",
                dir.display()
            ),
            false => format!(
                "task `{task}`: installing {} into {}",
                self.requirements.join(" "),
                dir.display()
            ),
        });
        self.install(&dir, task, confined).await?;
        self.write_stand_ins(&dir)?;
        std::fs::write(&complete, self.requirements.join("\n")).map_err(io(&complete))?;
        Ok(dir)
    }

    async fn install(&self, dir: &Path, task: &str, confined: bool) -> Result<(), ProvisionError> {
        let mut script = String::from("set -e\n");
        if self.requirements.is_empty() {
            script.push_str("python3 -m venv --without-pip venv\n");
        } else {
            script.push_str("python3 -m venv venv\n");
            script.push_str(
                "venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check -q",
            );
            for requirement in &self.requirements {
                script.push(' ');
                script.push_str(&shell_quote(requirement));
            }
            script.push('\n');
        }
        let confinement = match confined {
            true => Confinement::workspace_write(dir),
            false => Confinement::off(),
        };
        let env = pip_settings();
        let spec = CommandSpec {
            script: &script,
            cwd: dir,
            env: &env,
            timeout: INSTALL_TIMEOUT,
            output_limit: 16 * 1024,
            confinement: &confinement,
        };
        let failed = |output: String| ProvisionError::Python {
            task: task.to_string(),
            requirements: self.requirements.join(" "),
            output,
        };
        let output = tack_sandbox::run(&spec)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if output.success() {
            Ok(())
        } else {
            Err(failed(
                format!("{}{}", output.stdout, output.stderr)
                    .trim()
                    .to_string(),
            ))
        }
    }

    fn write_stand_ins(&self, dir: &Path) -> Result<(), ProvisionError> {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).map_err(io(&bin))?;
        let names: Vec<String> = self
            .requirements
            .iter()
            .map(|r| requirement_name(r))
            .collect();
        let uv = UV
            .replace(
                "@VENV@",
                &shell_quote(&dir.join("venv").display().to_string()),
            )
            .replace("@PACKAGES@", &names.join(" "))
            .replace("@PYTHON_VERSION@", &shell_quote(&python_minor()));
        for (name, body) in [
            ("apt-get", APT_GET),
            ("apt", APT_GET),
            ("curl", FETCH),
            ("wget", FETCH),
            ("uv", uv.as_str()),
            ("uvx", uv.as_str()),
        ] {
            let path = bin.join(name);
            std::fs::write(&path, body).map_err(io(&path))?;
            make_executable(&path)?;
        }
        Ok(())
    }
}

/// A directory created atomically while an environment is built, removed
/// when the build ends; one older than the install timeout is taken for
/// the leftover of a run that was killed.
struct BuildLock {
    path: PathBuf,
}

impl BuildLock {
    async fn acquire(path: PathBuf, note: ProvisionNote<'_>) -> Result<BuildLock, ProvisionError> {
        let mut told = false;
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(BuildLock { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&path)(e)),
            }
            let age = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok());
            if age.is_some_and(|age| age > INSTALL_TIMEOUT + Duration::from_secs(60)) {
                let _ = std::fs::remove_dir(&path);
                continue;
            }
            if !told {
                note(format!(
                    "waiting for another run building {}",
                    path.display()
                ));
                told = true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

fn make_executable(path: &Path) -> Result<(), ProvisionError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(io(path))
}

/// pip's own settings (index, find-links, proxies) from tack's
/// environment: the sandbox passes nothing it is not given.
fn pip_settings() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(name, _)| {
            let upper = name.to_ascii_uppercase();
            upper.starts_with("PIP_") || upper.ends_with("_PROXY")
        })
        .collect()
}

/// The host's `python3`, as `sys.version` says it, with its path: the
/// environment is built from it, so it is part of the cache key.
fn host_python() -> String {
    std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable, sys.version)"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn python_minor() -> String {
    std::process::Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// A requirement's distribution name, normalised as pip compares them.
pub fn requirement_name(requirement: &str) -> String {
    let end = requirement
        .find(|c: char| "=<>!~ @[;".contains(c))
        .unwrap_or(requirement.len());
    requirement[..end]
        .to_ascii_lowercase()
        .replace(['_', '.'], "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_requirements_as_pip_compares_them() {
        assert_eq!(requirement_name("pytest==8.4.1"), "pytest");
        assert_eq!(
            requirement_name("Pytest_JSON.ctrf>=0.3"),
            "pytest-json-ctrf"
        );
        assert_eq!(requirement_name("requests[socks]"), "requests");
    }
}
