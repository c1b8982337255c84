//! Reading a Harbor job directory, which came from elsewhere: each file as
//! a regular file only, within a size, each trial's `result.json` into what
//! the import needs of it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tack_protocol::time::parse_rfc3339_ms;

use super::SkippedTrial;
use crate::ImportError;
use crate::inspect::safe_name;

/// One trial's `result.json`, read.
pub(super) struct HarborTrial {
    pub dir: PathBuf,
    pub result: Value,
    pub task: String,
    pub variant: String,
    pub model: String,
    pub started_at_ms: i64,
}

/// Bytes of a job's JSON file read: a trajectory of thousands of steps is
/// tens of MiB.
pub(super) const JSON_LIMIT: u64 = 512 * 1024 * 1024;

/// A job's JSON file (see [`read_job_file`]).
pub(super) fn read_json(dir: &Path, relative: &str) -> Result<Value, String> {
    let text = read_job_file(dir, relative, JSON_LIMIT)?;
    serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))
}

/// The file `relative` beneath `dir`, of a job directory that came from
/// elsewhere: a regular file (not a FIFO, which would hang the import) of
/// at most `limit` bytes, reached without a link that leads out of `dir`
/// (`agent/` or `result.json` linked to `~/.ssh`, which would land in the
/// imported trace).
pub(super) fn read_job_file(dir: &Path, relative: &str, limit: u64) -> Result<String, String> {
    use crate::beneath::{NotRead, read_within};
    match read_within(dir, relative, limit) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(NotRead::TooBig) => Err(format!(
            "larger than {} MiB, more than any Harbor job writes",
            limit / (1024 * 1024)
        )),
        Err(NotRead::Missing) => Err("no such file".to_string()),
        Err(NotRead::Outside) => Err(format!(
            "it is reached through a link leading out of {}: not followed",
            dir.display()
        )),
        Err(NotRead::Unreadable(why)) => Err(format!("it cannot be read: {why}")),
    }
}

/// Every trial directory (one holding `result.json`); a malformed one is
/// skipped with the reason.
pub(super) fn read_trials(
    job_dir: &Path,
    skipped: &mut Vec<SkippedTrial>,
) -> Result<Vec<HarborTrial>, ImportError> {
    let entries = std::fs::read_dir(job_dir).map_err(|source| ImportError::Io {
        path: job_dir.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        // `.sources` and other hidden directories are Harbor's caches.
        .filter(|path| {
            !path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .filter(|path| path.join("result.json").is_file())
        .collect();
    dirs.sort();
    let mut trials = Vec::new();
    for dir in dirs {
        let path = dir.join("result.json");
        match read_trial(&dir) {
            Ok(trial) => trials.push(trial),
            Err(reason) => skipped.push(SkippedTrial { path, reason }),
        }
    }
    Ok(trials)
}

fn read_trial(dir: &Path) -> Result<HarborTrial, String> {
    let result = read_json(dir, "result.json")?;
    let text =
        |value: &Value, field: &str| value.get(field).and_then(Value::as_str).map(str::to_string);
    let task_name = text(&result, "task_name").ok_or("it has no `task_name`")?;
    let agent = result.get("agent_info").ok_or("it has no `agent_info`")?;
    let agent_name = text(agent, "name").ok_or("its `agent_info` has no `name`")?;
    let model = agent
        .get("model_info")
        .and_then(|info| text(info, "name"))
        .unwrap_or_default();
    // `org/name` task names: the task is the last part, as a task directory is named.
    let task = safe_name(task_name.rsplit('/').next().unwrap_or(&task_name));
    let variant = if model.is_empty() {
        safe_name(&agent_name)
    } else {
        safe_name(&format!("{agent_name}-{}", model.replace('/', "-")))
    };
    let started_at_ms = text(&result, "started_at")
        .and_then(|at| parse_rfc3339_ms(&at))
        .unwrap_or(0);
    Ok(HarborTrial {
        dir: dir.to_path_buf(),
        model: if model.is_empty() { agent_name } else { model },
        result,
        task,
        variant,
        started_at_ms,
    })
}
