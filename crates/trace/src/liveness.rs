//! Whether a process is still writing a run. Readers must know: a live
//! run's journals are trials in progress, and recovering them (as a
//! report, a query or a resume does for a run that was killed) would store
//! them as `cancelled` under the writer's feet.
//!
//! The writer claims the run in two files. `run.pid` holds its process id
//! alone, as it always has, so that older tack versions still read it.
//! `run.claim` says where that id means something: the host (its name, its
//! boot and its pid namespace) and when the process started, so that a
//! later process that got the same id is not taken for the writer; the
//! writer touches it while it runs. On the writer's host the process table
//! answers; elsewhere (shards on a shared traces volume, read from a login
//! node; a container with its own pid namespace) only the touch can: a
//! claim not touched for [`STALE_AFTER`] is a killed writer's. Clocks of
//! the hosts must agree to well within that.

use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use crate::TraceError;
use crate::fsutil::read_run_text;

/// Holds the id of the process writing the run, while it runs. It means
/// nothing once copied: copies of a run leave it out, and [`CLAIM_FILE`].
pub const PID_FILE: &str = "run.pid";

/// Where the process of [`PID_FILE`] runs, and when it started; touched
/// while it runs.
pub const CLAIM_FILE: &str = "run.claim";

/// The most of `run.pid` (a process id) or `run.claim` (a host name and a
/// time) read: a run's files may come from elsewhere.
const CLAIM_LIMIT: u64 = 4096;

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
    /// A process of another host (or pid namespace), whose claim was
    /// touched lately.
    Elsewhere { host: String, pid: u32 },
    /// A claim nobody keeps: the process is gone (this host), or its claim
    /// has not been touched for [`STALE_AFTER`] (elsewhere).
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
                "process {pid} of host {host} (taken for stopped {} s after its last sign of life)",
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
    let Ok(text) = read_run_text(&run_dir.join(PID_FILE), CLAIM_LIMIT) else {
        return Writer::None;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return Writer::Gone;
    };
    let claim_path = run_dir.join(CLAIM_FILE);
    // `host start`; a run written before claims has the id alone, and is
    // this host's.
    let Ok(claim) = read_run_text(&claim_path, CLAIM_LIMIT) else {
        return match process_start(pid) {
            Some(_) => Writer::Here { pid },
            None => Writer::Gone,
        };
    };
    let mut words = claim.split_whitespace();
    let host = words.next().unwrap_or_default();
    let start = words.next().and_then(|s| s.parse::<u64>().ok());
    if host == this_host() {
        return match (process_start(pid), start) {
            (Some(now), Some(then)) if now == then => Writer::Here { pid },
            _ => Writer::Gone,
        };
    }
    let touched = fs::metadata(&claim_path).and_then(|m| m.modified()).ok();
    let age = touched.map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
    match age {
        Some(age) if age < STALE_AFTER => Writer::Elsewhere {
            // The name, without the boot and namespace that make it exact.
            host: host.split('/').next().unwrap_or(host).to_string(),
            pid,
        },
        _ => Writer::Gone,
    }
}

/// Claims `run_dir` for this process (its claim first, then its id, each
/// whole: a reader never sees half of one) and keeps the claim touched
/// until the returned guard (held by every clone of the run's writer) is
/// dropped.
pub(crate) fn claim(run_dir: &Path) -> Result<Heartbeat, TraceError> {
    let pid = std::process::id();
    let start = process_start(pid)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let claim_path = run_dir.join(CLAIM_FILE);
    crate::fsutil::write_atomically(&claim_path, format!("{} {start}\n", this_host()).as_bytes())?;
    crate::fsutil::write_atomically(&run_dir.join(PID_FILE), pid.to_string().as_bytes())?;
    let (stop, stopped) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("tack-run-heartbeat".into())
        .spawn(move || {
            // Ends when every holder of the guard is gone, or the claim is
            // (the run was closed). A touch that fails otherwise (a network
            // file system's hiccup) is tried again at the next beat: giving
            // up would have the run taken for stopped elsewhere.
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
                let touched = fs::File::options()
                    .write(true)
                    .open(&claim_path)
                    .and_then(|file| file.set_modified(SystemTime::now()));
                if touched.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
                    break;
                }
            }
        });
    spawned.map_err(|e| TraceError::io(run_dir, e))?;
    Ok(Heartbeat { _stop: stop })
}

/// Ends the claim of a run that is done: neither file is left.
pub(crate) fn release(run_dir: &Path) -> Result<(), TraceError> {
    for name in [PID_FILE, CLAIM_FILE] {
        let path = run_dir.join(name);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(TraceError::io(&path, e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Keeps a run's claim touched while held.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    _stop: mpsc::Sender<()>,
}

/// This host as a process id of it is meaningful: its name (a container's
/// own, in its UTS namespace), its boot, and this process's pid namespace,
/// `name/boot/pidns`, without whitespace. Two hosts, or a container and its
/// host, that share a name differ in the rest.
fn this_host() -> &'static str {
    // The same for the whole process; readers ask it for every run they list.
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(read_this_host)
}

fn read_this_host() -> String {
    let read = |path: &str| {
        fs::read_to_string(path)
            .ok()
            .map(|t| {
                t.trim()
                    .replace(|c: char| c.is_whitespace() || c == '/', "_")
            })
            .filter(|t| !t.is_empty())
    };
    let name = read("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".to_string());
    let boot = read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let pidns = fs::read_link("/proc/self/ns/pid")
        .map(|p| {
            p.to_string_lossy()
                .replace(|c: char| c.is_whitespace() || c == '/', "_")
        })
        .unwrap_or_default();
    format!("{name}/{boot}/{pidns}")
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

    fn write(dir: &Path, name: &str, text: &str) {
        fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn this_process_is_here_and_a_stranger_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(run_writer(dir.path()), Writer::None);
        let beat = claim(dir.path()).unwrap();
        let pid = std::process::id();
        assert_eq!(run_writer(dir.path()), Writer::Here { pid });
        // The id alone, as older versions read it.
        assert_eq!(
            fs::read_to_string(dir.path().join(PID_FILE)).unwrap(),
            pid.to_string()
        );
        // This process's id with another start: a later process.
        write(dir.path(), CLAIM_FILE, &format!("{} 1\n", this_host()));
        assert_eq!(run_writer(dir.path()), Writer::Gone);
        // A claim of the old kind: the id alone.
        fs::remove_file(dir.path().join(CLAIM_FILE)).unwrap();
        assert!(run_in_progress(dir.path()));
        write(dir.path(), PID_FILE, "4294967295");
        assert!(!run_in_progress(dir.path()));
        drop(beat);
        release(dir.path()).unwrap();
        assert_eq!(run_writer(dir.path()), Writer::None);
    }

    #[test]
    fn another_hosts_claim_holds_while_it_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), PID_FILE, "1");
        write(dir.path(), CLAIM_FILE, "some-other-node/boot/pid:[1] 5\n");
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
            .open(dir.path().join(CLAIM_FILE))
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(run_writer(dir.path()), Writer::Gone);
    }

    #[test]
    fn the_host_names_its_boot_and_pid_namespace_and_the_start_is_read() {
        let host = this_host();
        assert_eq!(host.split('/').count(), 3, "{host}");
        assert!(!host.contains(char::is_whitespace));
        assert!(process_start(std::process::id()).unwrap() > 0);
        assert_eq!(process_start(4_294_967_295), None);
    }
}
