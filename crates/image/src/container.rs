//! Engine mode: a trial's container, started by the engine and kept for
//! the trial, for what tack's own sandbox cannot give a task (a service its
//! `ENTRYPOINT` starts and the checks talk to, the engine's networking).
//! Commands are then run in it with `exec` (the sandbox crate does that);
//! this module starts, lists and removes the containers.
//!
//! Every container is labelled with the trial directory it belongs to
//! ([`TRIAL_LABEL`]), so a run killed before it could remove one leaves
//! something the next run can find and remove ([`Engine::trial_containers`]).

use std::path::{Path, PathBuf};

use crate::{Engine, EngineKind, ImageError};

/// The label naming the trial directory a container belongs to.
pub const TRIAL_LABEL: &str = "tack.trial";

/// The command a trial's container runs (after the image's `ENTRYPOINT`,
/// if it has one): it keeps the container alive, as Harbor's does, so that
/// an entrypoint ending in `exec "$@"` sleeps once its services started.
pub const KEEP_ALIVE: [&str; 3] = ["sh", "-c", "sleep infinity"];

/// A host directory bound into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub host: PathBuf,
    pub at: String,
    pub writable: bool,
}

/// One of the engine's volumes mounted in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The volume's name on the engine (see [`volume_name`]).
    pub volume: String,
    pub at: String,
    pub read_only: bool,
}

/// What a trial's container is started from.
#[derive(Debug, Clone)]
pub struct ContainerSpec<'a> {
    /// The image's id or reference.
    pub image: &'a str,
    /// The container's name (unique on the engine).
    pub name: &'a str,
    /// The trial's directory, recorded in [`TRIAL_LABEL`].
    pub trial: &'a Path,
    /// The engine's default network when true; none at all (`--network
    /// none`) when false.
    pub network: bool,
    /// The container's ids 0–`id_count` are the host's from `id_base`:
    /// the same mapping as tack's own sandbox gives an image's users, so
    /// that files tack prepared for the trial have the owners they have
    /// in the image. Only on an engine that [maps ids per
    /// container](crate::EngineKind::maps_ids); docker's are the host's.
    pub id_base: u32,
    pub id_count: u32,
    pub binds: &'a [Bind],
    /// The trial's volumes it mounts.
    pub volumes: &'a [VolumeMount],
    /// `--cpus`: the CPUs the container may use.
    pub cpus: Option<f64>,
    /// `--memory`, in MiB: all the container's processes together.
    pub memory_mb: Option<u64>,
    /// Names that reach the container itself (`127.0.0.1`): its services',
    /// which share its network.
    pub hosts: &'a [String],
}

/// A service's container, started beside a trial's: it joins the trial
/// container's network (so each reaches the other on `127.0.0.1`) and, on
/// an engine that maps ids per container, its user namespace (the same
/// ids, and `exec` into it works).
#[derive(Debug, Clone)]
pub struct ServiceSpec<'a> {
    /// The image's id or reference.
    pub image: &'a str,
    /// The service container's name (see [`service_container_name`]).
    pub name: &'a str,
    /// The trial's directory, recorded in [`TRIAL_LABEL`].
    pub trial: &'a Path,
    /// The trial's container, started first.
    pub beside: &'a str,
    pub env: &'a [(String, String)],
    /// Its command instead of the image's `CMD`.
    pub command: Option<&'a [String]>,
    /// Its program instead of the image's `ENTRYPOINT` (then without the
    /// image's `CMD`, as the engines do); empty for none.
    pub entrypoint: Option<&'a [String]>,
    /// `--user`: who it runs as instead of the image's `USER`.
    pub user: Option<&'a str>,
    /// Files of the trial and volumes of the trial it mounts.
    pub binds: &'a [Bind],
    pub volumes: &'a [VolumeMount],
    /// A hosts file naming the trial's services, shown at `/etc/hosts`
    /// (an engine adds no host names to a container that joins another's
    /// network).
    pub hosts_file: &'a Path,
}

/// Whether a container runs, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Running,
    Exited(i64),
}

