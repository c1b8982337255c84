//! Long-lived programs that talk over their stdio for a whole trial (MCP
//! stdio servers), confined like the agent's commands. Unlike a command, a
//! service has no timeout and no output cap: the caller owns its pipes. What
//! stays the same is the end: however the service ends (it exits, is killed,
//! or the [`Service`] is dropped), its whole process group is killed and
//! its private tmp and pids cgroup are removed, so nothing it started
//! outlives it. Confined services are also pid 1's only child in their own
//! pid namespace, which takes even a `setsid` grandchild down with them.
//!
//! Services are forked from tack itself, not the spawner: there are a few
//! per trial, not one per shell command, and the spawner hands back only
//! output pipes.

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use crate::supervise::kill_process_group;
use crate::{
    Confinement, SandboxError, SandboxProfile, SetupError, check_confinement, local, plan, probe,
};

/// What to start and how.
#[derive(Debug, Clone)]
pub struct ServiceSpec<'a> {
    /// Found in the `PATH` of `env` (over the scrubbed base environment)
    /// unless it contains a `/`.
    pub program: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// Extra variables, on top of the scrubbed base environment.
    pub env: &'a [(String, String)],
    /// How the kernel confines it ([`Confinement::off`] for none).
    pub confinement: &'a Confinement,
}

/// A started service: its stdin, stdout and stderr are pipes to take with
/// [`Service::stdin`] and friends. Read stderr (or drain it) if the program
/// writes much there: a full pipe blocks it. Dropping it kills the whole
/// process group and removes the private tmp and cgroup.
#[derive(Debug)]
pub struct Service {
    child: Child,
    /// The process group to kill; `None` once killed after the leader was
    /// reaped (its id may be reused after that).
    group: Option<u32>,
    /// Kept until the group is dead: dropping it removes the tmp and cgroup.
    prepared: Option<plan::Prepared>,
    profile: SandboxProfile,
}

/// Starts `spec.program` with piped stdin, stdout and stderr, in its own
/// process group, with the scrubbed environment plus `spec.env`, confined
/// as `spec.confinement` says (a confinement this machine cannot enforce
/// fails with [`SandboxError::Unavailable`] before anything runs). Must be
/// called within a Tokio runtime, which watches the pipes and the exit.
pub fn spawn_service(spec: &ServiceSpec<'_>) -> Result<Service, SandboxError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(SetupError::NoRuntime.into());
    }
    let confinement = spec.confinement;
    if let Some(container) = &confinement.container {
        let mut command = crate::container::service_command(
            container,
            confinement,
            spec.cwd,
            spec.env,
            spec.program,
            spec.args,
        );
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        return start(command, None, spec);
    }
    if confinement.is_confined() || confinement.asks_confinement() {
        check_confinement(confinement, probe())?;
    }
    let mut prepared = if confinement.is_confined() {
        Some(plan::prepare(confinement, spec.cwd, probe())?)
    } else {
        None
    };
    // The host's name for a placed directory: see `local::bash`.
    let cwd = confinement.host_path(spec.cwd);
    let mut command = local::program(spec.program, &cwd, spec.env);
    std::os::unix::process::CommandExt::arg0(&mut command, spec.program);
    command.args(spec.args);
    match prepared.as_mut() {
        Some(prepared) => local::confine(&mut command, prepared)?,
        None => {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
    }
    start(command, prepared, spec)
}

/// Spawns the prepared command with piped stdio.
fn start(
    command: std::process::Command,
    mut prepared: Option<plan::Prepared>,
    spec: &ServiceSpec<'_>,
) -> Result<Service, SandboxError> {
    let mut command = crate::local::piped(command);
    let spawned = command.stdin(Stdio::piped()).spawn();
    // Closes our copies of the plan's descriptors and of the failure pipe's
    // write end, so that reading it cannot block.
    drop(command);
    let child = spawned.map_err(|source| {
        local::confine_error(prepared.as_mut(), source).unwrap_or_else(|source| {
            SandboxError::StartService {
                program: spec.program.to_string(),
                cwd: spec.cwd.display().to_string(),
                source,
            }
        })
    })?;
    // The child made itself a group leader (its own session when confined;
    // the process outside the pid namespace, which relays the exit).
    let group = child.id();
    Ok(Service {
        child,
        group,
        prepared,
        profile: spec.confinement.profile,
    })
}

impl Service {
    /// The service's stdin, the first time it is asked for. Dropping it
    /// closes the pipe: the service reads end of file.
    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The service's stdout, the first time it is asked for.
    pub fn stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The service's stderr, the first time it is asked for.
    pub fn stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// The process id of the group leader, until it has been waited for.
    /// For a confined service this is the process that relays the exit
    /// status from outside the pid namespace, not the program itself.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The profile it runs under (`off` = unconfined).
    pub fn profile(&self) -> SandboxProfile {
        self.profile
    }

    /// Kills the whole process group and waits for the service's end.
    pub async fn kill(&mut self) -> Result<ExitStatus, SandboxError> {
        if let Some(group) = self.group {
            kill_process_group(group);
        }
        self.wait().await
    }

    /// Waits for the service to exit, then kills whatever it left running
    /// and removes its private tmp and cgroup. Cancel-safe: dropped midway,
    /// the service is still killed when the [`Service`] is.
    pub async fn wait(&mut self) -> Result<ExitStatus, SandboxError> {
        let status = self.child.wait().await.map_err(SandboxError::Wait)?;
        if let Some(group) = self.group.take() {
            kill_process_group(group);
        }
        self.prepared = None;
        Ok(status)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // Not waited for: the leader, alive or a zombie, still holds the
        // group id, so it names no one else's group.
        if let Some(group) = self.group.take() {
            kill_process_group(group);
        }
    }
}
