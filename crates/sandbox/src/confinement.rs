//! What a command may touch: the profile, the paths it may write, the paths
//! it may only read, the paths it must not see, and its resource limits.

use std::path::{Path, PathBuf};

use tack_protocol::SandboxProfile;

pub use crate::container::ContainerRoot;
use hidden::{daemon_socket_dirs, default_hidden};

mod hidden;

/// Per-command resource limits, applied with `setrlimit` (and, for the
/// process count, a pid namespace `pid_max` and a pids cgroup where the
/// kernel offers them: `RLIMIT_NPROC` does not bind root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceLimits {
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Address space per process (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// Processes (and threads) the command may have at once.
    pub processes: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            cpu_secs: 300,
            memory_bytes: 4 << 30,
            processes: 256,
            file_size_bytes: 1 << 30,
        }
    }
}

/// How one command is confined. Build it with [`Confinement::strict`],
/// [`Confinement::workspace_write`] or [`Confinement::off`], then add
/// `hidden` (and more `read_only`) paths as the caller knows them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Confinement {
    pub profile: SandboxProfile,
    /// Writable beneath these (the workspace). A private temporary directory
    /// is created for every command, added here, and named by
    /// `TMPDIR`/`TMP`/`TEMP`; it is removed when the command ends.
    pub writable: Vec<PathBuf>,
    /// Bind-mounted read-only, even inside a writable path (`.git`).
    pub read_only: Vec<PathBuf>,
    /// Directories covered by an empty read-only tmpfs: the command sees an
    /// empty directory (the suite's tasks with their checks and solutions).
    pub hidden: Vec<PathBuf>,
    /// Directories whose contents the command may not read (Landlock), but
    /// for its own writable paths inside them: the directory holding every
    /// trial's workspace, so that an agent cannot read a concurrent trial's
    /// (a tmpfs cannot hide it: it would cover the agent's own workspace).
    pub sealed: Vec<PathBuf>,
    /// `Some(ports)`: the network is narrowed to TCP `connect` to these
    /// ports (Landlock network rules, ABI 4+), in the host's network
    /// namespace so that loopback reaches a proxy tack runs there. See
    /// [`Confinement::allowing_tcp_connect_only`].
    #[serde(default)]
    pub tcp_connect: Option<Vec<u16>>,
    /// Host directories shown at other absolute paths, in the command's
    /// mount namespace only (see [`Confinement::placing`]).
    #[serde(default)]
    pub placed: Vec<Placement>,
    /// Where the command's private temporary directory is shown and named
    /// in `TMPDIR` (`/tmp`, for scripts written for a container, which
    /// write there by name); by default it stays at its host path. What the
    /// host has under that path is then out of the command's sight but for
    /// what is placed elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_at: Option<PathBuf>,
    /// With `tmp_at`, a host directory shown there instead of a fresh one:
    /// a trial's `/tmp`, which lasts from one of its commands to the next
    /// as a container's does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_host: Option<PathBuf>,
    /// The command's root filesystem: an image's, under a writable layer of
    /// the trial's own, instead of the host's (see [`ImageRoot`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRoot>,
    /// Engine mode: the command runs in the trial's container, through the
    /// engine's `exec`, and none of the walls above is built for it (see
    /// [`ContainerRoot`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerRoot>,
    pub limits: ResourceLimits,
}

/// An image's filesystem as a command's root, for tasks written for a
/// container. The command sees the image, not the host: the image's files
/// (read-only) under a writable layer of the trial's own (an overlay), the
/// placed directories (the workspace at the image's `WORKDIR`), `/proc`
/// and a few devices. It runs as the image's root, in a user namespace
/// whose 65,536 ids are host ids from [`IMAGE_ID_BASE`]: the image's users
/// exist (`chown`, `su nobody` work) and none of them is a host user that
/// owns anything outside the trial. The image's files must be owned
/// accordingly (its extraction shifts them), and so must what is placed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageRoot {
    /// The image's files, their owners shifted by [`IMAGE_ID_BASE`]: the
    /// overlay's lower layer, never written.
    pub rootfs: PathBuf,
    /// The trial's writable layer: `upper/` and `work/` below it are made
    /// if missing. On the same filesystem as nothing in particular, but
    /// the two must share one (the overlay's rule).
    pub layer: PathBuf,
    /// Who the image's commands run as (its `USER`), in the image's ids;
    /// `None`: its root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<ImageUser>,
}

