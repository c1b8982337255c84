//! One sandbox per trial. A confined command used to build its walls for
//! itself (user, mount, pid and network namespaces, the mounts, a pids
//! cgroup, a private tmp) and tear them down at its end: most of the cost
//! of a command under `strict`. A [`Session`] builds them once: an init
//! process ([`init`]) enters them and stays, and each command of the trial
//! is forked by it, locked down (no_new_privs, Landlock, seccomp) between
//! fork and exec. The trial's commands then share what a machine's share:
//! one `/tmp`, one process table; each still runs in its own process
//! group, killed when it ends or times out. Closing the session (dropping
//! it, or tack dying) ends the init, and the namespaces and mounts with it.
//!
//! The init is a program exec'd fresh, so it is single-threaded and may
//! fork freely: `TACK_SANDBOX_INIT` names one, or the crate's small
//! `tack-sandbox-init` beside the running binary serves (when it is of the
//! same build), or a binary that calls [`serve_init_if_asked`] first thing
//! in `main` (tack does) serves as its own. The small one is preferred:
//! exec'ing tack's own binary (relocating its 170 MB, starting its
//! allocator) cost a trial's sandbox several milliseconds of CPU. Without
//! any, [`Session::start`] returns `None` and commands build their own
//! walls, as before.

mod init;
mod slot;
mod wire;

pub use slot::SessionSlot;

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::capture;
use crate::plan::{InitArgs, Prepared};
use crate::{
    CommandOutput, CommandSpec, Confinement, SandboxError, SetupError, extract_denials, ipc, local,
    probe,
};
use wire::{FromInit, ToInit};

/// The first argument that makes a binary serve as a session's init.
pub const INIT_ARG: &str = "__tack-sandbox-init";

/// Names a binary that serves as a session's init, for programs that do
/// not serve themselves (tests, other front ends).
pub const INIT_ENV: &str = "TACK_SANDBOX_INIT";

/// The first argument that makes an init binary print its build id.
const BUILD_ARG: &str = "__tack-sandbox-build";

/// This build of the crate (build.rs: a hash of its sources).
const BUILD: &str = env!("TACK_SANDBOX_BUILD");

/// The name of the crate's init binary, looked for beside the running one.
const INIT_BINARY: &str = "tack-sandbox-init";

static SERVES_ITSELF: AtomicBool = AtomicBool::new(false);

/// Call first thing in `main`, before any thread starts: when this process
/// was started as a session's init, it serves and never returns; otherwise
/// it notes that this binary can be one, and returns.
pub fn serve_init_if_asked() {
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    if first.as_deref() == Some(std::ffi::OsStr::new(BUILD_ARG)) {
        println!("{BUILD}");
        std::process::exit(0)
    }
    if first.as_deref() == Some(std::ffi::OsStr::new(crate::spawner::SPAWNER_ARG)) {
        crate::spawner::serve_exec(args.next().as_deref())
    }
    if first.as_deref() != Some(std::ffi::OsStr::new(INIT_ARG)) {
        SERVES_ITSELF.store(true, Ordering::Release);
        return;
    }
    let parsed = args
        .next()
        .and_then(|json| serde_json::from_slice::<InitArgs>(json.as_encoded_bytes()).ok());
    match parsed {
        Some(init_args) => init::serve(&init_args),
        None => {
            eprintln!("tack sandbox init: started without its arguments");
            std::process::exit(2)
        }
    }
}

/// The program a session's init runs, if this process knows one (for
/// `tack doctor`).
pub fn init_program() -> Option<PathBuf> {
    static PROGRAM: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            if let Some(named) = std::env::var_os(INIT_ENV) {
                return Some(PathBuf::from(named));
            }
            small_init_program().or_else(|| {
                std::env::current_exe()
                    .ok()
                    .filter(|_| SERVES_ITSELF.load(Ordering::Acquire))
            })
        })
        .clone()
}

/// The crate's small init binary, when it lies beside the running one and
/// is of the same build (never this binary itself): sessions' init, and
/// the spawner (`crate::spawner`).
pub(crate) fn small_init_program() -> Option<PathBuf> {
    static SMALL: OnceLock<Option<PathBuf>> = OnceLock::new();
    SMALL
        .get_or_init(|| {
            let current = std::env::current_exe().ok()?;
            let beside = current.parent()?.join(INIT_BINARY);
            (beside != current && same_build(&beside)).then_some(beside)
        })
        .clone()
}

