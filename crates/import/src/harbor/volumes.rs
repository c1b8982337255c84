//! A compose service's `volumes`, as tack mounts them in engine mode: a
//! named volume (`db-data:/var/lib/postgresql/data`) becomes a volume of
//! the trial, shared by the containers that name it; a file or directory
//! of the task (`./db/init.sql:/docker-entrypoint-initdb.d/init.sql`) is
//! copied into the imported task and, at run time, for each trial. What
//! would reach the host (an absolute path, a path out of the task, an
//! `external` volume) is not reproduced, and said so.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use serde_norway::Value;

/// One mount of a compose service.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComposeVolume {
    pub source: VolumeSource,
    /// Where the container sees it.
    pub at: String,
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum VolumeSource {
    /// A named volume.
    Named(String),
    /// A file or directory of the task, relative to the task directory.
    Task(PathBuf),
}

/// The service's mounts, and what of its `volumes` is not reproduced.
/// `compose_dir` is the directory relative paths start from; `task_dir` the
/// task's; `external` the top-level volumes the engine must already hold.
pub(super) fn volumes_of(
    body: &Value,
    compose_dir: &Path,
    task_dir: &Path,
    external: &[String],
) -> (Vec<ComposeVolume>, Vec<String>) {
    let mut mounts = Vec::new();
    let mut unreproduced = Vec::new();
    let Some(items) = body.get("volumes").and_then(Value::as_sequence) else {
        return (mounts, unreproduced);
    };
    for item in items {
        let (kind, source, target, read_only) = match item {
            Value::String(short) => short_syntax(short),
            long => (
                long.get("type").and_then(Value::as_str).map(str::to_string),
                long.get("source")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                long.get("target")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                long.get("read_only").and_then(Value::as_bool) == Some(true),
            ),
        };
        let said = || match item {
            Value::String(short) => format!("`volumes: {short}`"),
            _ => format!("`volumes` at {target}"),
        };
        if harbor_logs(&target) {
            // Harbor's own log directories, which tack gives every trial.
            continue;
        }
        if target.contains('$') {
            unreproduced.push(format!("{} (its target names a variable)", said()));
            continue;
        }
        if target.is_empty() || !target.starts_with('/') {
            unreproduced.push(format!("{} (no absolute target)", said()));
            continue;
        }
        let source = match (kind.as_deref(), source) {
            // An anonymous volume holds what the image holds there, as the
            // container's own writable layer does for one trial.
            (None | Some("volume"), None) => continue,
            (Some("tmpfs" | "npipe" | "cluster" | "image"), _) | (_, None) => {
                unreproduced.push(said());
                continue;
            }
            (_, Some(source)) => source,
        };
        let is_path = kind.as_deref() == Some("bind")
            || source.starts_with(['.', '/', '~'])
            || source.starts_with("${CONTEXT_DIR}")
            || source.starts_with("$CONTEXT_DIR");
        let source = if is_path {
            match task_path(&source, compose_dir, task_dir) {
                Some(path) => VolumeSource::Task(path),
                None => {
                    unreproduced.push(format!("{} (not a file of the task)", said()));
                    continue;
                }
            }
        } else if external.contains(&source) {
            unreproduced.push(format!("{} (an external volume)", said()));
            continue;
        } else {
            VolumeSource::Named(source)
        };
        mounts.push(ComposeVolume {
            source,
            at: target,
            read_only,
        });
    }
    (mounts, unreproduced)
}

/// Whether `target` is where Harbor mounts its logs (`/logs/verifier`,
/// `/logs/agent`), spelled with the variables of its own compose file.
fn harbor_logs(target: &str) -> bool {
    ["ENV_VERIFIER_LOGS_PATH", "ENV_AGENT_LOGS_PATH"]
        .iter()
        .any(|name| target == format!("${{{name}}}") || target == format!("${name}"))
}

/// The top-level volumes marked `external: true`.
pub(super) fn external_volumes(compose: &Value) -> Vec<String> {
    let Some(map) = compose.get("volumes").and_then(Value::as_mapping) else {
        return Vec::new();
    };
    map.iter()
        .filter(|(_, body)| {
            matches!(
                body.get("external"),
                Some(Value::Bool(true)) | Some(Value::Mapping(_))
            )
        })
        .filter_map(|(name, _)| name.as_str().map(str::to_string))
        .collect()
}