impl ImageRoot {
    /// Gives a directory tack made to the image's user (its host ids), so
    /// that the image's commands may write it (a check's reward directory).
    pub fn give(&self, dir: &std::path::Path) -> std::io::Result<()> {
        let user = self.user.unwrap_or(ImageUser { uid: 0, gid: 0 });
        std::os::unix::fs::chown(
            dir,
            Some(IMAGE_ID_BASE + user.uid),
            Some(IMAGE_ID_BASE + user.gid),
        )
    }
}

/// A user of an image, by its ids in the image (not the host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageUser {
    pub uid: u32,
    pub gid: u32,
}

/// The first host id an image's ids are mapped onto.
pub const IMAGE_ID_BASE: u32 = 100_000;
/// How many ids an image's user namespace maps (its 0 to 65,535).
pub const IMAGE_IDS: u32 = 65_536;

/// A host directory shown at `at` inside the command's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placement {
    pub host: PathBuf,
    /// Absolute, as the command names it; need not exist on the host.
    pub at: PathBuf,
    pub writable: bool,
}

impl Confinement {
    /// No confinement at all: only the process group, timeout, output caps
    /// and scrubbed environment that every command gets. Outputs record
    /// `profile = off` so reports can say the command ran unconfined.
    pub fn off() -> Self {
        Confinement {
            profile: SandboxProfile::Off,
            writable: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            sealed: Vec::new(),
            tcp_connect: None,
            placed: Vec::new(),
            tmp_at: None,
            tmp_host: None,
            image: None,
            container: None,
            limits: ResourceLimits::default(),
        }
    }

    /// Writes only beneath `workspace` (and the private tmp), no network,
    /// `workspace/.git` read-only if present.
    pub fn strict(workspace: &Path) -> Self {
        Self::for_workspace(SandboxProfile::Strict, workspace)
    }

    /// As [`Confinement::strict`] but with the host's network.
    pub fn workspace_write(workspace: &Path) -> Self {
        Self::for_workspace(SandboxProfile::WorkspaceWrite, workspace)
    }

    /// The confinement of `profile` for a workspace.
    pub fn for_profile(profile: SandboxProfile, workspace: &Path) -> Self {
        match profile {
            SandboxProfile::Off => Self::off(),
            profile => Self::for_workspace(profile, workspace),
        }
    }

    fn for_workspace(profile: SandboxProfile, workspace: &Path) -> Self {
        let git = workspace.join(".git");
        Confinement {
            profile,
            writable: vec![workspace.to_path_buf()],
            read_only: if git.exists() { vec![git] } else { Vec::new() },
            hidden: default_hidden(profile, workspace),
            sealed: Vec::new(),
            tcp_connect: None,
            placed: Vec::new(),
            tmp_at: None,
            tmp_host: None,
            image: None,
            container: None,
            limits: ResourceLimits::default(),
        }
    }

    /// The walls of `strict` with the host's network (a step a task says
    /// needs the network): `workspace_write`'s network, but every
    /// credential directory still covered, as `strict` covers them; only
    /// `/run` is shown again, for resolvers that point there.
    pub fn strict_with_network(workspace: &Path) -> Self {
        let mut walls = Self::for_workspace(SandboxProfile::Strict, workspace);
        let sockets: Vec<PathBuf> = daemon_socket_dirs(&walls.writable);
        walls.hidden.retain(|dir| !sockets.contains(dir));
        walls.profile = SandboxProfile::WorkspaceWrite;
        walls
    }

    /// Runs commands in `image`'s filesystem instead of the host's (builder
    /// style): what is written or hidden of the host no longer applies;
    /// placements are shown in the image, the network is as the profile
    /// says.
    pub fn in_image(mut self, image: ImageRoot) -> Self {
        self.image = Some(image);
        self
    }

