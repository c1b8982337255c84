//! The part of confinement that runs in the forked child, between `fork` and
//! `exec`. The parent is multi-threaded, so this code may only make raw
//! system calls on data prepared beforehand: no allocation, no locks, no
//! std I/O. Everything it needs is in a [`ChildPlan`] built by `plan.rs`.
//!
//! Order matters: join the cgroup and set rlimits while still privileged in
//! the host namespaces; enter the new namespaces; fork into a pid namespace
//! of the command's own, whose pid 1 ends when the command does (the kernel
//! then kills every process left in it, `setsid` or not; see pidns.rs);
//! set up the mounts; then lock the
//! process down with no_new_privs, Landlock and seccomp (last, so our own
//! `mount` and `unshare` calls above are still allowed).

#![allow(unsafe_code)] // raw syscalls between fork and exec; each block says why it is sound

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use seccompiler::BpfProgram;

use crate::mounts::mount;
use crate::pidns::fork_into_pid_namespace;

const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

/// `struct landlock_path_beneath_attr` (packed in the kernel UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Which step failed, reported to the parent as two bytes (step, index)
/// on the failure pipe so its error can say what went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    Session = 1,
    Cgroup,
    Rlimit,
    Unshare,
    IdMap,
    PidNamespace,
    PidMax,
    Mount,
    Chdir,
    LandlockRule,
    NoNewPrivs,
    Landlock,
    Seccomp,
    Inherit,
    Capabilities,
    Overlay,
}

impl Step {
    pub(crate) fn from_byte(byte: u8) -> Option<Step> {
        use Step::*;
        [
            Session,
            Cgroup,
            Rlimit,
            Unshare,
            IdMap,
            PidNamespace,
            PidMax,
            Mount,
            Chdir,
            LandlockRule,
            NoNewPrivs,
            Landlock,
            Seccomp,
            Inherit,
            Capabilities,
            Overlay,
        ]
        .into_iter()
        .find(|step| *step as u8 == byte)
    }
}

/// One mount operation in the new mount namespace.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) enum MountStep {
    /// Stop mount events propagating back to the host.
    MakePrivate,
    /// Everything read-only, recursively: chmod, chown, utimes and writes
    /// outside the writable paths fail with EROFS, whatever Landlock covers.
    AllReadOnly,
    /// Bind a path onto itself and make that bind writable again.
    Writable(CString),
    /// Bind a path onto itself, read-only (recursively).
    ReadOnly(CString),
    /// Cover a directory with an empty read-only tmpfs.
    Hide(CString),
    /// A fresh writable tmpfs (the private `/dev/shm`).
    Tmpfs(CString),
    /// A devpts of the command's own (`newinstance`): terminals for what
    /// runs in an image (tmux, `script`, apt's log), none of the host's.
    Devpts(CString),
    /// Mounts a small tmpfs on `at` (the private tmp, a directory of our
    /// own on the host) and makes it the root, with the old root beneath
    /// it at `old_root` ([`crate::mounts::OLD_ROOT`] once pivoted), where
    /// the grafts below find their sources.
    NewRoot { at: CString, old_root: CString },
    /// Creates `target` in the new root and, with a `source` (beneath the
    /// old root), binds it there recursively. A source that has vanished
    /// since the plan was made is skipped when `optional`.
    Graft {
        target: CString,
        node: Node,
        source: Option<CString>,
        optional: bool,
    },
    /// Detaches the old root, and everything mounted beneath it, and
    /// removes its mount point.
    DropOldRoot,
    /// Makes the image's overlay, mounted on `at` before the user
    /// namespace was entered ([`HostOverlay`]), the root, with the old
    /// root beneath it at `old_root` for the grafts that follow.
    OverlayRoot { at: CString, old_root: CString },
    /// Makes these directories, each a prefix of the next, if missing.
    MakeDirs(Vec<CString>),
    /// A fresh procfs on /proc, while the host's is still in sight (the
    /// kernel lets a user namespace mount one only then).
    Proc,
    /// Covers a directory (`/tmp`) with a read-only overlay of it: see
    /// [`CoverSteps`].
    Cover(CoverSteps),
}