/// Whether the init binary at `path` was built from the same sources as
/// this one: a stale one, left by an earlier build, would misread the
/// init's arguments. Asked once per process (one short exec).
fn same_build(path: &Path) -> bool {
    std::process::Command::new(path)
        .arg(BUILD_ARG)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.trim_ascii() == BUILD.as_bytes())
}

/// Where each command's replies go, by request id.
#[derive(Default)]
struct Pending(Mutex<HashMap<u64, mpsc::UnboundedSender<FromInit>>>);

impl Pending {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, mpsc::UnboundedSender<FromInit>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A trial's sandbox: an init behind the walls of `confinement`, which
/// starts the trial's commands. Dropping it ends every command still
/// running and removes the walls.
pub struct Session {
    confinement: Confinement,
    socket: Arc<OwnedFd>,
    next_id: AtomicU64,
    pending: Arc<Pending>,
    alive: Arc<AtomicBool>,
    /// The process tack (or the spawner) started, which outlives the init
    /// and every command, and holds the walls' mount namespace last: its
    /// exit is the end of the walls.
    ended: Option<OwnedFd>,
    _init: InitProcess,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("profile", &self.confinement.profile)
            .field("alive", &self.alive.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The reply reader holds the socket too: shut it down, so the init
        // sees its end (and kills what still runs) and the reader stops.
        let _ = rustix::net::shutdown(self.socket.as_fd(), rustix::net::Shutdown::Both);
    }
}

/// How long an init may take to put its walls up.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Session::close`] waits for the walls to go (the init kills
/// what runs at once; this bounds a process stuck in the kernel).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

impl Session {
    /// Starts a sandbox for commands under `confinement`, entered at `cwd`.
    /// `Ok(None)` when there is nothing to share (an unconfined profile) or
    /// no init program: each command then builds its own walls.
    pub async fn start(
        confinement: &Confinement,
        cwd: &Path,
    ) -> Result<Option<Session>, SandboxError> {
        if !confinement.is_confined() {
            return Ok(None);
        }
        let Some(program) = init_program() else {
            return Ok(None);
        };
        Session::start_with(&program, confinement, cwd)
            .await
            .map(Some)
    }

    /// Starts a sandbox whose init is `program` (a binary that calls
    /// [`serve_init_if_asked`]).
    pub async fn start_with(
        program: &Path,
        confinement: &Confinement,
        cwd: &Path,
    ) -> Result<Session, SandboxError> {
        crate::check_confinement(confinement, probe())?;
        let (ours, theirs) = ipc::socket_pair().map_err(SetupError::Pipe)?;
        let (init, pid) = match crate::spawner::client() {
            // The spawner outlives tack: if tack is killed, it still removes
            // the session's walls once the init has seen tack's end close.
            Some(spawner) => {
                let pid = spawner
                    .start_init(program, confinement, cwd, theirs)
                    .await?;
                (InitProcess::default(), pid)
            }
            None => {
                let (prepared, args) = crate::plan::prepare_session(
                    confinement,
                    cwd,
                    probe(),
                    std::os::fd::AsRawFd::as_raw_fd(&theirs),
                )?;
                let init = InitProcess::spawn(program, &args, confinement, cwd, prepared, theirs)?;
                let pid = init.child.as_ref().map_or(0, std::process::Child::id);
                (init, pid)
            }
        };
        // Opened while the process must still run (it answers `Ready`
        // below), so the id cannot have been reused.
        let ended = rustix::process::Pid::from_raw(pid.cast_signed()).and_then(|pid| {
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
        });
        let session = Session {
            confinement: confinement.clone(),
            socket: Arc::new(ours),
            next_id: AtomicU64::new(1),
            pending: Arc::default(),
            alive: Arc::new(AtomicBool::new(true)),
            ended,
            _init: init,
        };
        session.wait_ready().await?;
        Ok(session)
    }

