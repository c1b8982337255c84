//! A session directory (`tack exec --session DIR`): `session.json` holds
//! what the run was started with, `events.jsonl` every event as one JSON
//! line, `{"seq": N, "event": {...}}`, written and synced to disk before
//! the run goes on. A killed run leaves at most a torn last line, which
//! reading skips and resuming cuts off; `tack exec --resume DIR` carries on
//! from the log and `tack events DIR` streams it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tack_protocol::{Event, HarnessConfig};

pub const EVENTS_FILE: &str = "events.jsonl";
pub const SETTINGS_FILE: &str = "session.json";
/// The event that ends a session's log.
pub const FINISHED: &str = "exec_finished";

/// What a session was started with: enough to carry it on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    pub instruction: String,
    pub workspace: PathBuf,
    /// The model as given (`sim`, `openai:gpt-4o`), parsed again on resume.
    pub model: String,
    pub base_url: Option<String>,
    pub seed: u64,
    pub checks: Vec<String>,
    pub config: HarnessConfig,
}

/// Why a session directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "{0} already holds a session; resume it with `tack exec --resume {0}`, or give a new directory"
    )]
    Exists(String),
    #[error(
        "{0} holds no session (no {SETTINGS_FILE}); start one with `tack exec --session {0} …`"
    )]
    Missing(String),
    #[error("{path}: {error}")]
    Io { path: String, error: io::Error },
    #[error("{path} line {line}: {error}; the log is damaged beyond its last line")]
    Corrupt {
        path: String,
        line: usize,
        error: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SessionError + '_ {
    move |error| SessionError::Io {
        path: path.display().to_string(),
        error,
    }
}

/// The open log a run appends to.
#[derive(Debug)]
pub struct SessionLog {
    file: File,
    path: PathBuf,
    next_seq: u64,
}

/// A line of the log, as read back.
#[derive(Debug, Deserialize)]
pub struct LogLine {
    pub seq: u64,
    pub event: serde_json::Value,
}

impl SessionLog {
    /// Starts a session in `dir` (created if missing; it must not hold one).
    pub fn create(dir: &Path, settings: &SessionSettings) -> Result<SessionLog, SessionError> {
        let settings_path = dir.join(SETTINGS_FILE);
        if settings_path.exists() {
            return Err(SessionError::Exists(dir.display().to_string()));
        }
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let text = serde_json::to_string_pretty(settings).map_err(|e| SessionError::Io {
            path: settings_path.display().to_string(),
            error: e.into(),
        })?;
        std::fs::write(&settings_path, text).map_err(io_error(&settings_path))?;
        let path = dir.join(EVENTS_FILE);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        Ok(SessionLog {
            file,
            path,
            next_seq: 0,
        })
    }

    /// Opens a session to carry it on: its settings, its events (a torn
    /// last line is cut off the file), and the log to append to.
    pub fn reopen(dir: &Path) -> Result<(SessionSettings, Vec<LogLine>, SessionLog), SessionError> {
        let settings_path = dir.join(SETTINGS_FILE);
        if !settings_path.exists() {
            return Err(SessionError::Missing(dir.display().to_string()));
        }
        let text = std::fs::read_to_string(&settings_path).map_err(io_error(&settings_path))?;
        let settings: SessionSettings =
            serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
                path: settings_path.display().to_string(),
                line: e.line(),
                error: e.to_string(),
            })?;
        let path = dir.join(EVENTS_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        let (lines, complete) = read_complete(&mut file, &path, 0)?;
        file.set_len(complete).map_err(io_error(&path))?;
        let next_seq = lines.last().map_or(0, |l| l.seq + 1);
        Ok((
            settings,
            lines,
            SessionLog {
                file,
                path,
                next_seq,
            },
        ))
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Appends one event under the next sequence number and syncs it.
    pub fn append(&mut self, event: &serde_json::Value) -> Result<u64, SessionError> {
        let seq = self.next_seq;
        let mut line = serde_json::json!({ "seq": seq, "event": event }).to_string();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(io_error(&self.path))?;
        self.next_seq += 1;
        Ok(seq)
    }
}

/// The log's complete lines from byte `from`, and where the last complete
/// line ends (a line without its newline is being written, or was torn).
pub fn read_complete(
    file: &mut File,
    path: &Path,
    from: u64,
) -> Result<(Vec<LogLine>, u64), SessionError> {
    file.seek(SeekFrom::Start(from)).map_err(io_error(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_error(path))?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut lines = Vec::new();
    for (i, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let parsed: LogLine = serde_json::from_slice(line).map_err(|e| SessionError::Corrupt {
            path: path.display().to_string(),
            line: i + 1,
            error: e.to_string(),
        })?;
        lines.push(parsed);
    }
    Ok((lines, from + complete as u64))
}

/// The protocol events among the log's lines (not `exec_finished`).
pub fn events(lines: &[LogLine]) -> Vec<Event> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_value(line.event.clone()).ok())
        .collect()
}

/// Whether a line is the session's end.
pub fn is_finished(event: &serde_json::Value) -> bool {
    event.get("type").and_then(serde_json::Value::as_str) == Some(FINISHED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SessionSettings {
        SessionSettings {
            instruction: "fix it".into(),
            workspace: "/w".into(),
            model: "sim".into(),
            base_url: None,
            seed: 0,
            checks: vec![],
            config: HarnessConfig::default(),
        }
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_cut_off_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let mut log = SessionLog::create(&session, &settings()).unwrap();
        assert_eq!(log.append(&serde_json::json!({"type": "a"})).unwrap(), 0);
        assert_eq!(log.append(&serde_json::json!({"type": "b"})).unwrap(), 1);
        drop(log);
        let events = session.join(EVENTS_FILE);
        let mut file = OpenOptions::new().append(true).open(&events).unwrap();
        file.write_all(b"{\"seq\": 2, \"ev").unwrap();
        let (_, lines, mut log) = SessionLog::reopen(&session).unwrap();
        assert_eq!(lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(log.append(&serde_json::json!({"type": "c"})).unwrap(), 2);
        let text = std::fs::read_to_string(&events).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(matches!(
            SessionLog::create(&session, &settings()),
            Err(SessionError::Exists(_))
        ));
    }
}
