//! A session directory (`tack exec --session DIR`): `session.json` holds
//! what the run was started with, `events.jsonl` every event as one JSON
//! line, `{"seq": N, "event": {...}}`, written and synced to disk before
//! the run goes on. A killed run leaves at most a torn last line, which
//! reading skips and resuming cuts off; [`Restored::from_events`] rebuilds
//! the conversation from the log (`tack exec --resume DIR`) and
//! [`LogFollower`] streams it (`tack events DIR`).
//!
//! [`Restored::from_events`]: super::Restored::from_events

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tack_protocol::{Event, HarnessConfig};

pub const EVENTS_FILE: &str = "events.jsonl";
pub const SETTINGS_FILE: &str = "session.json";
/// The event that ends a session's log. It is the front end's (it carries
/// the run's outcome and verification), so it is no [`Event`].
pub const FINISHED: &str = "exec_finished";

/// The type of the line a run cut off by Ctrl-C ends with: the session is
/// not finished (`tack exec --resume` carries it on), but this run is.
pub const INTERRUPTED: &str = "exec_interrupted";

/// What a session was started with: enough to carry it on. Everything in
/// it is the agent's or the protocol's; the model is kept as the text the
/// user gave, since building it is the harness's business, not the log's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[error("{0} holds no session log ({EVENTS_FILE}); start one with `tack exec --session {0} …`")]
    NoLog(String),
    #[error("{path}: {error}")]
    Io { path: String, error: io::Error },
    #[error(
        "{path} line {line}: {error}; the log is damaged there (the lines before it read, a \
         torn last line would have been skipped)"
    )]
    Corrupt {
        path: String,
        line: usize,
        error: String,
    },
    #[error("{path}: {error}; the session's settings are damaged: start a new session")]
    CorruptSettings { path: String, error: String },
    #[error(
        "{0} is in use: another tack is carrying the session on; wait for it to end (`tack \
         events {0} --follow` shows it), or stop it"
    )]
    InUse(String),
}

/// Holds `file` (the session's log) for this process alone until it is
/// closed: two runs appending to one session would run every tool call
/// twice and number the events twice over.
fn hold(file: &File, dir: &Path) -> Result<(), SessionError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(SessionError::InUse(dir.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(error)) => Err(SessionError::Io {
            path: dir.join(EVENTS_FILE).display().to_string(),
            error,
        }),
    }
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

/// A line of the log: an event (or the final `exec_finished`) and its
/// sequence number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub seq: u64,
    pub event: serde_json::Value,
}

impl LogLine {
    /// The line as the log, `tack exec --json` and `tack events` write it
    /// (without its newline).
    pub fn to_json(&self) -> String {
        serde_json::json!({ "seq": self.seq, "event": self.event }).to_string()
    }

    /// Whether this line ends the session.
    pub fn is_finished(&self) -> bool {
        self.event.get("type").and_then(serde_json::Value::as_str) == Some(FINISHED)
    }

