//! Running the agent's shell commands: `bash -c` in its own process group,
//! with a scrubbed environment, a timeout that kills the whole group, and
//! output capped with a marker. Every command ends with its process group
//! killed, so nothing it started in the background outlives it.
//!
//! It depends only on `tack-protocol`: it knows commands and walls, not
//! agents, suites or traces.
//!
//! Confined profiles (`strict`, `workspace_write`) add kernel enforcement,
//! for the command and everything it starts: fresh user, mount and pid
//! namespaces (and a network namespace with only a down loopback for
//! `strict`); the whole filesystem read-only but the workspace and a
//! private tmp; `.git` read-only; hidden directories covered; Landlock on
//! top; a seccomp deny list; rlimits and a process-count bound. A profile
//! that cannot be enforced here is an error ([`check_profile`]), never a
//! silent downgrade. `off` records that the command ran unconfined.
//!
//! [`Confinement::placing`] shows host directories at absolute paths the
//! host may lack (`/app`, `/tests`), in the command's mount namespace only.
//! [`Confinement::allowing_tcp_connect_only`] narrows the network to TCP
//! connections to given ports (tack's recording proxy on loopback).
//! Long-lived programs with piped stdio (MCP stdio servers) run under the
//! same confinement with [`spawn_service`].
//!
//! The agent's file tools run in tack's own process, outside all that:
//! [`WorkspaceFiles`] gives them the same view of the workspace as `bash`
//! (beneath it only, `.git` read-only, hidden paths invisible), checked on
//! descriptors with the kernel's `openat2`.

mod caps;
mod capture;
mod child;
mod confinement;
mod container;
mod denials;
mod environment;
mod files;
mod gate;
pub mod held;
mod idmap;
mod image;
mod inherited;
mod ipc;
mod landlock;
mod limits;
mod local;
mod mounts;
mod pidns;
mod places;
mod plan;
mod probe;
mod profiles;
pub mod render;
mod seccomp;
mod service;
mod session;
mod setup_error;
pub mod spawner;
mod supervise;
mod system_tmp;

use std::path::Path;
use std::time::{Duration, Instant};

pub use confinement::{
    Confinement, ContainerRoot, IMAGE_ID_BASE, IMAGE_IDS, ImageRoot, ImageUser, Placement,
    ResourceLimits,
};
pub use denials::{MAX_DENIALS, Walls, extract_denials};
pub use environment::{ALLOWED_ENV_VARS, scrubbed_environment};
pub use files::{FileAccessError, HeldWorkspace, WorkspaceFiles, read_beneath, read_left_file};
pub use gate::{REQUIRE_ENV, TestGate, gate_for, sandbox_required, test_gate};
pub use inherited::keep_inherited_descriptors_from_children;
pub use landlock::{LandlockError, MIN_ABI as MIN_LANDLOCK_ABI};
pub use plan::SHARED_TMPS;
pub use probe::{DISABLE_ENV, Missing, Probe, detect, probe};
pub use profiles::{check_confinement, check_profile};
pub use seccomp::{SeccompError, denied_calls};
pub use service::{Service, ServiceSpec, spawn_service};
pub use session::{INIT_ARG, INIT_ENV, Session, SessionSlot, init_program, serve_init_if_asked};
pub use setup_error::{PlaceError, SetupError};
pub use spawner::SpawnerError;
pub use system_tmp::SystemTmp;
pub use tack_protocol::SandboxProfile;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct CommandSpec<'a> {
    /// A bash script, run as `bash -c <script>`.
    pub script: &'a str,
    pub cwd: &'a Path,
    /// Extra variables, on top of the scrubbed base environment.
    pub env: &'a [(String, String)],
    pub timeout: Duration,
    /// Bytes kept of each of stdout and stderr; the rest is counted, not kept.
    pub output_limit: usize,
    /// How the kernel confines the command ([`Confinement::off`] for none).
    pub confinement: &'a Confinement,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// `None` when the command was killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    pub duration: Duration,
    /// The profile the command ran under (`off` = unconfined).
    pub profile: SandboxProfile,
    /// Output lines reporting a denied operation (EPERM, EACCES, EROFS,
    /// unreachable network…), deduplicated, at most [`MAX_DENIALS`].
    pub denials: Vec<String>,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    pub fn truncated(&self) -> bool {
        self.stdout_truncated || self.stderr_truncated
    }

    /// How the command ended, for a sentence: "exited with code 2", "was
    /// killed by signal 9", "ran past its 30 s and was killed".
    pub fn ending(&self) -> String {
        match (self.timed_out, self.exit_code, self.signal) {
            (true, _, _) => format!("ran past its {} s and was killed", self.duration.as_secs()),
            (_, Some(code), _) => format!("exited with code {code}"),
            (_, None, Some(signal)) => format!("was killed by signal {signal}"),
            _ => "ended without an exit code".to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "could not start `bash` in {cwd}: {source}. Is bash installed and the directory present?"
    )]
    Spawn { cwd: String, source: std::io::Error },
    #[error("lost the command's output: {0}")]
    Output(std::io::Error),
    /// The profile needs a mechanism this machine lacks.
    #[error("{message}")]
    Unavailable {
        profile: SandboxProfile,
        missing: Vec<String>,
        message: String,
    },
    #[error(
        "could not start the service `{program}` in {cwd}: {source}. Is it installed in the \
         service's PATH, and the directory present?"
    )]
    StartService {
        program: String,
        cwd: String,
        source: std::io::Error,
    },
    #[error("lost track of the service's process: {0}")]
    Wait(std::io::Error),
    /// Preparing the confinement failed (in tack, before the fork). Not a
    /// `source()`: the message has it, and the CLI prints the sources of an
    /// error after its message, so it would say it twice.
    #[error("could not prepare the sandbox: {0}")]
    Setup(SetupError),
    #[error("could not prepare the sandbox: {0}")]
    Spawner(SpawnerError),
    /// The child could not confine itself; the command did not run.
    #[error("the sandbox could not be set up ({step}): {source}; the command did not run")]
    Confine {
        step: String,
        source: std::io::Error,
    },
}

