//! Whether a process is still writing a run. Readers must know: a live
//! run's journals are trials in progress, and recovering them (as a
//! report, a query or a merge does for a run that was killed) would store
//! them as `cancelled` under the writer's feet.
//!
//! The writer claims the run in `run.pid`: its process id, its host, and
//! when the process started (so a later process that got the same id is not
//! taken for it), and touches the file while it runs. On the writer's host
//! the process table answers; from another host (shards on a shared traces
//! volume, read from a login node) only the touch can: a run whose claim has
//! not been touched for [`STALE_AFTER`] is not being written.

use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use crate::TraceError;

/// Holds the claim of the process writing the run, while it runs. It means
/// nothing once copied: copies of a run leave it out.
pub const PID_FILE: &str = "run.pid";

/// How often a writer touches its claim.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// How long a claim from another host stays believed without a touch:
/// several heartbeats, and room for clocks a little apart.
pub const STALE_AFTER: Duration = Duration::from_secs(120);

/// Who writes a run, as its claim says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writer {
    /// No claim: nobody (the run finished, or was copied).
    None,
    /// A process of this host that is still there.
    Here { pid: u32 },
    /// A process of another host, whose claim was touched lately.
    Elsewhere { host: String, pid: u32 },
    /// A claim nobody keeps: the process is gone (this host), or its claim
    /// has not been touched for [`STALE_AFTER`] (another host).
    Gone,
}

impl Writer {
    pub fn is_live(&self) -> bool {
        matches!(self, Writer::Here { .. } | Writer::Elsewhere { .. })
    }
}

impl std::fmt::Display for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Writer::None => f.write_str("no process"),
            Writer::Here { pid } => write!(f, "process {pid} of this host"),
            Writer::Elsewhere { host, pid } => write!(
                f,
                "process {pid} of host {host}, whose {PID_FILE} is touched while it runs: \
                 a killed one's is taken for stopped {} s after its last touch",
                STALE_AFTER.as_secs()
            ),
            Writer::Gone => f.write_str("a process that has stopped"),
        }
    }
}

/// Whether a live process is still writing this run: its journals belong to
/// trials in progress, not to a crash.
pub fn run_in_progress(run_dir: &Path) -> bool {
    run_writer(run_dir).is_live()
}

/// Who writes the run in `run_dir`, from its claim.
pub fn run_writer(run_dir: &Path) -> Writer {
    let path = run_dir.join(PID_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return Writer::None;
    };
    // `pid [host [start]]`; a claim written before hosts were recorded
    // has the id alone, and is this host's.
    let mut words = text.split_whitespace();
    let Some(pid) = words.next().and_then(|p| p.parse::<u32>().ok()) else {
        return Writer::Gone;
    };
    let host = words.next();
    let start = words.next().and_then(|s| s.parse::<u64>().ok());
    match host {
        Some(host) if host != this_host() => {
            let touched = fs::metadata(&path).and_then(|m| m.modified()).ok();
            let age = touched.map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
            if age.is_some_and(|age| age < STALE_AFTER) {
                Writer::Elsewhere {
                    host: host.to_string(),
                    pid,
                }
            } else {
                Writer::Gone
            }
        }
        _ => match (process_start(pid), start) {
            (Some(now), Some(then)) if now == then => Writer::Here { pid },
            (Some(_), None) => Writer::Here { pid },
            _ => Writer::Gone,
        },
    }
}

/// Claims `run_dir` for this process and keeps the claim touched until the
/// returned guard (held by every clone of the run's writer) is dropped.
pub(crate) fn claim(run_dir: &Path) -> Result<Heartbeat, TraceError> {
    let path = run_dir.join(PID_FILE);
    let pid = std::process::id();
    let start = process_start(pid)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let claim = format!("{pid} {} {start}\n", this_host());
    fs::write(&path, claim).map_err(|e| TraceError::io(&path, e))?;
    let (stop, stopped) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("tack-run-heartbeat".into())
        .spawn(move || {
            // Ends when every holder of the guard is gone, or the claim is
            // (the run was closed).
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
                let touched = fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(SystemTime::now()));
                if touched.is_err() {
                    break;
                }
            }
        });
    spawned.map_err(|e| TraceError::io(run_dir, e))?;
    Ok(Heartbeat { _stop: stop })
}

/// Keeps a run's claim touched while held.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    _stop: mpsc::Sender<()>,
}

/// This host's name as its kernel has it (a container's own, in its UTS
/// namespace); `localhost` when unreadable.
fn this_host() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
        .unwrap_or_else(|| "localhost".to_string())
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// `/proc/<pid>/stat`); `None` when there is no such process.
fn process_start(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_here_and_a_stranger_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(run_writer(dir.path()), Writer::None);
        let _beat = claim(dir.path()).unwrap();
        assert_eq!(
            run_writer(dir.path()),
            Writer::Here {
                pid: std::process::id()
            }
        );
        // This process's id with another start: a later process.
        let pid = std::process::id();
        fs::write(
            dir.path().join(PID_FILE),
            format!("{pid} {} 1\n", this_host()),
        )
        .unwrap();
        assert_eq!(run_writer(dir.path()), Writer::Gone);
        // A claim of the old kind: the id alone.
        fs::write(dir.path().join(PID_FILE), pid.to_string()).unwrap();
        assert!(run_in_progress(dir.path()));
        fs::write(dir.path().join(PID_FILE), "4294967295").unwrap();
        assert!(!run_in_progress(dir.path()));
    }

    #[test]
    fn another_hosts_claim_holds_while_it_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        fs::write(&path, "1 some-other-node 5\n").unwrap();
        assert_eq!(
            run_writer(dir.path()),
            Writer::Elsewhere {
                host: "some-other-node".into(),
                pid: 1
            }
        );
        let old = SystemTime::now() - STALE_AFTER - Duration::from_secs(1);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(run_writer(dir.path()), Writer::Gone);
    }

    #[test]
    fn the_start_time_is_read_past_a_name_with_spaces() {
        let start = process_start(std::process::id()).unwrap();
        assert!(start > 0);
        assert_eq!(process_start(4_294_967_295), None);
    }
}
