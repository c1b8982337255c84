//! Commands tack forks itself: every unconfined command (std spawns those
//! with posix_spawn, which does not copy tack's address space), and confined
//! ones when no spawner runs. The bash command and its confinement are built
//! here for the spawner too.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::supervise::{Ended, supervise};
use crate::{CommandSpec, SandboxError, SetupError, capture, plan, probe};

/// `bash -c <script>` in `cwd` with the scrubbed environment and the
/// command's own variables; stdin is /dev/null.
pub(crate) fn bash(spec: &CommandSpec<'_>) -> Command {
    // std enters the directory before the confinement runs, so it must be
    // the host's name for it; the child enters the placed name afterwards.
    let mut command = program("bash", &spec.confinement.host_path(spec.cwd), spec.env);
    std::os::unix::process::CommandExt::arg0(&mut command, "bash");
    command.arg("-c").arg(spec.script).stdin(Stdio::null());
    command
}

/// A trial's sandbox init ([`crate::session`]): `program INIT_ARG <args>`
/// in `cwd` with the scrubbed environment; stdin and stdout /dev/null. In
/// an image's filesystem the program's path is not there when it is
/// exec'd: it is exec'd through a descriptor opened now (keep the returned
/// one until the command is spawned).
pub(crate) fn init_command(
    program: &Path,
    args: &plan::InitArgs,
    confinement: &crate::Confinement,
    cwd: &Path,
) -> Result<(Command, Option<std::os::fd::OwnedFd>), SandboxError> {
    let json = serde_json::to_string(args).map_err(|e| {
        SetupError::Session(format!("cannot write the sandbox init's arguments: {e}"))
    })?;
    let host_cwd = confinement.host_path(cwd);
    let (shown, held) = match &confinement.image {
        None => (program.display().to_string(), None),
        Some(_) => {
            use std::os::fd::AsRawFd;
            let fd = rustix::fs::open(
                program,
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .map_err(|errno| SandboxError::Spawn {
                cwd: program.display().to_string(),
                source: errno.into(),
            })?;
            (format!("/proc/self/fd/{}", fd.as_raw_fd()), Some(fd))
        }
    };
    let mut command = self::program(&shown, &host_cwd, &[]);
    command
        .arg(crate::INIT_ARG)
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    Ok((command, held))
}

/// `program`, found in the `PATH` of `env` over the scrubbed base
/// environment, to run in `cwd` with that environment only.
pub(crate) fn program(program: &str, cwd: &Path, env: &[(String, String)]) -> Command {
    let base = crate::scrubbed_environment();
    let path = env
        .iter()
        .chain(&base)
        .rev()
        .find(|(name, _)| name == "PATH")
        .map_or("", |(_, value)| value.as_str());
    let mut command = Command::new(find_in_path(program, path));
    command
        .current_dir(cwd)
        .env_clear()
        .envs(base)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command
}

/// The program's absolute path in the command's own `PATH`. std starts a
/// command with a changed `PATH` by fork rather than posix_spawn when the
/// program is a bare name (posix_spawnp would search tack's `PATH`), and a
/// fork copies tack's page tables; an absolute path keeps posix_spawn.
/// Unfound, the bare name is left for the spawn to report.
pub(crate) fn find_in_path(program: &str, path: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return program.into();
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| program.into())
}

/// Hands the prepared plan to the child. The child makes its own session
/// (and so its own process group) in the plan's first step.
pub(crate) fn confine(
    command: &mut Command,
    prepared: &mut plan::Prepared,
) -> Result<(), SandboxError> {
    command.envs(prepared.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // Never an empty plan in its place: that would run unconfined.
    let plan = prepared.plan.take().ok_or(SetupError::PlanUsed)?;
    #[allow(unsafe_code)]
    // SAFETY: child::enter runs between fork and exec and only makes raw
    // system calls on data prepared before the fork (no allocation, no
    // locks); see child.rs.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || crate::child::enter(&plan));
    }
    Ok(())
}

/// What a failed spawn means: a setup step the child reported, or bash
/// itself not starting.
pub(crate) fn spawn_error(
    prepared: Option<&mut plan::Prepared>,
    cwd: &Path,
    source: std::io::Error,
) -> SandboxError {
    confine_error(prepared, source).unwrap_or_else(|source| SandboxError::Spawn {
        cwd: cwd.display().to_string(),
        source,
    })
}

/// The setup step the child reported failing, as an error; otherwise the
/// program itself did not start, and `source` is handed back.
pub(crate) fn confine_error(
    prepared: Option<&mut plan::Prepared>,
    source: std::io::Error,
) -> Result<SandboxError, std::io::Error> {
    match prepared.and_then(plan::Prepared::failed_step) {
        Some(step) => Ok(SandboxError::Confine { step, source }),
        None => Err(source),
    }
}

pub(crate) async fn run(spec: &CommandSpec<'_>) -> Result<Ended, SandboxError> {
    let mut prepared = if spec.confinement.is_confined() {
        Some(plan::prepare(spec.confinement, spec.cwd, probe())?)
    } else {
        None
    };
    let mut command = bash(spec);
    match prepared.as_mut() {
        Some(prepared) => confine(&mut command, prepared)?,
        None => {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
    }
    let mut command = piped(command);
    let spawned = command.spawn();
    // The child has its copies; drop ours of the plan's descriptors (and
    // the failure pipe's write end, so reading it cannot block).
    drop(command);
    let mut child = spawned.map_err(|source| spawn_error(prepared.as_mut(), spec.cwd, source))?;
    let group = child.id();
    let stdout = capture::spawn_reader(child.stdout.take(), spec.output_limit);
    let stderr = capture::spawn_reader(child.stderr.take(), spec.output_limit);
    let ended = supervise(child.wait(), group, stdout, stderr, spec.timeout).await;
    // Removes the private tmp and the pids cgroup, once the group is dead.
    drop(prepared);
    ended
}

/// `command` for tokio, its output captured through pipes and the process
/// killed if the run is dropped (cancelled) before it ends.
pub(crate) fn piped(command: std::process::Command) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(command);
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}