    /// Runs commands in the trial's container instead (builder style): the
    /// container's filesystem, users and network are the walls; placements
    /// the container was not started with are copied in and out.
    pub fn in_container(mut self, container: ContainerRoot) -> Self {
        self.container = Some(container);
        self
    }

    /// Adds paths to hide (builder style).
    pub fn hiding<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.hidden.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Adds directories to seal (builder style).
    pub fn sealing<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.sealed.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Lets commands read `dir` (inside a sealed directory too) but not
    /// write it: Landlock grants it as a writable path, which is what lets
    /// it through the seal, and a read-only bind mount refuses the writes.
    /// For files tack writes for the agent to read (offloaded results).
    pub fn exposing_read_only(mut self, dir: &Path) -> Self {
        if self.is_confined() {
            self.writable.push(dir.to_path_buf());
            self.read_only.push(dir.to_path_buf());
        }
        self
    }

    /// Narrows the network to TCP `connect` to `ports` (on any address:
    /// Landlock rules name ports, not hosts) and nothing else: no TCP
    /// `bind`, no UDP (so no DNS), no raw or other sockets but AF_UNIX, and
    /// `/run` hidden as under `strict` (daemon sockets would be a way
    /// round). The command keeps the host's network namespace, where tack's
    /// recording proxy listens on loopback. The profile keeps its name:
    /// `strict` still means no network of the command's own, only tack's
    /// port. Needs Landlock ABI 4 (Linux 6.7); where it is missing, running
    /// fails ([`crate::check_confinement`]) rather than with the full
    /// network. Under `off` nothing can enforce it, so running fails too.
    pub fn allowing_tcp_connect_only<I>(mut self, ports: I) -> Self
    where
        I: IntoIterator<Item = u16>,
    {
        let mut ports: Vec<u16> = ports.into_iter().collect();
        ports.sort_unstable();
        ports.dedup();
        self.tcp_connect = Some(ports);
        for dir in daemon_socket_dirs(&self.writable) {
            if !self.hidden.contains(&dir) {
                self.hidden.push(dir);
            }
        }
        self
    }

    /// Shows the host directory `host_dir` at the absolute path `at` (say
    /// `/app`, `/tests`, `/logs/verifier`), writable or read-only, inside
    /// the command's mount namespace only: nothing is created on the host,
    /// and a host directory already at `at` is shadowed. The command may
    /// start in a placed path ([`crate::CommandSpec::cwd`] `= /app`).
    ///
    /// The command then runs in a root of its own, a tmpfs holding binds of
    /// the host's top-level entries and the placed directories; otherwise
    /// confined as before. `at` must not be under `/proc`, `/dev` or
    /// `/sys`, under a host symlink, or nested in another placement;
    /// running fails before anything starts if it is. Under `off` nothing
    /// can place a path: running fails ([`crate::check_confinement`]).
    pub fn placing(mut self, host_dir: &Path, at: &Path, writable: bool) -> Self {
        self.placed.push(Placement {
            host: host_dir.to_path_buf(),
            at: at.to_path_buf(),
            writable,
        });
        self
    }

    /// Shows the command's temporary directory at `at`: `host`, or a
    /// fresh private one (see [`tmp_at`](Self::tmp_at)).
    pub fn with_tmp_at(mut self, at: &Path, host: Option<&Path>) -> Self {
        self.tmp_at = Some(at.to_path_buf());
        self.tmp_host = host.map(Path::to_path_buf);
        self
    }