    /// Starts the reader of the init's replies once the init says it serves.
    async fn wait_ready(&self) -> Result<(), SandboxError> {
        let socket = self.socket.clone();
        let ready = tokio::task::spawn_blocking(move || {
            let mut buffer = vec![0u8; 4096];
            ipc::receive::<FromInit>(socket.as_fd(), &mut buffer)
        });
        let started = Instant::now();
        let answer = tokio::time::timeout(START_TIMEOUT, ready).await;
        let failed = |why: String| SandboxError::Setup(SetupError::Session(why));
        match answer {
            Ok(Ok(Ok(Some((FromInit::Ready, _))))) => {}
            Ok(Ok(Ok(None))) => {
                return Err(failed(
                    "the trial's sandbox init stopped before it was ready".into(),
                ));
            }
            Ok(Ok(Err(error))) => return Err(failed(error.to_string())),
            Ok(Ok(Ok(Some((other, _))))) => {
                return Err(failed(format!("the init answered {other:?} first")));
            }
            Ok(Err(join)) => return Err(failed(join.to_string())),
            Err(_) => {
                return Err(failed(format!(
                    "the trial's sandbox init was not ready after {:?}",
                    started.elapsed()
                )));
            }
        }
        let (socket, pending, alive) = (
            self.socket.clone(),
            self.pending.clone(),
            self.alive.clone(),
        );
        std::thread::Builder::new()
            .name("tack-session-replies".into())
            .spawn(move || read_replies(&socket, &pending, &alive))
            .map_err(|e| failed(format!("cannot start the reader of its replies: {e}")))?;
        Ok(())
    }

    /// Ends the session and waits until its walls are gone: every command
    /// killed, the namespaces and mounts released (an image's overlay can
    /// then be mounted again, for the checks). Dropping a session ends it
    /// too, without waiting.
    pub async fn close(mut self) {
        let _ = rustix::net::shutdown(self.socket.as_fd(), rustix::net::Shutdown::Both);
        let Some(ended) = self.ended.take() else {
            return;
        };
        let waited = tokio::task::spawn_blocking(move || {
            let mut fds = [rustix::event::PollFd::new(
                &ended,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::event::Timespec {
                tv_sec: CLOSE_TIMEOUT.as_secs().cast_signed(),
                tv_nsec: 0,
            };
            while let Err(rustix::io::Errno::INTR) = rustix::event::poll(&mut fds, Some(&timeout)) {
            }
        });
        let _ = waited.await;
    }

    /// The walls every command of this session runs behind.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// Runs `bash -c script` in the session. The spec's confinement is the
    /// session's: what it asks is ignored.
    pub async fn run(&self, spec: &CommandSpec<'_>) -> Result<CommandOutput, SandboxError> {
        let started = Instant::now();
        if !self.alive.load(Ordering::Acquire) {
            return Err(SetupError::Session("the trial's sandbox has stopped".into()).into());
        }
        let cwd = std::path::absolute(spec.cwd).map_err(|source| SandboxError::Spawn {
            cwd: spec.cwd.display().to_string(),
            source,
        })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // The init adds the session's private tmp (TMPDIR, TMP, TEMP).
        let mut env = crate::scrubbed_environment();
        env.extend(spec.env.iter().cloned());
        let request = ToInit::Run {
            id,
            script: spec.script.to_string(),
            cwd: self.confinement.guest_path(&cwd),
            env,
            timeout_ms: u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let (stdout_read, stdout_write) = std::io::pipe().map_err(SandboxError::Output)?;
        let (stderr_read, stderr_write) = std::io::pipe().map_err(SandboxError::Output)?;
        let (sender, mut replies) = mpsc::unbounded_channel();
        let registered = Registered::new(&self.pending, &self.socket, id, sender);
        let fds = [stdout_write.as_fd(), stderr_write.as_fd()];
        ipc::send(self.socket.as_fd(), &request, &fds).map_err(|error| {
            SetupError::Session(format!("could not reach the trial's sandbox: {error}"))
        })?;
        // The init has its copies; with ours closed, the readers see the
        // end of the output when the command's processes are gone.
        drop((stdout_write, stderr_write));
        let stdout = capture::spawn_reader(Some(receiver(stdout_read)?), spec.output_limit);
        let stderr = capture::spawn_reader(Some(receiver(stderr_read)?), spec.output_limit);
        let stopped =
            || SandboxError::from(SetupError::Session("the trial's sandbox stopped".into()));
        match replies.recv().await {
            Some(FromInit::Started { .. }) => {}
            Some(FromInit::Failed { message, .. }) => {
                return Err(SandboxError::Spawn {
                    cwd: cwd.display().to_string(),
                    source: std::io::Error::other(message),
                });
            }
            _ => return Err(stopped()),
        }
        let (status, timed_out) = match replies.recv().await {
            Some(FromInit::Exited {
                status, timed_out, ..
            }) => (ExitStatus::from_raw(status), timed_out),
            _ => return Err(stopped()),
        };
        registered.done();
        let stdout = capture::finish(stdout).await?;
        let stderr = capture::finish(stderr).await?;
        let denials = extract_denials(
            &stdout.text,
            &stderr.text,
            crate::Walls::of(&self.confinement),
        );
        Ok(CommandOutput {
            exit_code: if timed_out { None } else { status.code() },
            signal: status.signal(),
            stdout: stdout.text,
            stderr: stderr.text,
            stdout_truncated: stdout.truncated,
            stderr_truncated: stderr.truncated,
            timed_out,
            duration: started.elapsed(),
            profile: self.confinement.profile,
            denials,
        })
    }
}

fn receiver(pipe: std::io::PipeReader) -> Result<tokio::net::unix::pipe::Receiver, SandboxError> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(pipe))
        .map_err(SandboxError::Output)
}

/// A request's entry in [`Pending`]. Dropped before its command ended (the
/// run was cancelled), it has the init kill the command's group.
struct Registered<'a> {
    pending: &'a Pending,
    socket: &'a OwnedFd,
    id: u64,
    running: bool,
}

impl<'a> Registered<'a> {
    fn new(
        pending: &'a Pending,
        socket: &'a OwnedFd,
        id: u64,
        sender: mpsc::UnboundedSender<FromInit>,
    ) -> Self {
        pending.lock().insert(id, sender);
        Registered {
            pending,
            socket,
            id,
            running: true,
        }
    }

