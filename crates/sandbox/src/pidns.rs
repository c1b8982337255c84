//! The pid namespace: the child forks a small init (pid 1) and the command
//! (pid 2), or, for a trial's sandbox init, only the init, which is then
//! pid 1 itself; the process tack spawned stays outside and relays the exit
//! status. Raw syscalls only, see child.rs.

#![allow(unsafe_code)] // raw fork/wait/exit between fork and exec; each block says why

use std::io;

use crate::child::{check, set_rlimit, write_fd};

/// Forks twice: a small init becomes pid 1 of the new pid namespace, and
/// its child (pid 2) returns to exec the command, so the command keeps
/// ordinary signal semantics (pid 1 ignores signals it has no handler for)
/// and orphans are reaped. The first child stays outside the namespace and
/// relays the command's exit status; neither of them ever returns.
///
/// With `command_is_pid_one` (a trial's sandbox init, which reaps its
/// commands' orphans itself), pid 1 returns to exec the command and there
/// is no second fork: a signal from one of the init's commands is then
/// dropped unless the init handles it, where as pid 2 any command could
/// have killed it, and the trial's sandbox with it.
pub(crate) fn fork_into_pid_namespace(command_is_pid_one: bool) -> io::Result<()> {
    // SAFETY: resetting SIGCHLD to its default disposition; the inherited
    // handler belongs to the parent's runtime and must not run here.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    let mut status_pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    check(unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    let [read_end, write_end] = status_pipe;
    let init = raw_fork()?;
    if init != 0 {
        relay(init, read_end)
    }
    // pid 1: if the relay dies (tack cancelled the command and killed it),
    // die too, and the kernel takes the whole namespace down.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if command_is_pid_one {
        // SAFETY: pid 1 is the command; its exit status reaches the relay
        // by waitpid, the closed pipe telling it that nothing else will.
        unsafe {
            libc::close(read_end);
            libc::close(write_end);
        }
        return Ok(());
    }
    match raw_fork() {
        Ok(0) => {
            // SAFETY: the command does not need the status pipe.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            Ok(())
        }
        Ok(command) => reap(command, write_end),
        Err(_) => {
            let _ = write_fd(2, b"tack sandbox: could not fork in the pid namespace\n");
            // SAFETY: _exit ends the process without running anything else.
            unsafe { libc::_exit(126) }
        }
    }
}

/// fork(2) as a raw clone with only SIGCHLD: no libc atfork handlers (which
/// may take locks); both sides only make raw syscalls before exec or _exit.
pub(crate) fn raw_fork() -> io::Result<libc::pid_t> {
    // SAFETY: see above; the child gets a copy of this stack.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    check(pid)?;
    Ok(pid as libc::pid_t)
}

/// Keeps `fd` as descriptor 3 and closes every other one above stdio, so the
/// spawner sees exec succeed (its close-on-exec status pipe closes) once the
/// real command execs.
fn keep_only(fd: libc::c_int) {
    // SAFETY: dup2 and close only manage descriptors of this process.
    unsafe {
        if fd != 3 {
            libc::dup2(fd, 3);
        }
    }
    close_from(4);
}

/// pid 1: reaps every process until the command exits, passes its wait
/// status to the relay, and exits (the kernel then kills what is left).
fn reap(command: libc::pid_t, status_out: libc::c_int) -> ! {
    keep_only(status_out);
    let mut status: libc::c_int = 0;
    loop {
        let mut any: libc::c_int = 0;
        // SAFETY: waitpid writes the status into our stack variable.
        let waited = unsafe { libc::waitpid(-1, &mut any, 0) };
        if waited == command {
            status = any;
            break;
        }
        if waited < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let _ = write_fd(3, &status.to_ne_bytes());
    // SAFETY: _exit ends the process without running anything else.
    unsafe { libc::_exit(0) }
}

/// Outside the pid namespace: waits for its init and exits the way the
/// command did (re-raising the signal that killed it, without a core).
fn relay(init: libc::pid_t, status_in: libc::c_int) -> ! {
    keep_only(status_in);
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes the status into our stack variable.
        let waited = unsafe { libc::waitpid(init, &mut status, 0) };
        if waited == init {
            break;
        }
        if waited < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: _exit ends the process without running anything else.
            unsafe { libc::_exit(125) };
        }
    }
    let mut reported = [0u8; 4];
    // SAFETY: read fills at most 4 bytes of our stack buffer.
    let read = unsafe { libc::read(3, reported.as_mut_ptr().cast(), reported.len()) };
    if read == 4 {
        status = libc::c_int::from_ne_bytes(reported);
    }
    if libc::WIFEXITED(status) {
        // SAFETY: as above.
        unsafe { libc::_exit(libc::WEXITSTATUS(status)) };
    }
    let signal = libc::WTERMSIG(status);
    let _ = set_rlimit(libc::RLIMIT_CORE as libc::c_int, 0);
    // SAFETY: re-raise the signal that killed the command so the spawner
    // sees the same status; core dumps are off (RLIMIT_CORE above).
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

fn close_from(first: libc::c_uint) {
    // SAFETY: close_range only closes descriptors; none is used afterwards.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0) };
    if closed < 0 {
        for fd in first..4096 {
            // SAFETY: as above; EBADF for unused numbers is harmless.
            unsafe { libc::close(fd as libc::c_int) };
        }
    }
}