    /// `path` as the host names it: beneath a placement, the same place in
    /// its host directory; anywhere else, unchanged.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        self.placed
            .iter()
            .find_map(|p| path.strip_prefix(&p.at).ok().map(|rest| p.host.join(rest)))
            .unwrap_or_else(|| path.to_path_buf())
    }

    /// `host` as the command sees it: beneath a placed host directory, the
    /// same place under where it is shown (the workspace placed at `/app`
    /// is `/app` to the command); anywhere else, unchanged. The inverse of
    /// [`host_path`](Self::host_path).
    pub fn guest_path(&self, host: &Path) -> PathBuf {
        self.placed
            .iter()
            .find_map(|p| host.strip_prefix(&p.host).ok().map(|rest| p.at.join(rest)))
            .unwrap_or_else(|| host.to_path_buf())
    }

    /// Whether `host` is under where the tmp directory is shown
    /// ([`tmp_at`](Self::tmp_at)), and so out of the command's sight.
    pub(crate) fn covered_by_tmp(&self, host: &Path) -> bool {
        self.tmp_at.as_ref().is_some_and(|at| host.starts_with(at))
    }

    /// Whether the command gets a network namespace of its own (with only a
    /// down loopback): `strict`, unless narrowed to tack's ports.
    pub fn own_network_namespace(&self) -> bool {
        self.profile == SandboxProfile::Strict && self.tcp_connect.is_none()
    }

    /// Whether it asks for something only kernel confinement can do.
    pub(crate) fn asks_confinement(&self) -> bool {
        self.tcp_connect.is_some()
            || !self.placed.is_empty()
            || self.tmp_at.is_some()
            || self.image.is_some()
    }

    /// Whether tack's kernel confinement applies (a container's commands
    /// are confined by the container instead).
    pub fn is_confined(&self) -> bool {
        self.profile != SandboxProfile::Off && self.container.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_with_network_keeps_strict_covers_but_the_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let strict = Confinement::for_profile(SandboxProfile::Strict, dir.path());
        let online = Confinement::strict_with_network(dir.path());
        assert_eq!(online.profile, SandboxProfile::WorkspaceWrite);
        let sockets = daemon_socket_dirs(&[dir.path().to_path_buf()]);
        let expected: Vec<&PathBuf> = strict
            .hidden
            .iter()
            .filter(|d| !sockets.contains(d))
            .collect();
        assert_eq!(online.hidden.iter().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn strict_makes_an_existing_git_dir_read_only() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Confinement::strict(dir.path()).read_only.is_empty());
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let strict = Confinement::strict(dir.path());
        assert_eq!(strict.read_only, vec![dir.path().join(".git")]);
        assert_eq!(strict.writable, vec![dir.path().to_path_buf()]);
        assert_eq!(
            strict.hidden.contains(&PathBuf::from("/run")),
            Path::new("/run").is_dir()
        );
        assert!(Confinement::workspace_write(dir.path()).hidden.is_empty());
        assert_eq!(strict.profile, SandboxProfile::Strict);
    }

    #[test]
    fn tcp_ports_keep_the_host_network_and_hide_run_once() {
        let dir = tempfile::tempdir().unwrap();
        let strict = Confinement::strict(dir.path());
        assert!(strict.own_network_namespace());
        let narrowed = strict.clone().allowing_tcp_connect_only([8080, 80, 8080]);
        assert!(!narrowed.own_network_namespace());
        assert_eq!(narrowed.tcp_connect, Some(vec![80, 8080]));
        assert_eq!(narrowed.hidden, strict.hidden, "no second /run cover");
        let write = Confinement::workspace_write(dir.path()).allowing_tcp_connect_only([1]);
        assert_eq!(
            write.hidden.contains(&PathBuf::from("/run")),
            Path::new("/run").is_dir() && !Path::new("/run").is_symlink()
        );
        assert_eq!(write.profile, SandboxProfile::WorkspaceWrite);
    }

    #[test]
    fn host_paths_follow_placements() {
        let ws = Path::new("/w");
        let placed = Confinement::strict(ws).placing(Path::new("/h/app"), Path::new("/app"), true);
        assert_eq!(placed.host_path(Path::new("/app")), Path::new("/h/app"));
        assert_eq!(
            placed.host_path(Path::new("/app/src")),
            Path::new("/h/app/src")
        );
        assert_eq!(placed.host_path(Path::new("/apple")), Path::new("/apple"));
        assert_eq!(placed.host_path(ws), ws);
        assert_eq!(
            placed.guest_path(Path::new("/h/app/src")),
            Path::new("/app/src")
        );
        assert_eq!(
            placed.guest_path(Path::new("/h/apple")),
            Path::new("/h/apple")
        );
    }

    #[test]
    fn off_is_unconfined() {
        assert!(!Confinement::off().is_confined());
        let off = Confinement::for_profile(SandboxProfile::Off, Path::new("/x"));
        assert!(off.writable.is_empty());
    }
}