    fn done(mut self) {
        self.running = false;
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.pending.lock().remove(&self.id);
        if self.running {
            let _ = ipc::send(self.socket.as_fd(), &ToInit::Kill { id: self.id }, &[]);
        }
    }
}

/// Hands each reply to its command until the init goes away; then every
/// waiting command learns it.
fn read_replies(socket: &OwnedFd, pending: &Pending, alive: &AtomicBool) {
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(Some((reply, _fds))) = ipc::receive::<FromInit>(socket.as_fd(), &mut buffer) {
        let Some(id) = reply.id() else {
            continue;
        };
        if let Some(sender) = pending.lock().get(&id) {
            let _ = sender.send(reply);
        }
    }
    alive.store(false, Ordering::Release);
    pending.lock().clear();
}

/// The init, when tack started it itself; its walls (private tmp, pids
/// cgroup) are removed once it has exited. Started by the spawner, the
/// spawner does that.
#[derive(Default)]
struct InitProcess {
    child: Option<std::process::Child>,
    prepared: Option<Prepared>,
}

impl InitProcess {
    fn spawn(
        program: &Path,
        args: &InitArgs,
        confinement: &Confinement,
        cwd: &Path,
        mut prepared: Prepared,
        socket: OwnedFd,
    ) -> Result<InitProcess, SandboxError> {
        let (mut command, _program) = local::init_command(program, args, confinement, cwd)?;
        local::confine(&mut command, &mut prepared)?;
        let spawned = command.spawn();
        // The child has its copies of the plan's descriptors and the socket.
        drop(command);
        drop(socket);
        let child =
            spawned.map_err(|source| local::spawn_error(Some(&mut prepared), cwd, source))?;
        Ok(InitProcess {
            child: Some(child),
            prepared: Some(prepared),
        })
    }
}

impl Drop for InitProcess {
    fn drop(&mut self) {
        // The init ends when tack's socket closes (dropped with the
        // session, before this); the walls go once it has.
        let (Some(mut child), prepared) = (self.child.take(), self.prepared.take()) else {
            return;
        };
        // Closed ([`Session::close`]): it has exited, the walls go now.
        if let Ok(Some(_)) = child.try_wait() {
            drop(prepared);
            return;
        }
        let ended = std::thread::Builder::new()
            .name("tack-session-end".into())
            .spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = child.kill();
                let _ = child.wait();
                drop(prepared);
            });
        if ended.is_err() {
            // No thread to wait in: the walls are removed now, the init's
            // namespace goes when it exits.
        }
    }
}
