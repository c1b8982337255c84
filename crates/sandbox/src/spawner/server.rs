//! The spawner process: forked from tack at start-up, while tack is small
//! and has one thread, it starts confined commands on tack's behalf.
//!
//! The main thread waits (epoll) on tack's socket and on a pidfd per
//! running command, and hands the work to a few worker threads: starting a
//! command (prepare its confinement, fork, wait until it has set itself up
//! and exec'd, report its pid), and finishing one that ended (reap it, kill
//! what it left behind, remove its private tmp and cgroup, report its exit
//! status). A fixed few threads keep the spawner a few MiB, so each fork
//! stays cheap: a thread per command (as this began) grew it to hundreds of
//! MiB of stacks and heaps that every fork had to copy, one fork at a time
//! under glibc's fork lock.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use super::wire::{self, Failure, Reply, Request};
use crate::supervise::kill_process_group;
use crate::{CommandSpec, local, plan, probe};

/// The socket's key in the epoll set; commands are keyed by their pid.
const SOCKET: u64 = 0;
/// Commands that may be setting up or cleaning up at once.
const WORKERS: usize = 8;

/// A command that runs: its own process group, leader `child`.
struct Running {
    id: u64,
    child: Child,
    prepared: plan::Prepared,
    /// Readable once the command has ended; in the epoll set.
    _pidfd: OwnedFd,
}

enum Job {
    Start(Box<Request>, Vec<OwnedFd>),
    Finish(u32, Running),
}

/// What the threads share.
struct Spawner {
    socket: OwnedFd,
    epoll: OwnedFd,
    running: Mutex<HashMap<u32, Running>>,
    /// tack is gone: a command that starts now is killed at once.
    closing: AtomicBool,
}

impl Spawner {
    fn running(&self) -> MutexGuard<'_, HashMap<u32, Running>> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn reply(&self, reply: &Reply) {
        // tack gone: the main thread sees the closed socket and cleans up.
        let _ = wire::send(self.socket.as_fd(), reply, &[]);
    }
}

/// Serves requests until tack closes its end (it exited or was killed),
/// then kills every command still running and exits.
pub(super) fn serve(socket: OwnedFd) -> ! {
    name_process();
    // Without epoll nothing can be waited for: exit, so that tack sees the
    // socket close and forks its commands itself.
    let Ok(epoll) = epoll::create(epoll::CreateFlags::CLOEXEC) else {
        std::process::exit(1)
    };
    let spawner = Arc::new(Spawner {
        socket,
        epoll,
        running: Mutex::default(),
        closing: AtomicBool::new(false),
    });
    let (jobs, workers) = start_workers(&spawner);
    let watched = epoll::add(
        &spawner.epoll,
        spawner.socket.as_fd(),
        epoll::EventData::new_u64(SOCKET),
        epoll::EventFlags::IN,
    );
    if watched.is_ok() && !workers.is_empty() {
        serve_events(&spawner, &jobs);
    }
    spawner.closing.store(true, Ordering::Release);
    // Whatever still runs dies with tack's session.
    let left: Vec<(u32, Running)> = spawner.running().drain().collect();
    for (pid, command) in left {
        kill_process_group(pid);
        let _ = jobs.send(Job::Finish(pid, command));
    }
    drop(jobs);
    // Give the workers a moment to remove the commands' private tmp
    // directories and cgroups.
    let deadline = Instant::now() + Duration::from_secs(2);
    while workers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::process::exit(0)
}

/// Names the spawner `tack-spawner` (its process and its threads), as
/// `ps` and `top` show it, whether a copy of tack or the small binary.
fn name_process() {
    #[allow(unsafe_code)]
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"tack-spawner".as_ptr(), 0, 0, 0);
    }
}

/// The event loop; returns when tack is gone or the socket broke.
fn serve_events(spawner: &Spawner, jobs: &Sender<Job>) {
    let mut buffer = vec![0u8; wire::MAX_MESSAGE];
    let mut events = [MaybeUninit::<epoll::Event>::uninit(); 64];
    loop {
        let ready = match epoll::wait(&spawner.epoll, &mut events, None) {
            Ok((ready, _)) => ready,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        };
        for event in ready.iter() {
            let key = event.data.u64();
            let job = if key == SOCKET {
                match wire::receive::<Request>(spawner.socket.as_fd(), &mut buffer) {
                    Ok(Some((request, fds))) => Job::Start(Box::new(request), fds),
                    Ok(None) | Err(_) => return,
                }
            } else {
                let ended = u32::try_from(key)
                    .ok()
                    .and_then(|pid| Some((pid, spawner.running().remove(&pid)?)));
                let Some((pid, command)) = ended else {
                    continue;
                };
                Job::Finish(pid, command)
            };
            if jobs.send(job).is_err() {
                return;
            }
        }
    }
}

fn start_workers(spawner: &Arc<Spawner>) -> (Sender<Job>, Vec<JoinHandle<()>>) {
    let (sender, receiver) = channel::<Job>();
    let receiver = Arc::new(Mutex::new(receiver));
    let workers = (0..WORKERS)
        .filter_map(|_| {
            let (spawner, receiver) = (spawner.clone(), receiver.clone());
            std::thread::Builder::new()
                // Workers only prepare, fork, wait and remove directories.
                .stack_size(256 * 1024)
                .spawn(move || work(&spawner, &receiver))
                .ok()
        })
        .collect();
    (sender, workers)
}

