//! Engine mode: commands run in a container the engine (podman, docker)
//! started for the trial, each through the engine's `exec`. The container
//! is the walls: its own filesystem, user namespace and network (or none).
//! tack's kernel walls are not built for these commands; what tack adds is
//! what a command gets everywhere: a timeout (inside the container too,
//! with the image's `timeout`), capped output, a process group to kill.
//!
//! Placements the container was not started with (a check's `/tests`, its
//! reward directory, the oracle's `/solution`) are copied in before the
//! command, fresh each time, and writable ones copied back out after it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::supervise::{Ended, supervise};
use crate::{CommandSpec, Confinement, ImageUser, Placement, SandboxError, capture};

/// A trial's container, for [`Confinement::in_container`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerRoot {
    /// The engine's program (`podman`, `docker`).
    pub engine: String,
    /// The container's name.
    pub name: String,
    /// Who commands run as, in the image's ids; `None`: its root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<ImageUser>,
    /// Where the container already shows a placement (bound when it was
    /// started: the workspace): those are not copied.
    #[serde(default)]
    pub bound: Vec<PathBuf>,
    /// The image's `timeout` program: a command runs under it, so that its
    /// timeout ends it in the container as well (ending `exec` does not).
    /// Without one, a command that times out is left to the container's
    /// end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_program: Option<String>,
}

/// How long after its timeout a command's `exec` is ended from outside,
/// when the container's own `timeout` has not ended it first.
const GRACE: Duration = Duration::from_secs(5);

impl ContainerRoot {
    /// The engine's command with `args`, its standard input closed. The
    /// engine is tack's own tool: it gets tack's environment (its
    /// configuration, `CONTAINERS_CONF`, `DOCKER_HOST`); the command in the
    /// container gets only what `exec` is told.
    fn engine(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.engine);
        command.args(args).stdin(Stdio::null());
        command
    }

    /// `exec` of `argv` in the container as its user, in `cwd` (as the
    /// container names it), with `env`; `interactive`: with its standard
    /// input (a service's).
    pub(crate) fn exec(
        &self,
        cwd: &Path,
        env: &[(String, String)],
        argv: &[&str],
        interactive: bool,
    ) -> Command {
        let mut command = self.engine(&["exec"]);
        if interactive {
            command.arg("--interactive");
        }
        let user = self.user.unwrap_or(ImageUser { uid: 0, gid: 0 });
        command
            .arg("--workdir")
            .arg(cwd)
            .arg("--user")
            .arg(format!("{}:{}", user.uid, user.gid));
        for (name, value) in env {
            command.arg("--env").arg(format!("{name}={value}"));
        }
        command.arg(&self.name).args(argv);
        command
    }

    /// Runs an engine command to its end, for the copies around a command:
    /// its failure is a setup error naming what failed.
    async fn step(&self, command: Command, what: &str) -> Result<(), SandboxError> {
        let output = tokio::process::Command::from(command)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|source| SandboxError::Spawn {
                cwd: format!("{} ({what})", self.engine),
                source,
            })?;
        if output.status.success() {
            return Ok(());
        }
        Err(SandboxError::Confine {
            step: format!("{what} in container {}", self.name),
            source: std::io::Error::other(
                String::from_utf8_lossy(&output.stderr).trim().to_string(),
            ),
        })
    }

    /// Shows `place` in the container: a fresh directory at its path,
    /// holding a copy of the host directory, owned by the command's user
    /// when it is writable.
    async fn copy_in(&self, place: &Placement) -> Result<(), SandboxError> {
        let at = place.at.display().to_string();
        let root = ContainerRoot {
            user: None,
            ..self.clone()
        };
        let fresh = root.exec(
            Path::new("/"),
            &[],
            &[
                "sh",
                "-c",
                "rm -rf -- \"$1\" && mkdir -p -- \"$1\"",
                "sh",
                &at,
            ],
            false,
        );
        root.step(fresh, &format!("making {at}")).await?;
        let mut copy = self.engine(&["cp"]);
        copy.arg(format!("{}/.", place.host.display()))
            .arg(format!("{}:{at}", self.name));
        self.step(copy, &format!("copying {at} in")).await?;
        if place.writable
            && let Some(user) = self.user
        {
            let owner = format!("{}:{}", user.uid, user.gid);
            let give = root.exec(Path::new("/"), &[], &["chown", "-R", &owner, &at], false);
            root.step(give, &format!("giving {at} to {owner}")).await?;
        }
        Ok(())
    }

    /// Copies a writable placement's contents back to its host directory
    /// (which only tack can enter: what comes back is what the command
    /// left, links and modes included, and is read as such).
    async fn copy_out(&self, place: &Placement) -> Result<(), SandboxError> {
        let at = place.at.display().to_string();
        let mut copy = self.engine(&["cp"]);
        copy.arg(format!("{}:{at}/.", self.name)).arg(&place.host);
        self.step(copy, &format!("copying {at} out")).await
    }
}

/// The placements of `confinement` the container was not started with.
fn copied(confinement: &Confinement, container: &ContainerRoot) -> Vec<Placement> {
    confinement
        .placed
        .iter()
        .filter(|p| !container.bound.contains(&p.at))
        .cloned()
        .collect()
}

/// Runs `bash -c script` in the container, to its end or timeout.
pub(crate) async fn run(
    spec: &CommandSpec<'_>,
    container: &ContainerRoot,
) -> Result<Ended, SandboxError> {
    let copies = copied(spec.confinement, container);
    for place in &copies {
        container.copy_in(place).await?;
    }
    let cwd = spec.confinement.guest_path(spec.cwd);
    let seconds = spec.timeout.as_secs().max(1).to_string();
    let mut argv: Vec<&str> = Vec::new();
    if let Some(timeout) = &container.timeout_program {
        argv.extend([timeout.as_str(), "--kill-after=2", seconds.as_str()]);
    }
    argv.extend(["bash", "-c", spec.script]);
    let mut env = spec.env.to_vec();
    env.extend(["TMPDIR", "TMP", "TEMP"].map(|name| (name.to_string(), "/tmp".to_string())));
    let mut command = container.exec(&cwd, &env, &argv, false);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut command = crate::local::piped(command);
    let mut child = command.spawn().map_err(|source| SandboxError::Spawn {
        cwd: format!("{} exec {}", container.engine, container.name),
        source,
    })?;
    let group = child.id();
    let stdout = capture::spawn_reader(child.stdout.take(), spec.output_limit);
    let stderr = capture::spawn_reader(child.stderr.take(), spec.output_limit);
    let started = std::time::Instant::now();
    let mut ended = supervise(child.wait(), group, stdout, stderr, spec.timeout + GRACE).await?;
    // `timeout` answers 124 (137 once it had to kill): a command that ends
    // so at its time limit timed out, whatever it would have said.
    let code = ended.status.code();
    if container.timeout_program.is_some()
        && matches!(code, Some(124 | 137))
        && started.elapsed() >= spec.timeout
    {
        ended.timed_out = true;
    }
    for place in copies.iter().filter(|p| p.writable) {
        container.copy_out(place).await?;
    }
    Ok(ended)
}

/// `program args…` in the container with piped stdio, for a service (an
/// MCP stdio server): `exec --interactive`.
pub(crate) fn service_command(
    container: &ContainerRoot,
    confinement: &Confinement,
    cwd: &Path,
    env: &[(String, String)],
    program: &str,
    args: &[String],
) -> Command {
    let mut argv: Vec<&str> = vec![program];
    argv.extend(args.iter().map(String::as_str));
    container.exec(&confinement.guest_path(cwd), env, &argv, true)
}