impl From<SetupError> for SandboxError {
    fn from(error: SetupError) -> SandboxError {
        SandboxError::Setup(error)
    }
}

impl From<SpawnerError> for SandboxError {
    fn from(error: SpawnerError) -> SandboxError {
        SandboxError::Spawner(error)
    }
}

/// Runs one command to completion (or timeout) and returns what it did.
/// A confined profile this machine cannot enforce fails with
/// [`SandboxError::Unavailable`] before anything runs.
///
/// Confined commands need a fork (their setup runs between fork and exec),
/// and forking copies the page tables of the whole process: with a thousand
/// trials in flight that was a third of tack's CPU. So when a spawner runs
/// ([`spawner::start`]), a small process forked at start-up, they are forked
/// from it instead.
pub async fn run(spec: &CommandSpec<'_>) -> Result<CommandOutput, SandboxError> {
    let started = Instant::now();
    let profile = spec.confinement.profile;
    if let Some(container) = &spec.confinement.container {
        let ended = container::run(spec, container).await?;
        return Ok(output(ended, started, profile, Walls::of(spec.confinement)));
    }
    // `off` narrowed to ports or with placements is checked too, only to
    // fail: nothing there can enforce them.
    if spec.confinement.is_confined() || spec.confinement.asks_confinement() {
        check_confinement(spec.confinement, probe())?;
    }
    let ended = if spec.confinement.is_confined() {
        match spawner::client() {
            Some(spawner) => spawner.run(spec).await?,
            None => local::run(spec).await?,
        }
    } else {
        local::run(spec).await?
    };
    Ok(output(ended, started, profile, Walls::of(spec.confinement)))
}

/// What a command that ended did.
fn output(
    ended: supervise::Ended,
    started: Instant,
    profile: SandboxProfile,
    walls: Walls,
) -> CommandOutput {
    use std::os::unix::process::ExitStatusExt;
    let denials = extract_denials(&ended.stdout.text, &ended.stderr.text, walls);
    CommandOutput {
        exit_code: if ended.timed_out {
            None
        } else {
            ended.status.code()
        },
        signal: ended.status.signal(),
        stdout: ended.stdout.text,
        stderr: ended.stderr.text,
        stdout_truncated: ended.stdout.truncated,
        stderr_truncated: ended.stderr.truncated,
        timed_out: ended.timed_out,
        duration: started.elapsed(),
        profile,
        denials,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off() -> &'static Confinement {
        static OFF: std::sync::OnceLock<Confinement> = std::sync::OnceLock::new();
        OFF.get_or_init(Confinement::off)
    }

    fn spec<'a>(script: &'a str, cwd: &'a Path) -> CommandSpec<'a> {
        CommandSpec {
            script,
            cwd,
            env: &[],
            timeout: Duration::from_secs(10),
            output_limit: 1024,
            confinement: off(),
        }
    }

    #[tokio::test]
    async fn keeps_exit_code_stdout_and_stderr_apart() {
        let dir = std::env::temp_dir();
        let out = run(&spec("echo out; echo err >&2; exit 3", &dir))
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert!(!out.timed_out && !out.truncated());
    }

    #[tokio::test]
    async fn caps_output_and_says_so() {
        let dir = std::env::temp_dir();
        let out = run(&spec("head -c 100000 /dev/zero | tr '\\0' x", &dir))
            .await
            .unwrap();
        assert!(out.stdout_truncated);
        assert_eq!(out.stdout.len(), 1024);
        assert_eq!(out.exit_code, Some(0));
    }

    #[tokio::test]
    async fn kills_the_whole_group_on_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survivor");
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let mut s = spec(&script, dir.path());
        s.timeout = Duration::from_millis(300);
        let out = run(&s).await.unwrap();
        assert!(out.timed_out);
        assert_eq!(out.exit_code, None);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(!marker.exists(), "a background child survived the timeout");
    }

    #[tokio::test]
    async fn background_children_do_not_outlive_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let script = format!("(sleep 1; touch {}) & echo started", marker.display());
        let out = run(&spec(&script, dir.path())).await.unwrap();
        assert_eq!(out.stdout, "started\n");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists());
    }

    #[tokio::test]
    async fn secrets_do_not_reach_the_command() {
        // SAFETY of the test: set_var is unsafe in edition 2024 because of
        // other threads reading the environment; the variable is unique to it.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("TACK_TEST_SECRET_API_KEY", "sk-should-not-leak");
        }
        let dir = std::env::temp_dir();
        let out = run(&spec("env", &dir)).await.unwrap();
        assert!(!out.stdout.contains("sk-should-not-leak"));
        assert!(out.stdout.contains("PATH="));
    }
}
