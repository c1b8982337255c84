//! Resource limits: rlimits for CPU, memory, file size and processes, and
//! the bounds on the process count that also hold for root.
//!
//! `RLIMIT_NPROC` is not enforced for a process whose real user is root
//! (the kernel exempts INIT_USER, user namespace or not), so a fork bomb
//! run by root needs another bound. Two are used where the kernel has them:
//! the pid namespace's own `kernel.pid_max` (Linux 6.14+), and a pids
//! cgroup per command with `pids.max`. Whatever else happens, the command's
//! pid namespace dies with it and the timeout kills it.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ResourceLimits;

/// Pids the kernel keeps for itself after a pid namespace wraps; a
/// namespace `pid_max` must leave room above them.
const RESERVED_PIDS: u64 = 300;

/// `(resource, value)` pairs for `setrlimit` in the child.
pub(crate) fn rlimits(limits: &ResourceLimits) -> Vec<(libc::c_int, u64)> {
    vec![
        (libc::RLIMIT_CPU as libc::c_int, limits.cpu_secs),
        (libc::RLIMIT_AS as libc::c_int, limits.memory_bytes),
        (libc::RLIMIT_NPROC as libc::c_int, limits.processes),
        (libc::RLIMIT_FSIZE as libc::c_int, limits.file_size_bytes),
        // No core files: not in the workspace, not to a core_pattern helper.
        (libc::RLIMIT_CORE as libc::c_int, 0),
    ]
}

/// The `pid_max` for the command's pid namespace: at most this many pids
/// exist at once (the kernel's minimum is 301).
pub(crate) fn namespace_pid_max(limits: &ResourceLimits) -> u64 {
    limits.processes.saturating_add(RESERVED_PIDS + 1)
}

/// Whether `RLIMIT_NPROC` binds processes of this real user.
pub fn nproc_rlimit_enforced() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    uid != 0
}

/// A pids cgroup made for one command, removed when dropped.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
}

static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

impl PidsCgroup {
    /// Creates `<base>/tack-<pid>-<n>` with `pids.max = max`.
    ///
    /// A process killed before its cgroups were removed leaves them behind,
    /// and a later process may get its pid: a name taken is removed when
    /// nothing runs in it any more (rmdir refuses otherwise), else skipped.
    pub(crate) fn create(base: &Path, max: u64) -> std::io::Result<PidsCgroup> {
        let mut attempts = 0;
        let dir = loop {
            let n = NEXT_CGROUP.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("tack-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempts < 8 => {
                    attempts += 1;
                    if std::fs::remove_dir(&dir).is_ok() && std::fs::create_dir(&dir).is_ok() {
                        break dir;
                    }
                }
                Err(error) => return Err(error),
            }
        };
        let cgroup = PidsCgroup { dir };
        std::fs::write(cgroup.dir.join("pids.max"), max.to_string())?;
        Ok(cgroup)
    }

    /// `cgroup.procs`, opened for the child to write "0" into.
    pub(crate) fn procs(&self) -> std::io::Result<OwnedFd> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))?;
        Ok(OwnedFd::from(file))
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // The pid namespace is gone by now, but its last processes may still
        // be on their way out: retry briefly, killing stragglers.
        // Back off from 50 µs to 6.4 ms, about 0.2 s in all.
        for attempt in 0..36u32 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            kill_members(&self.dir);
            let wait = 50u64 << attempt.min(7);
            std::thread::sleep(std::time::Duration::from_micros(wait));
        }
    }
}

fn kill_members(dir: &Path) {
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs
        .lines()
        .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
    {
        #[allow(unsafe_code)]
        // SAFETY: kill only sends a signal; these pids are in our cgroup.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Why per-command pids cgroups cannot be made here.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: &'static str,
        source: std::io::Error,
    },
    #[error("no pids cgroup controller is mounted")]
    NoController,
    #[error("{} is not a cgroup", .0.display())]
    NotACgroup(PathBuf),
    #[error(
        "cannot create a pids cgroup under {}: {source} (needs write access there, and on \
         cgroup v2 the pids controller enabled in cgroup.subtree_control)",
        base.display()
    )]
    Create {
        base: PathBuf,
        source: std::io::Error,
    },
}