/// A read-only overlay of a directory other programs keep sockets in
/// (`/tmp`) over it, where no socket answers `connect` (an overlay's inode
/// is not the socket's): other programs' sockets there (tmux's, an ssh
/// agent's, X11's, at any depth, made at any time) are then out of reach,
/// which Landlock cannot do before ABI 9. Built in a tmpfs on `stage` (an
/// empty directory of the command's own): the `mask` with its `mask_dirs`
/// (every place a mount goes, and the way down), the overlay (`layers`:
/// the mask over the directory) on `view`, each `sealed` root in it covered
/// by a directory made in the stage (a bind: cheaper than a tmpfs each),
/// `dirs` made in those, each `keep` (host path, place in the view) bound,
/// and `view` moved over `at`. Where the overlay cannot be made (a mount
/// below the directory, locked in the command's user namespace, makes
/// overlayfs refuse it as a layer), the mask alone is the view: the
/// directory then shows the command's own paths and nothing else. Every
/// path is made before the fork.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CoverSteps {
    pub at: CString,
    pub stage: CString,
    pub mask: CString,
    pub mask_dirs: Vec<CString>,
    pub view: CString,
    pub layers: CString,
    /// (its cover in the stage, the root in the view)
    pub sealed: Vec<(CString, CString)>,
    pub dirs: Vec<CString>,
    pub keep: Vec<(CString, CString)>,
}

/// What a [`MountStep::Graft`] creates.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) enum Node {
    Dir,
    /// An empty file, to bind a file (or device) onto.
    File,
    /// A symlink with this text (`/bin -> usr/bin` stays a symlink).
    Symlink(CString),
}

/// A Landlock rule added in the child, for a mount that only exists there.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct LateRule {
    pub path: CString,
    pub access: u64,
}

#[derive(Debug, Default)]
pub(crate) struct ChildPlan {
    /// Write end of the failure pipe (close-on-exec).
    pub failure: Option<OwnedFd>,
    /// `cgroup.procs` of the command's pids cgroup, opened for writing.
    pub cgroup_procs: Option<OwnedFd>,
    /// Directories the mounts reach as `/proc/self/fd/N`: each path is
    /// opened in the child onto the descriptor beside it (reserved before
    /// the fork), once in its namespaces and before it becomes their root
    /// (see `idmap::unshare_mapped`).
    pub reach: Vec<(std::ffi::CString, OwnedFd)>,
    /// An image's overlay, mounted as tack's own user in a mount namespace
    /// of the child's before it enters its user namespace.
    pub host_overlay: Option<HostOverlay>,
    pub rlimits: Vec<(libc::c_int, u64)>,
    /// `unshare(2)` flags; 0 enters no namespace.
    pub unshare_flags: libc::c_int,
    /// Contents of uid_map and gid_map, when a user namespace is entered.
    pub id_maps: Option<(Vec<u8>, Vec<u8>)>,
    /// Instead, maps of a range of ids, written from outside the namespace
    /// ([`crate::idmap`]); the command then runs as the namespace's root.
    pub id_range: Option<(Vec<u8>, Vec<u8>)>,
    /// Fork into a new pid namespace: a small reaper is its pid 1 and the
    /// command pid 2 ([`crate::pidns`]).
    pub pid_namespace: bool,
    /// With `pid_namespace`, the command is pid 1 itself, with no reaper: a
    /// trial's sandbox init, which reaps its commands' orphans and, as pid
    /// 1, receives no signal from them that it does not handle.
    pub command_is_pid_one: bool,
    /// Value for the pid namespace's own `kernel.pid_max` (Linux 6.14+).
    pub pid_max: Option<Vec<u8>>,
    pub mounts: Vec<MountStep>,
    /// The working directory, entered again after the mounts: the one
    /// entered before them is on the read-only copy beneath the binds.
    pub cwd: Option<CString>,
    /// Mount a fresh procfs for the pid namespace (best effort).
    pub mount_proc: bool,
    pub late_rules: Vec<LateRule>,
    /// Read access for the fresh procfs, if it gets mounted.
    pub proc_access: u64,
    pub landlock: Option<OwnedFd>,
    pub seccomp: Vec<&'static BpfProgram>,
    /// Whether the command may make set-id files: with them refused,
    /// `CAP_SETFCAP` goes too (file capabilities are set-id by another name).
    pub set_id: crate::seccomp::SetIdFiles,
    /// A trial's sandbox init ([`crate::session`]): its commands lock
    /// themselves down, each before its exec. The Landlock ruleset (with the
    /// late rules added) and `inherit` stay open across the init's exec;
    /// no_new_privs, Landlock and seccomp are not applied to the init.
    pub defer_lock_down: bool,
    /// The image user (uid, gid) the command becomes before exec.
    pub user: Option<(u32, u32)>,
    /// Descriptors the program keeps across exec (their close-on-exec flag
    /// is cleared): the init's socket to tack.
    pub inherit: Vec<libc::c_int>,
    /// The spawner's pid: the command is killed if the spawner dies (it
    /// forks from threads that live as long as it does). Killed with tack,
    /// the spawner would otherwise leave commands running past their
    /// timeout, which only it enforces.
    pub die_with: Option<libc::pid_t>,
}