impl Engine {
    /// Starts the trial's container in the background, keeping it alive
    /// with [`KEEP_ALIVE`]. The engine's error (no such image, a name
    /// taken) comes back as it says it.
    pub fn start_container(&self, spec: &ContainerSpec<'_>) -> Result<(), ImageError> {
        let mut args = run_detached(spec.name, spec.trial);
        if self.kind.maps_ids() {
            let ids = format!("0:{}:{}", spec.id_base, spec.id_count);
            args.extend(["--uidmap".into(), ids.clone(), "--gidmap".into(), ids]);
        }
        if !spec.network {
            args.extend(["--network".into(), "none".into()]);
        }
        if let Some(cpus) = spec.cpus {
            args.extend(["--cpus".into(), cpus.to_string()]);
        }
        if let Some(memory) = spec.memory_mb {
            args.extend(["--memory".into(), format!("{memory}m")]);
        }
        for host in spec.hosts {
            args.extend(["--add-host".into(), format!("{host}:127.0.0.1")]);
        }
        mounts(&mut args, spec.binds, spec.volumes);
        args.push(spec.image.into());
        args.extend(KEEP_ALIVE.map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.output(&args).map(|_| ())
    }

    /// Starts a service's container in the background, running its
    /// image's entrypoint and command (or `spec.command`).
    pub fn start_service(&self, spec: &ServiceSpec<'_>) -> Result<(), ImageError> {
        let beside = format!("container:{}", spec.beside);
        let mut args = run_detached(spec.name, spec.trial);
        args.extend(["--network".into(), beside.clone()]);
        if self.kind.maps_ids() {
            args.extend(["--userns".into(), beside]);
        }
        args.extend([
            "--volume".into(),
            format!("{}:/etc/hosts:ro", spec.hosts_file.display()),
        ]);
        for (name, value) in spec.env {
            args.extend(["--env".into(), format!("{name}={value}")]);
        }
        if let Some(user) = spec.user {
            args.extend(["--user".into(), user.into()]);
        }
        mounts(&mut args, spec.binds, spec.volumes);
        // `--entrypoint` takes one program; its arguments lead the command.
        let mut command: Vec<String> = Vec::new();
        if let Some(entrypoint) = spec.entrypoint {
            let (program, rest) = entrypoint
                .split_first()
                .map_or(("", &[][..]), |(p, r)| (p.as_str(), r));
            args.push(format!("--entrypoint={program}"));
            command.extend(rest.iter().cloned());
        }
        command.extend(spec.command.unwrap_or_default().iter().cloned());
        args.push(spec.image.into());
        args.extend(command);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.output(&args).map(|_| ())
    }

    /// Makes the trial's volume `name` (see [`volume_name`]), labelled with
    /// the trial it belongs to like its containers.
    pub fn create_volume(&self, name: &str, trial: &Path) -> Result<(), ImageError> {
        let label = format!("{TRIAL_LABEL}={}", trial.display());
        self.output(&["volume", "create", "--label", &label, name])
            .map(|_| ())
    }

    /// Removes a volume; one already gone is no error.
    pub fn remove_volume(&self, name: &str) -> Result<(), ImageError> {
        match self.output(&["volume", "rm", "--force", name]) {
            Ok(_) => Ok(()),
            Err(ImageError::Engine { stderr, .. }) if gone(&stderr, "volume") => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Every volume a trial made, with its trial directory, of this run or
    /// of a killed one.
    pub fn trial_volumes(&self) -> Result<Vec<(String, PathBuf)>, ImageError> {
        self.labelled(&["volume", "ls"], "Name")
    }

    /// Whether the container `name` still runs.
    pub fn container_state(&self, name: &str) -> Result<ContainerState, ImageError> {
        let text = self.output(&[
            "inspect",
            "--format",
            "{{.State.Running}} {{.State.ExitCode}}",
            name,
        ])?;
        let mut words = text.split_whitespace();
        let running = words.next() == Some("true");
        let code = words.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
        Ok(if running {
            ContainerState::Running
        } else {
            ContainerState::Exited(code)
        })
    }

    /// The last `lines` lines the container printed, both streams.
    pub fn container_log(&self, name: &str, lines: usize) -> String {
        let lines = lines.to_string();
        match self.command(&["logs", "--tail", &lines, name]).output() {
            Ok(out) => format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .trim()
            .to_string(),
            Err(error) => format!("(its log could not be read: {error})"),
        }
    }

    /// Removes a container, killing what runs in it; one already gone is
    /// no error.
    pub fn remove_container(&self, name: &str) -> Result<(), ImageError> {
        // Killed at once: podman would first give it ten seconds after a
        // SIGTERM, which `sleep infinity` ignores; docker's `--force` kills.
        let args: &[&str] = match self.kind {
            EngineKind::Podman => &["rm", "--force", "--time", "0", name],
            EngineKind::Docker => &["rm", "--force", name],
        };
        match self.output(args) {
            Ok(_) => Ok(()),
            Err(ImageError::Engine { stderr, .. }) if gone(&stderr, "container") => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Every container a trial started, with its trial directory: running
    /// or not, of this run or of a killed one.
    pub fn trial_containers(&self) -> Result<Vec<(String, PathBuf)>, ImageError> {
        self.labelled(&["ps", "--all"], "Names")
    }

    /// What the listing `list` (containers, volumes) holds with a
    /// [`TRIAL_LABEL`]: each one's name (its field `name`) and trial
    /// directory.
    fn labelled(&self, list: &[&str], name: &str) -> Result<Vec<(String, PathBuf)>, ImageError> {
        // A listing's `.Labels` is a map to podman and one string to
        // docker, which has `.Label` for one label's value instead.
        let label = match self.kind {
            EngineKind::Podman => format!("index .Labels \"{TRIAL_LABEL}\""),
            EngineKind::Docker => format!(".Label \"{TRIAL_LABEL}\""),
        };
        let format = format!("{{{{.{name}}}}}\t{{{{{label}}}}}");
        let filter = format!("label={TRIAL_LABEL}");
        let mut args = list.to_vec();
        args.extend(["--filter", &filter, "--format", &format]);
        let text = self.output(&args)?;
        Ok(text
            .lines()
            .filter_map(|line| {
                let (name, trial) = line.split_once('\t')?;
                Some((name.trim().to_string(), PathBuf::from(trial.trim())))
            })
            .filter(|(name, trial)| !name.is_empty() && trial.is_absolute())
            .collect())
    }

    /// The program to run for this engine (`podman`, `docker`).
    pub fn program(&self) -> &'static str {
        self.kind.as_str()
    }
}

/// Whether the engine said there is no such `thing` (podman: "no such
/// container", docker: "No such container").
fn gone(stderr: &str, thing: &str) -> bool {
    stderr
        .to_ascii_lowercase()
        .contains(&format!("no such {thing}"))
}

/// `--volume` for each bind and volume.
fn mounts(args: &mut Vec<String>, binds: &[Bind], volumes: &[VolumeMount]) {
    let mode = |read_only: bool| if read_only { "ro" } else { "rw" };
    for bind in binds {
        args.extend([
            "--volume".into(),
            format!(
                "{}:{}:{}",
                bind.host.display(),
                bind.at,
                mode(!bind.writable)
            ),
        ]);
    }
    for volume in volumes {
        args.extend([
            "--volume".into(),
            format!("{}:{}:{}", volume.volume, volume.at, mode(volume.read_only)),
        ]);
    }
}

/// `run --detach` of a container named `name` and labelled with the trial
/// it belongs to.
fn run_detached(name: &str, trial: &Path) -> Vec<String> {
    vec![
        "run".into(),
        "--detach".into(),
        "--name".into(),
        name.into(),
        "--label".into(),
        format!("{TRIAL_LABEL}={}", trial.display()),
    ]
}

/// The name of the container of the trial in `trial`: derived from its
/// path, so that every part of tack that knows the trial's directory knows
/// its container.
pub fn container_name(trial: &Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(trial.as_os_str().as_encoded_bytes());
    format!("tack-trial-{}", crate::build::hex(&digest[..8]))
}

/// The engine's name of the trial's volume `volume` (a task's name for
/// it), unique to the trial like its containers' names.
pub fn volume_name(trial: &Path, volume: &str) -> String {
    format!("{}-vol-{volume}", container_name(trial))
}

/// The name of the container of service `service` of the trial in `trial`.
pub fn service_container_name(trial: &Path, service: &str) -> String {
    format!("{}-{service}", container_name(trial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_has_one_stable_container_name() {
        let a = container_name(Path::new("/tmp/tack-trials/t-1"));
        assert_eq!(a, container_name(Path::new("/tmp/tack-trials/t-1")));
        assert_ne!(a, container_name(Path::new("/tmp/tack-trials/t-2")));
        assert!(a.starts_with("tack-trial-") && a.len() == "tack-trial-".len() + 16);
    }
}