fn work(spawner: &Spawner, jobs: &Mutex<Receiver<Job>>) {
    loop {
        let next = jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .recv();
        match next {
            Ok(Job::Start(request, fds)) => start(spawner, *request, fds),
            Ok(Job::Finish(pid, command)) => finish(spawner, pid, command),
            Err(_) => return,
        }
    }
}

/// Prepares and forks one command, and reports its pid or why it failed.
fn start(spawner: &Spawner, request: Request, fds: Vec<OwnedFd>) {
    if let Err(failure) = spawn_watched(spawner, &request, fds) {
        let id = request.id;
        spawner.reply(&Reply::Failed { id, failure });
    }
}

/// Starts the command, puts it in the running set and the epoll set, in
/// that order, so that its end is always found in the set, and reports it
/// started.
fn spawn_watched(spawner: &Spawner, request: &Request, fds: Vec<OwnedFd>) -> Result<(), Failure> {
    let mut fds = fds.into_iter();
    let (Some(stdout), Some(stderr)) = (fds.next(), fds.next()) else {
        return Err(Failure::Setup(
            "the spawner got a request without its pipes".into(),
        ));
    };
    let init = match (&request.init, fds.next()) {
        (Some(program), Some(socket)) => Some((program.as_path(), socket)),
        (Some(_), None) => {
            return Err(Failure::Setup(
                "the spawner got a sandbox init without its socket".into(),
            ));
        }
        (None, _) => None,
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
    let (mut child, prepared) = spawn(&spec, stdout, stderr, init).map_err(Failure::from_error)?;
    let pid = child.id();
    let pidfd = match Pid::from_raw(pid.cast_signed())
        .ok_or(rustix::io::Errno::SRCH)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()))
    {
        Ok(pidfd) => pidfd,
        Err(errno) => {
            // Unwatched, it would never be reported: stop it now.
            kill_process_group(pid);
            let _ = child.wait();
            return Err(Failure::Setup(format!(
                "the spawner cannot watch the command it started: {errno}"
            )));
        }
    };
    let key = epoll::EventData::new_u64(u64::from(pid));
    let mut running = spawner.running();
    // One-shot: once reported, an ended command's pidfd stays readable
    // until its worker has cleaned up, which must not wake the loop again.
    let flags = epoll::EventFlags::IN | epoll::EventFlags::ONESHOT;
    let watched = epoll::add(&spawner.epoll, &pidfd, key, flags);
    running.insert(
        pid,
        Running {
            id: request.id,
            child,
            prepared,
            _pidfd: pidfd,
        },
    );
    // Said while the set is held: a command that ends at once is taken
    // from the set by the event loop, and reaped and reported by another
    // worker, only after this. Said after, its end could reach tack
    // before its start, which tack takes for a spawner that stopped.
    spawner.reply(&Reply::Started {
        id: request.id,
        pid,
    });
    drop(running);
    if watched.is_err() || spawner.closing.load(Ordering::Acquire) {
        // Never reported ended, or tack is gone: its end comes from here.
        kill_process_group(pid);
        if let Some(command) = spawner.running().remove(&pid) {
            finish(spawner, pid, command);
        }
    }
    Ok(())
}

/// Starts bash, or with `init` a trial's sandbox init and its socket.
fn spawn(
    spec: &CommandSpec<'_>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    init: Option<(&std::path::Path, OwnedFd)>,
) -> Result<(Child, plan::Prepared), crate::SandboxError> {
    use std::os::fd::AsRawFd;
    // An init's socket, and the descriptor it is exec'd through: kept
    // until it is spawned.
    let (mut prepared, mut command, held) = match init {
        None => (
            plan::prepare(spec.confinement, spec.cwd, probe())?,
            local::bash(spec),
            None,
        ),
        Some((program, socket)) => {
            let (prepared, args) =
                plan::prepare_session(spec.confinement, spec.cwd, probe(), socket.as_raw_fd())?;
            let (command, exe) = local::init_command(program, &args, spec.confinement, spec.cwd)?;
            (prepared, command, Some((socket, exe)))
        }
    };
    if let Some(plan) = prepared.plan.as_mut().and_then(Arc::get_mut) {
        plan.die_with = Some(rustix::process::getpid().as_raw_nonzero().get());
    }
    local::confine(&mut command, &mut prepared)?;
    command
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    let spawned = command.spawn();
    // Close our copies of the plan's descriptors and the failure pipe's
    // write end (so reading it cannot block), of the output pipes (so
    // tack sees their end when the command's processes are gone), and of
    // an init's socket (so it sees tack's end close, not ours).
    drop(command);
    drop(held);
    let child =
        spawned.map_err(|source| local::spawn_error(Some(&mut prepared), spec.cwd, source))?;
    Ok((child, prepared))
}

/// Reaps an ended (or killed) command, kills whatever it left running in
/// the background, removes its private tmp and cgroup, and reports.
fn finish(spawner: &Spawner, pid: u32, mut command: Running) {
    let status = match command.child.wait() {
        Ok(status) => status.into_raw(),
        // Cannot happen for our own child; report it as killed.
        Err(_) => libc::SIGKILL,
    };
    kill_process_group(pid);
    drop(command.prepared);
    spawner.reply(&Reply::Exited {
        id: command.id,
        status,
    });
}