/// An image's overlay, mounted by the host's user (root): the kernel then
/// keeps the overlay's own bookkeeping in trusted extended attributes and
/// can rename a directory of the image (`redirect_dir`), which dpkg does
/// and an overlay mounted inside a user namespace refuses (EXDEV).
#[derive(Debug)]
pub(crate) struct HostOverlay {
    pub at: CString,
    /// `lowerdir=/proc/self/fd/L,upperdir=…,workdir=…,redirect_dir=on`.
    pub options: CString,
    /// The image's files, the upper and the work directory, each opened
    /// onto its descriptor in the child's new mount namespace (a mount of
    /// another namespace cannot be an overlay's layer).
    pub layers: Vec<(std::ffi::CString, OwnedFd)>,
}

/// Runs the plan in the forked child. Returns in the process that goes on
/// to exec the command.
pub(crate) fn enter(plan: &ChildPlan) -> io::Result<()> {
    let fail = |step: Step, index: usize, error: io::Error| {
        report(plan, step, index);
        error
    };
    if let Some(parent) = plan.die_with {
        // SAFETY: prctl and getppid take integer arguments only.
        check(unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            )
        } as libc::c_long)
        .map_err(|e| fail(Step::Session, 0, e))?;
        // The spawner died before the signal was asked for.
        // SAFETY: as above.
        if unsafe { libc::getppid() } != parent {
            // SAFETY: _exit ends the process without running anything else.
            unsafe { libc::_exit(126) }
        }
    }
    // SAFETY: setsid has no memory effects; a new session also detaches the
    // command from tack's controlling terminal (no TIOCSTI into it).
    check(unsafe { libc::setsid() } as libc::c_long).map_err(|e| fail(Step::Session, 0, e))?;
    if let Some(fd) = &plan.cgroup_procs {
        // "0" moves the writing process itself into the cgroup.
        write_fd(fd.as_raw_fd(), b"0").map_err(|e| fail(Step::Cgroup, 0, e))?;
    }
    for (index, (resource, value)) in plan.rlimits.iter().enumerate() {
        set_rlimit(*resource, *value).map_err(|e| fail(Step::Rlimit, index, e))?;
    }
    if let Some(overlay) = &plan.host_overlay {
        crate::mounts::host_overlay(overlay).map_err(|e| fail(Step::Overlay, 0, e))?;
    }
    if let Some((uid_map, gid_map)) = &plan.id_range {
        crate::idmap::unshare_mapped(plan.unshare_flags, uid_map, gid_map, &plan.reach)
            .map_err(|e| fail(Step::IdMap, 0, e))?;
    } else if plan.unshare_flags != 0 {
        // SAFETY: unshare only changes this (single-threaded) process's namespaces.
        check(unsafe { libc::unshare(plan.unshare_flags) } as libc::c_long)
            .map_err(|e| fail(Step::Unshare, 0, e))?;
    }
    if let Some((uid_map, gid_map)) = &plan.id_maps {
        write_id_maps(uid_map, gid_map).map_err(|e| fail(Step::IdMap, 0, e))?;
    }
    if plan.pid_namespace {
        fork_into_pid_namespace(plan.command_is_pid_one)
            .map_err(|e| fail(Step::PidNamespace, 0, e))?;
    }
    if let Some(value) = &plan.pid_max {
        write_path(c"/proc/sys/kernel/pid_max", value).map_err(|e| fail(Step::PidMax, 0, e))?;
    }
    for (index, step) in plan.mounts.iter().enumerate() {
        mount(step).map_err(|e| fail(Step::Mount, index, e))?;
    }
    if let Some(cwd) = &plan.cwd {
        // SAFETY: chdir reads a NUL-terminated path.
        check(unsafe { libc::chdir(cwd.as_ptr()) } as libc::c_long)
            .map_err(|e| fail(Step::Chdir, 0, e))?;
    }
    let proc_mounted = plan.mount_proc && crate::mounts::mount_proc().is_ok();
    lock_down(plan, proc_mounted, &fail)
}

