//! Waiting for a started command: the timeout, killing its whole process
//! group however the wait ends, and collecting its capped output. Shared by
//! commands tack forks itself and those the spawner starts.

use std::future::Future;
use std::process::ExitStatus;
use std::time::Duration;

use crate::SandboxError;
use crate::capture::{self, Captured, Reader};

/// How a command ended.
pub(crate) struct Ended {
    pub status: ExitStatus,
    pub timed_out: bool,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Waits for `exit` (at most `timeout`), then kills the process group
/// `group`: on timeout the command itself, and in every case whatever it
/// left running in the background (which would otherwise hold the output
/// pipes open and outlive the trial). Confined commands are also pid 1 of
/// their own pid namespace, so the kernel kills whatever left the group
/// (setsid) when they die.
pub(crate) async fn supervise(
    exit: impl Future<Output = std::io::Result<ExitStatus>>,
    group: Option<u32>,
    stdout: Reader,
    stderr: Reader,
    timeout: Duration,
) -> Result<Ended, SandboxError> {
    // If this future is dropped (the run was cancelled), still kill the
    // whole group, not just the direct child.
    let mut cancel = KillOnDrop(group);
    let mut exit = std::pin::pin!(exit);
    let (status, timed_out) = match tokio::time::timeout(timeout, &mut exit).await {
        Ok(status) => (Some(status.map_err(SandboxError::Output)?), false),
        Err(_elapsed) => (None, true),
    };
    if let Some(group) = group {
        kill_process_group(group);
    }
    cancel.0 = None;
    let status = match status {
        Some(status) => status,
        None => exit.await.map_err(SandboxError::Output)?,
    };
    Ok(Ended {
        status,
        timed_out,
        stdout: capture::finish(stdout).await?,
        stderr: capture::finish(stderr).await?,
    })
}

/// Kills a process group when dropped, unless disarmed (set to `None`).
struct KillOnDrop(Option<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            kill_process_group(group);
        }
    }
}

#[allow(unsafe_code)]
pub(crate) fn kill_process_group(group: u32) {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return;
    };
    // SAFETY: killpg only sends a signal; the group id is the one the
    // command's own session (or process_group(0)) made, and ESRCH (already
    // gone) is fine.
    unsafe {
        libc::killpg(group, libc::SIGKILL);
    }
}