/// Where per-command pids cgroups can be made: the directory of this
/// process's own cgroup in the pids hierarchy (v1) or the unified one (v2),
/// checked by creating and removing one.
pub(crate) fn find_pids_cgroup_base() -> Result<PathBuf, CgroupError> {
    let read = |path: &'static str| {
        std::fs::read_to_string(path).map_err(|source| CgroupError::Read { path, source })
    };
    let mountinfo = read("/proc/self/mountinfo")?;
    let cgroups = read("/proc/self/cgroup")?;
    let base = pids_base(&mountinfo, &cgroups).ok_or(CgroupError::NoController)?;
    if !base.join("cgroup.procs").exists() {
        return Err(CgroupError::NotACgroup(base));
    }
    match PidsCgroup::create(&base, 1) {
        Ok(test) => drop(test),
        Err(source) => return Err(CgroupError::Create { base, source }),
    }
    sweep_stale(&base);
    Ok(base)
}

/// Removes the cgroups of processes that are gone: a process killed before
/// its commands ended (`kill -9` of tack or its spawner) leaves theirs, and
/// nothing else would ever remove them.
///
/// The pid in a name is the maker's in the pid namespace tack runs in; a
/// pid that is alive, whoever has it now, keeps its cgroups, and rmdir
/// refuses a cgroup that still holds a process.
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(maker_pid) else {
            continue;
        };
        if gone(pid) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Whether `pid` is no process, or one that has exited and waits to be
/// reaped (a killed tack's spawner, until init reaps it).
fn gone(pid: libc::pid_t) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: signal 0 sends nothing; it asks whether the pid exists.
    if unsafe { libc::kill(pid, 0) } == -1 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // The state follows the command's name, which may hold ") ".
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat.get(stat.rfind(") ")? + 2..)?.starts_with('Z')))
        .unwrap_or(false)
}

/// The pid in a cgroup name `tack-<pid>-<n>` that [`PidsCgroup::create`]
/// gives.
fn maker_pid(name: &str) -> Option<libc::pid_t> {
    let (pid, n) = name.strip_prefix("tack-")?.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok().filter(|pid| *pid > 0)
}

/// The pids hierarchy's mount point joined with our cgroup path in it.
fn pids_base(mountinfo: &str, cgroups: &str) -> Option<PathBuf> {
    let mut v2 = None;
    for line in mountinfo.lines() {
        let (mount, fs) = line.split_once(" - ")?;
        let mount: Vec<&str> = mount.split(' ').collect();
        let fs: Vec<&str> = fs.split(' ').collect();
        let (Some(root), Some(point), Some(kind)) = (mount.get(3), mount.get(4), fs.first()) else {
            continue;
        };
        let options = fs.get(2).copied().unwrap_or("");
        if *kind == "cgroup" && options.split(',').any(|o| o == "pids") {
            let own = own_cgroup(cgroups, |controllers| {
                controllers.split(',').any(|c| c == "pids")
            })?;
            return Some(join_cgroup(point, root, &own));
        }
        if *kind == "cgroup2" && v2.is_none() {
            let own = own_cgroup(cgroups, str::is_empty)?;
            v2 = Some(join_cgroup(point, root, &own));
        }
    }
    v2
}

fn own_cgroup(cgroups: &str, matches: impl Fn(&str) -> bool) -> Option<String> {
    cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        matches(controllers).then(|| path.to_string())
    })
}