/// no_new_privs, Landlock (with the rules for mounts made above), seccomp;
/// for a session's init, only the rules, the rest left to its commands.
fn lock_down(
    plan: &ChildPlan,
    proc_mounted: bool,
    fail: &dyn Fn(Step, usize, io::Error) -> io::Error,
) -> io::Result<()> {
    if let Some(ruleset) = &plan.landlock {
        let ruleset = ruleset.as_raw_fd();
        for (index, rule) in plan.late_rules.iter().enumerate() {
            add_rule(ruleset, &rule.path, rule.access)
                .map_err(|e| fail(Step::LandlockRule, index, e))?;
        }
        if proc_mounted {
            let index = plan.late_rules.len();
            add_rule(ruleset, c"/proc", plan.proc_access)
                .map_err(|e| fail(Step::LandlockRule, index, e))?;
        }
    }
    if plan.defer_lock_down {
        let keep = plan.landlock.iter().map(AsRawFd::as_raw_fd);
        for (index, fd) in keep.chain(plan.inherit.iter().copied()).enumerate() {
            keep_open(fd).map_err(|e| fail(Step::Inherit, index, e))?;
        }
        return Ok(());
    }
    crate::caps::drop_bounding(plan.set_id).map_err(|e| fail(Step::Capabilities, 0, e))?;
    if let Some((uid, gid)) = plan.user {
        crate::caps::become_user(uid, gid).map_err(|e| fail(Step::Capabilities, 1, e))?;
    }
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only.
    let nnp = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    check(nnp as libc::c_long).map_err(|e| fail(Step::NoNewPrivs, 0, e))?;
    if let Some(ruleset) = &plan.landlock {
        restrict_self(ruleset.as_raw_fd()).map_err(|e| fail(Step::Landlock, 0, e))?;
    }
    for (index, filter) in plan.seccomp.iter().enumerate() {
        seccompiler::apply_filter(filter).map_err(|e| {
            let error = match e {
                seccompiler::Error::Seccomp(error) | seccompiler::Error::Prctl(error) => error,
                _ => io::Error::from_raw_os_error(libc::EINVAL),
            };
            fail(Step::Seccomp, index, error)
        })?;
    }
    Ok(())
}

/// Enters the Landlock domain of `ruleset`.
pub(crate) fn restrict_self(ruleset: libc::c_int) -> io::Result<()> {
    // SAFETY: landlock_restrict_self takes a ruleset fd and flags.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) })
}

/// Clears `fd`'s close-on-exec flag, so the program exec'd next has it.
fn keep_open(fd: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl(F_SETFD) changes only the descriptor's flags.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } as libc::c_long)
}

fn report(plan: &ChildPlan, step: Step, index: usize) {
    if let Some(fd) = &plan.failure {
        let index = u8::try_from(index).unwrap_or(u8::MAX);
        let _ = write_fd(fd.as_raw_fd(), &[step as u8, index]);
    }
}

pub(crate) fn check(ret: libc::c_long) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub(crate) fn write_fd(fd: libc::c_int, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the buffer is valid for its length; a short write is an error.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if written < 0 {
        return Err(io::Error::last_os_error());
    }
    if written as usize != bytes.len() {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

fn write_path(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: path is NUL-terminated; the fd is closed below on every path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = write_fd(fd, bytes);
    // SAFETY: fd was opened above and is not used afterwards.
    unsafe { libc::close(fd) };
    result
}

pub(crate) fn set_rlimit(resource: libc::c_int, value: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct on our stack.
    check(unsafe { libc::setrlimit(resource as _, &limit) } as libc::c_long)
}

/// Maps our uid and gid to themselves inside the new user namespace
/// (setgroups must be denied first for an unprivileged gid_map).
fn write_id_maps(uid_map: &[u8], gid_map: &[u8]) -> io::Result<()> {
    write_path(c"/proc/self/setgroups", b"deny")?;
    write_path(c"/proc/self/uid_map", uid_map)?;
    write_path(c"/proc/self/gid_map", gid_map)
}

pub(crate) fn add_rule(ruleset: libc::c_int, path: &std::ffi::CStr, access: u64) -> io::Result<()> {
    // SAFETY: path is NUL-terminated; the O_PATH fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: the kernel reads the packed attribute struct on our stack.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0,
        )
    };
    // SAFETY: fd was opened above and is not used afterwards.
    unsafe { libc::close(fd) };
    check(ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_through_their_byte() {
        for step in [Step::Session, Step::Mount, Step::Seccomp] {
            assert_eq!(Step::from_byte(step as u8), Some(step));
        }
        assert_eq!(Step::from_byte(0), None);
        assert_eq!(Step::from_byte(200), None);
    }

    #[test]
    fn uapi_structs_have_the_kernel_sizes() {
        assert_eq!(std::mem::size_of::<PathBeneathAttr>(), 12);
    }
}