    /// Whether this line ends the run that wrote it: the session finished,
    /// or the run was interrupted (a resume may go on after it).
    pub fn ends_run(&self) -> bool {
        self.is_finished()
            || self.event.get("type").and_then(serde_json::Value::as_str) == Some(INTERRUPTED)
    }
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
        hold(&file, dir)?;
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
            serde_json::from_str(&text).map_err(|e| SessionError::CorruptSettings {
                path: settings_path.display().to_string(),
                error: e.to_string(),
            })?;
        let path = dir.join(EVENTS_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        hold(&file, dir)?;
        // Resuming past a damaged line would lose what it held: refused.
        let read = read_complete(&mut file, &path, 0, 1)?;
        if let Some(damaged) = read.damaged {
            return Err(damaged);
        }
        let (lines, complete) = (read.lines, read.end);
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

/// Reads a session's log as it grows, each complete line once: what a
/// reader that reconnects or follows a running session needs.
#[derive(Debug)]
pub struct LogFollower {
    file: File,
    path: PathBuf,
    offset: u64,
    /// The number of the line at `offset`, from 1.
    line: usize,
}

impl LogFollower {
    /// Opens the log of the session in `dir`, from its first line.
    pub fn open(dir: &Path) -> Result<LogFollower, SessionError> {
        let path = dir.join(EVENTS_FILE);
        let file = File::open(&path).map_err(|_| SessionError::NoLog(dir.display().to_string()))?;
        Ok(LogFollower {
            file,
            path,
            offset: 0,
            line: 1,
        })
    }

    /// The complete lines written since the last call; a line still being
    /// written is left for the next. A damaged line stops the reading:
    /// the lines before it come back with it, and it is met again next time.
    pub fn read_new(&mut self) -> Result<ReadLines, SessionError> {
        let read = read_complete(&mut self.file, &self.path, self.offset, self.line)?;
        self.offset = read.end;
        self.line = read.next_line;
        Ok(read)
    }
}

/// The lines read from a log.
#[derive(Debug)]
pub struct ReadLines {
    pub lines: Vec<LogLine>,
    /// The line that stopped the reading, if one did not parse.
    pub damaged: Option<SessionError>,
    /// Where the next reading starts: the byte after the last line read,
    /// and that line's number in the file.
    end: u64,
    next_line: usize,
}

/// The log's complete lines from byte `from` (line `first_line` of the
/// file), up to a damaged one; a line without its newline is being
/// written, or was torn: it is left, not damaged.
fn read_complete(
    file: &mut File,
    path: &Path,
    from: u64,
    first_line: usize,
) -> Result<ReadLines, SessionError> {
    file.seek(SeekFrom::Start(from)).map_err(io_error(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_error(path))?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut read = ReadLines {
        lines: Vec::new(),
        damaged: None,
        end: from,
        next_line: first_line,
    };
    for line in bytes[..complete].split_inclusive(|&b| b == b'\n') {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        if !text.is_empty() {
            match serde_json::from_slice::<LogLine>(text) {
                Ok(parsed) => read.lines.push(parsed),
                Err(e) => {
                    read.damaged = Some(SessionError::Corrupt {
                        path: path.display().to_string(),
                        line: read.next_line,
                        error: e.to_string(),
                    });
                    return Ok(read);
                }
            }
        }
        read.end += line.len() as u64;
        read.next_line += 1;
    }
    Ok(read)
}

/// The protocol events among the log's lines (not `exec_finished`), for
/// [`super::Restored::from_events`].
pub fn events(lines: &[LogLine]) -> Vec<Event> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_value(line.event.clone()).ok())
        .collect()
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
        let (read, lines, mut log) = SessionLog::reopen(&session).unwrap();
        assert_eq!(read, settings());
        assert_eq!(lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(log.append(&serde_json::json!({"type": "c"})).unwrap(), 2);
        let text = std::fs::read_to_string(&events).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(matches!(
            SessionLog::create(&session, &settings()),
            Err(SessionError::Exists(_))
        ));
    }

    /// flock locks are per open file: a second open, as a second process
    /// makes, is refused while the first holds the log.
    #[test]
    fn a_session_carried_on_is_held_against_a_second_run() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let log = SessionLog::create(&session, &settings()).unwrap();
        assert!(matches!(
            SessionLog::reopen(&session),
            Err(SessionError::InUse(_))
        ));
        drop(log);
        let (_, _, again) = SessionLog::reopen(&session).unwrap();
        assert!(matches!(
            SessionLog::reopen(&session),
            Err(SessionError::InUse(_))
        ));
        drop(again);
        assert!(SessionLog::reopen(&session).is_ok());
    }

    #[test]
    fn a_follower_reads_each_complete_line_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            LogFollower::open(dir.path()),
            Err(SessionError::NoLog(_))
        ));
        let mut log = SessionLog::create(dir.path(), &settings()).unwrap();
        let mut follower = LogFollower::open(dir.path()).unwrap();
        assert!(follower.read_new().unwrap().lines.is_empty());
        log.append(&serde_json::json!({"type": "a"})).unwrap();
        let first = follower.read_new().unwrap().lines;
        assert_eq!(first.len(), 1);
        let again: LogLine = serde_json::from_str(&first[0].to_json()).unwrap();
        assert_eq!(again, first[0]);
        log.append(&serde_json::json!({"type": FINISHED})).unwrap();
        let next = follower.read_new().unwrap().lines;
        assert_eq!(next.iter().map(|l| l.seq).collect::<Vec<_>>(), [1]);
        assert!(next[0].is_finished() && !first[0].is_finished());
        assert!(follower.read_new().unwrap().lines.is_empty());
    }

    #[test]
    fn missing_settings_say_how_to_start_a_session() {
        let dir = tempfile::tempdir().unwrap();
        let error = SessionLog::reopen(dir.path()).unwrap_err();
        assert!(error.to_string().contains("tack exec --session"), "{error}");
    }

    #[test]
    fn a_damaged_line_stops_the_reading_after_the_lines_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::create(dir.path(), &settings()).unwrap();
        let mut follower = LogFollower::open(dir.path()).unwrap();
        log.append(&serde_json::json!({"type": "a"})).unwrap();
        assert_eq!(follower.read_new().unwrap().lines.len(), 1);
        log.append(&serde_json::json!({"type": "b"})).unwrap();
        let events = dir.path().join(EVENTS_FILE);
        let mut file = OpenOptions::new().append(true).open(&events).unwrap();
        file.write_all(b"{\"seq\": 2, \"ev\n").unwrap();
        log.append(&serde_json::json!({"type": "c"})).unwrap();

        let read = follower.read_new().unwrap();
        assert_eq!(read.lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [1]);
        let damaged = read.damaged.map(|e| e.to_string()).unwrap_or_default();
        assert!(damaged.contains("events.jsonl line 3: "), "{damaged}");
        // Met again, not skipped; and resuming over it is refused.
        let again = follower.read_new().unwrap();
        assert!(again.lines.is_empty() && again.damaged.is_some());
        drop(log);
        assert!(matches!(
            SessionLog::reopen(dir.path()),
            Err(SessionError::Corrupt { line: 3, .. })
        ));
    }
}