fn join_cgroup(point: &str, root: &str, own: &str) -> PathBuf {
    let relative = own
        .strip_prefix(root)
        .unwrap_or(own)
        .trim_start_matches('/');
    Path::new(point).join(relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
36 25 0:32 / /sys/fs/cgroup/pids rw,relatime shared:15 - cgroup cgroup rw,pids
37 25 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory";

    #[test]
    fn finds_our_cgroup_in_the_v1_pids_hierarchy() {
        let cgroups = "8:pids:/user.slice\n4:memory:/x\n0::/";
        assert_eq!(
            pids_base(MOUNTINFO_V1, cgroups),
            Some(PathBuf::from("/sys/fs/cgroup/pids/user.slice"))
        );
    }

    #[test]
    fn falls_back_to_the_unified_hierarchy() {
        let mountinfo = "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw";
        assert_eq!(
            pids_base(mountinfo, "0::/tack.scope\n"),
            Some(PathBuf::from("/sys/fs/cgroup/tack.scope"))
        );
        assert_eq!(pids_base("", "0::/\n"), None);
    }

    /// A cgroup left by a killed process whose pid this one got: its name
    /// is taken over, not an error (CI once failed on it).
    #[test]
    fn a_stale_cgroup_of_the_same_name_is_taken_over() {
        let Ok(base) = find_pids_cgroup_base() else {
            eprintln!("skipped: no pids cgroup can be made here");
            return;
        };
        let next = NEXT_CGROUP.load(Ordering::Relaxed);
        let stale: Vec<PathBuf> = (next..next + 3)
            .map(|n| base.join(format!("tack-{}-{n}", std::process::id())))
            .collect();
        for dir in &stale {
            std::fs::create_dir(dir).unwrap();
        }
        let made = PidsCgroup::create(&base, 5).unwrap();
        assert!(made.dir.join("pids.max").exists());
        drop(made);
        for dir in &stale {
            let _ = std::fs::remove_dir(dir);
        }
    }

    #[test]
    fn only_cgroups_named_as_tack_makes_them_are_swept() {
        assert_eq!(maker_pid("tack-4242-17"), Some(4242));
        for other in [
            "tack-4242",
            "tack-x-1",
            "tack-0-1",
            "tack--5-1",
            "libpod_parent",
            "tack-1-x",
        ] {
            assert_eq!(maker_pid(other), None, "{other}");
        }
    }

    /// A cgroup left by a process that is gone is removed when the next
    /// process looks for the base; one of a live process is kept.
    #[test]
    fn cgroups_of_processes_that_are_gone_are_swept() {
        let Ok(base) = find_pids_cgroup_base() else {
            eprintln!("skipped: no pids cgroup can be made here");
            return;
        };
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = base.join(format!("tack-{dead}-0"));
        let live = base.join(format!("tack-{}-999999", std::process::id()));
        std::fs::create_dir(&left).unwrap();
        std::fs::create_dir(&live).unwrap();
        sweep_stale(&base);
        let (left_there, live_there) = (left.exists(), live.exists());
        let _ = std::fs::remove_dir(&left);
        let _ = std::fs::remove_dir(&live);
        assert!(!left_there, "{} is left", left.display());
        assert!(live_there, "{} was removed", live.display());
    }

    /// An exited child not yet reaped is gone; a live one and this process
    /// are not.
    #[test]
    fn a_zombie_is_gone_a_live_process_is_not() {
        let mut zombie = std::process::Command::new("true").spawn().unwrap();
        let pid = zombie.id() as libc::pid_t;
        let started = std::time::Instant::now();
        while !gone(pid) {
            assert!(started.elapsed().as_secs() < 10, "true never exited");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut live = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let live_gone = gone(live.id() as libc::pid_t);
        live.kill().unwrap();
        live.wait().unwrap();
        zombie.wait().unwrap();
        assert!(!live_gone);
        assert!(!gone(std::process::id() as libc::pid_t));
    }

    #[test]
    fn pid_max_leaves_room_for_reserved_pids() {
        let limits = ResourceLimits::default();
        assert_eq!(namespace_pid_max(&limits), limits.processes + 301);
    }
}
