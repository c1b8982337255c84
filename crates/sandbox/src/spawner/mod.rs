//! A small process that forks confined commands for tack.
//!
//! A confined command's setup runs between fork and exec, so it cannot be
//! started with `posix_spawn`, and `fork` copies the page tables of the
//! whole process. tack with a thousand trials in flight holds a few hundred
//! MiB: each command's fork, and the teardown of the copy at exec, cost
//! milliseconds of CPU. [`start`] forks a spawner while tack is still small
//! and single-threaded; [`crate::run`] then sends confined commands to it,
//! and the spawner forks them from a few threads of its own (server.rs).
//! Without a spawner (libraries, tests, `TACK_SANDBOX_SPAWNER=off`), tack
//! forks them itself: same confinement, more CPU.
//!
//! The forked spawner execs the crate's small init binary when it lies
//! beside tack (of the same build), which then serves as the spawner: a
//! copy of tack carries tack's relocated data (3.5 MiB of a 170 MB binary)
//! and its allocator's arena, and every confined command's fork copied
//! their page tables, twice more for the pid namespace's relay and init,
//! which shared them copy-on-write for the trial's whole life.

mod client;
mod server;
mod wire;

use std::sync::OnceLock;

pub(crate) use client::Client;

use crate::SandboxError;

/// Set to `off` to fork confined commands from tack itself.
pub const SPAWNER_ENV: &str = "TACK_SANDBOX_SPAWNER";

/// The first argument that makes the init binary serve as the spawner; the
/// second is the number of its socket to tack.
pub(crate) const SPAWNER_ARG: &str = "__tack-sandbox-spawner";

static CLIENT: OnceLock<Client> = OnceLock::new();

/// The running spawner, if [`start`] started one and it is still alive.
pub(crate) fn client() -> Option<&'static Client> {
    CLIENT.get().filter(|client| client.alive())
}

/// The program the spawner runs: the small init binary beside this one,
/// when it is of the same build; `None`, a copy of this process (for
/// `tack doctor`). Either way only when [`enabled`].
pub fn program() -> Option<std::path::PathBuf> {
    crate::session::small_init_program()
}

/// Whether [`start`] starts a spawner (`TACK_SANDBOX_SPAWNER` is not `off`).
pub fn enabled() -> bool {
    !std::env::var(SPAWNER_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("off"))
}

/// The spawner's process id, while it runs (for `tack doctor` and tests).
pub fn pid() -> Option<u32> {
    client().map(Client::pid)
}

/// Why the spawner could not start, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum SpawnerError {
    #[error("the sandbox spawner must be started before any thread (this process has {0})")]
    Threads(usize),
    #[error("cannot read /proc/self/status: {0}")]
    ProcStatus(#[source] std::io::Error),
    #[error("/proc/self/status gives no thread count")]
    NoThreadCount,
    #[error("this kernel has no pidfds ({0}); confined commands are forked by tack itself")]
    NoPidfd(#[source] rustix::io::Errno),
    #[error("cannot make the spawner's socket: {0}")]
    Socket(#[source] std::io::Error),
    #[error("cannot fork the sandbox spawner: {0}")]
    Fork(#[source] std::io::Error),
    #[error("cannot start the spawner's reader: {0}")]
    Reader(#[source] std::io::Error),
    #[error("could not reach the sandbox spawner: {0}")]
    Unreachable(#[source] std::io::Error),
    #[error("the sandbox spawner stopped; later commands start from tack itself")]
    Stopped,
}

/// Forks the spawner. Call it first thing in `main`, before any thread
/// starts (the async runtime included): the spawner is a copy of this
/// process, and a copy of a multi-threaded one may find a lock held
/// forever. Returns `Ok(false)` when `TACK_SANDBOX_SPAWNER=off` or a
/// spawner already runs.
pub fn start() -> Result<bool, SandboxError> {
    if !enabled() {
        return Ok(false);
    }
    if CLIENT.get().is_some() {
        return Ok(false);
    }
    let threads = thread_count()?;
    if threads != 1 {
        return Err(SpawnerError::Threads(threads).into());
    }
    // The spawner watches its commands through pidfds (Linux 5.3).
    rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(SpawnerError::NoPidfd)?;
    let (ours, theirs) = wire::socket_pair().map_err(SpawnerError::Socket)?;
    // Found before the fork: finding it execs the binary once.
    let small = crate::session::small_init_program();
    #[allow(unsafe_code)]
    // SAFETY: the process has a single thread (checked above), so the child
    // is a complete copy, free to allocate and start threads.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(SpawnerError::Fork(std::io::Error::last_os_error()).into()),
        0 => {
            drop(ours);
            detach();
            if let Some(program) = small {
                exec_small(&program, &theirs);
            }
            // No small binary, or it would not start: serve from this copy.
            server::serve(theirs)
        }
        _ => {
            drop(theirs);
            let client = Client::new(ours, pid.unsigned_abs())?;
            // Only this function sets it, and it was empty above.
            let _ = CLIENT.set(client);
            Ok(true)
        }
    }
}

/// In the forked spawner: becomes the small init binary serving as the
/// spawner, `socket` kept open across the exec. Returns only if the exec
/// failed, `socket` close-on-exec again (no command may inherit it).
fn exec_small(program: &std::path::Path, socket: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = socket.as_raw_fd();
    let set_cloexec = |flags: libc::c_int| {
        #[allow(unsafe_code)]
        // SAFETY: fcntl(F_SETFD) changes only the descriptor's flags.
        let done = unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } == 0;
        done
    };
    if set_cloexec(0) {
        // exec only returns on failure.
        let _ = std::process::Command::new(program)
            .arg(SPAWNER_ARG)
            .arg(fd.to_string())
            .exec();
    }
    set_cloexec(libc::FD_CLOEXEC);
}

/// In the small binary started as the spawner (`SPAWNER_ARG` `fd`): serves
/// on the socket tack passed, never returns.
pub(crate) fn serve_exec(fd: Option<&std::ffi::OsStr>) -> ! {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Some(fd) = fd
        .and_then(|fd| fd.to_str())
        .and_then(|fd| fd.parse::<libc::c_int>().ok())
        .filter(|fd| *fd > 2)
    else {
        eprintln!("tack sandbox spawner: started without its socket");
        std::process::exit(2)
    };
    // Close-on-exec again, so that no command started from here inherits
    // it; failing, the descriptor is not open (started by hand).
    #[allow(unsafe_code)]
    // SAFETY: fcntl(F_SETFD) changes only the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        eprintln!("tack sandbox spawner: descriptor {fd} is not open");
        std::process::exit(2)
    }
    #[allow(unsafe_code)]
    // SAFETY: the descriptor is open (above) and tack's forked spawner,
    // which passed it, holds no other handle to it after the exec.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    server::serve(socket)
}

/// In the spawner: its own session, so that Ctrl-C in tack's terminal
/// reaches tack (which cancels its trials in order) and not the spawner;
/// and /dev/null for stdio, so that it holds none of tack's output open.
#[allow(unsafe_code)]
fn detach() {
    // SAFETY: setsid, open and dup2 take no pointers but the literal path.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

fn thread_count() -> Result<usize, SpawnerError> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(SpawnerError::ProcStatus)?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|count| count.trim().parse().ok())
        .ok_or(SpawnerError::NoThreadCount)
}
