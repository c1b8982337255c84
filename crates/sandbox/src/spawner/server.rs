//! The spawner process: forked from tack at start-up, while tack is small
//! and has one thread, it starts confined commands on tack's behalf. Each
//! request gets a thread that prepares the confinement, forks the command
//! (a cheap fork: this process stays a few MiB), reports its pid, waits for
//! it, kills its group, cleans up, and reports its exit status.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::wire::{self, Failure, Reply, Request};
use crate::supervise::kill_process_group;
use crate::{CommandSpec, local, plan, probe};

/// Commands running, by pid (= process group).
#[derive(Default)]
struct Running(Mutex<HashSet<u32>>);

impl Running {
    fn lock(&self) -> MutexGuard<'_, HashSet<u32>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Serves requests until tack closes its end (it exited or was killed),
/// then kills every command still running and exits.
pub(super) fn serve(socket: OwnedFd) -> ! {
    let socket = Arc::new(socket);
    let running = Arc::new(Running::default());
    let mut buffer = vec![0u8; wire::MAX_MESSAGE];
    // Until tack is gone, or the socket broke (tack then stops using it).
    while let Ok(Some((request, fds))) = wire::receive::<Request>(socket.as_fd(), &mut buffer) {
        start_thread(&socket, &running, request, fds);
    }
    for &group in running.lock().iter() {
        kill_process_group(group);
    }
    // Give the waiting threads a moment to remove the commands' private tmp
    // directories and cgroups.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !running.lock().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::process::exit(0)
}

fn start_thread(
    socket: &Arc<OwnedFd>,
    running: &Arc<Running>,
    request: Request,
    fds: Vec<OwnedFd>,
) {
    let id = request.id;
    let (thread_socket, thread_running) = (socket.clone(), running.clone());
    let started = std::thread::Builder::new()
        // The thread only prepares, forks and waits.
        .stack_size(256 * 1024)
        .spawn(move || handle(&thread_socket, &thread_running, request, fds));
    if let Err(error) = started {
        let failure = Failure::Setup(format!("the spawner could not start a thread: {error}"));
        let _ = wire::send(socket.as_fd(), &Reply::Failed { id, failure }, &[]);
    }
}

fn handle(socket: &OwnedFd, running: &Running, request: Request, fds: Vec<OwnedFd>) {
    let id = request.id;
    let reply = |reply: Reply| {
        // tack gone: serve() sees the closed socket and cleans up.
        let _ = wire::send(socket.as_fd(), &reply, &[]);
    };
    let [stdout, stderr]: [OwnedFd; 2] = match fds.try_into() {
        Ok(fds) => fds,
        Err(_) => {
            let failure = Failure::Setup("the spawner got a request without its pipes".into());
            return reply(Reply::Failed { id, failure });
        }
    };
    let spec = CommandSpec {
        script: &request.script,
        cwd: &request.cwd,
        env: &request.env,
        // The timeout and the output cap are tack's side of the work.
        timeout: Duration::MAX,
        output_limit: 0,
        confinement: &request.confinement,
    };
    let (mut child, prepared) = match spawn(&spec, stdout, stderr) {
        Ok(started) => started,
        Err(error) => {
            let failure = Failure::from_error(error);
            return reply(Reply::Failed { id, failure });
        }
    };
    let pid = child.id();
    running.lock().insert(pid);
    reply(Reply::Started { id, pid });
    let status = child.wait();
    // Whatever the command left running in the background dies with it,
    // before its cgroup and tmp directory go.
    kill_process_group(pid);
    drop(prepared);
    running.lock().remove(&pid);
    let status = match status {
        Ok(status) => status.into_raw(),
        // Cannot happen for our own child; report it as killed.
        Err(_) => libc::SIGKILL,
    };
    reply(Reply::Exited { id, status });
}

fn spawn(
    spec: &CommandSpec<'_>,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> Result<(std::process::Child, plan::Prepared), crate::SandboxError> {
    let mut prepared = plan::prepare(spec.confinement, spec.cwd, probe())?;
    let mut command = local::bash(spec);
    local::confine(&mut command, &mut prepared)?;
    command
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    let spawned = command.spawn();
    // Close our copies of the plan's descriptors and the failure pipe's
    // write end (so reading it cannot block), and of the output pipes (so
    // tack sees their end when the command's processes are gone).
    drop(command);
    let child =
        spawned.map_err(|source| local::spawn_error(Some(&mut prepared), spec.cwd, source))?;
    Ok((child, prepared))
}