/// `SOURCE:TARGET[:MODE]` or `TARGET`: (type, source, target, read-only).
fn short_syntax(short: &str) -> (Option<String>, Option<String>, String, bool) {
    let parts: Vec<&str> = short.split(':').collect();
    match parts.as_slice() {
        [target] => (None, None, target.to_string(), false),
        [source, target] => (None, Some(source.to_string()), target.to_string(), false),
        [source, target, mode, ..] => (
            None,
            Some(source.to_string()),
            target.to_string(),
            mode.split(',').any(|m| m == "ro"),
        ),
        [] => (None, None, String::new(), false),
    }
}

/// `source`, a path relative to `compose_dir` (Harbor's `CONTEXT_DIR`
/// being that directory), relative to `task_dir` when it lies inside the
/// task and exists; `None` for a path of the host.
fn task_path(source: &str, compose_dir: &Path, task_dir: &Path) -> Option<PathBuf> {
    let relative = ["${CONTEXT_DIR}", "$CONTEXT_DIR"]
        .iter()
        .find_map(|variable| source.strip_prefix(variable))
        .map_or_else(|| source.to_string(), |rest| format!(".{rest}"));
    if relative.starts_with(['/', '~']) || relative.contains('$') {
        return None;
    }
    let joined = compose_dir.join(&relative);
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    let task_dir = task_dir.canonicalize().ok()?;
    let found = normal.canonicalize().ok()?;
    // A link in the task that leads out of it is refused with the task.
    found.strip_prefix(&task_dir).ok().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(yaml: &str, dir: &Path) -> (Vec<ComposeVolume>, Vec<String>) {
        let body: Value = match serde_norway::from_str(yaml) {
            Ok(body) => body,
            Err(e) => panic!("{e}"),
        };
        volumes_of(
            &body,
            &dir.join("environment"),
            dir,
            &["shared-host".to_string()],
        )
    }

    #[test]
    fn named_volumes_task_files_and_what_reaches_the_host() {
        let Ok(dir) = tempfile::tempdir() else {
            panic!("no temporary directory")
        };
        let db = dir.path().join("environment/db");
        if let Err(e) = std::fs::create_dir_all(&db) {
            panic!("{e}");
        }
        if let Err(e) = std::fs::write(db.join("init.sql"), "select 1;\n") {
            panic!("{e}");
        }
        let (mounts, unreproduced) = parsed(
            "volumes:\n\
             - db-data:/var/lib/postgresql/data\n\
             - ./db/init.sql:/docker-entrypoint-initdb.d/init.sql:ro,z\n\
             - /cache\n\
             - /etc/passwd:/host-passwd:ro\n\
             - ../../outside:/outside\n\
             - shared-host:/shared\n\
             - type: bind\n  source: ${CONTEXT_DIR}/db\n  target: /db\n  read_only: true\n\
             - type: tmpfs\n  target: /scratch\n\
             - ${HOST_VERIFIER_LOGS_PATH}:${ENV_VERIFIER_LOGS_PATH}\n\
             - $HOST_AGENT_LOGS_PATH:$ENV_AGENT_LOGS_PATH\n\
             - data:${DATA_DIR}\n",
            dir.path(),
        );
        assert_eq!(
            mounts,
            [
                ComposeVolume {
                    source: VolumeSource::Named("db-data".into()),
                    at: "/var/lib/postgresql/data".into(),
                    read_only: false,
                },
                ComposeVolume {
                    source: VolumeSource::Task("environment/db/init.sql".into()),
                    at: "/docker-entrypoint-initdb.d/init.sql".into(),
                    read_only: true,
                },
                ComposeVolume {
                    source: VolumeSource::Task("environment/db".into()),
                    at: "/db".into(),
                    read_only: true,
                },
            ]
        );
        assert_eq!(
            unreproduced,
            [
                "`volumes: /etc/passwd:/host-passwd:ro` (not a file of the task)",
                "`volumes: ../../outside:/outside` (not a file of the task)",
                "`volumes: shared-host:/shared` (an external volume)",
                "`volumes` at /scratch",
                "`volumes: data:${DATA_DIR}` (its target names a variable)",
            ]
        );
    }
}
