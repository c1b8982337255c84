//! Why a confined command could not be prepared: everything that goes
//! wrong in tack's process, before the fork ([`crate::SandboxError::Setup`]).

use std::path::PathBuf;

use crate::landlock::LandlockError;
use crate::mounts::OLD_ROOT;
use crate::seccomp::SeccompError;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot create the private tmp directory: {0}")]
    TmpDir(#[source] std::io::Error),
    #[error(
        "{} is not a directory of this user's; remove it (or set TMPDIR to a \
         directory of your own) so tack can make its private tmp directories there",
        .0.display()
    )]
    TmpRoot(PathBuf),
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writable path {}: {source}", path.display())]
    WritablePath {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{}` is the root of the filesystem: as a workspace, every file on the machine would be \
         writable; give the project's directory",
        .0.display()
    )]
    RootWritable(PathBuf),
    #[error(
        "`{}` holds {}: as a workspace, other programs' sockets there (a tmux server's) and other \
         trials' files would be the command's; give a directory of its own (e.g. `mkdir {}`)",
        path.display(),
        holds.display(),
        // `/var/tmp/.` given: `/var/tmp/work`.
        path.components().collect::<PathBuf>().join("work").display()
    )]
    WritableHoldsOthers { path: PathBuf, holds: PathBuf },
    #[error("the command's directory {}: {source}", path.display())]
    Cwd {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Each confined command is given a fresh, empty /dev/shm, which would
    /// cover a writable directory below the host's.
    #[error(
        "{} is below /dev/shm, which every confined command is given fresh and empty; \
         keep workspaces and TMPDIR (where tack makes trial workspaces and private tmp \
         directories) outside /dev/shm",
        .0.display()
    )]
    BelowPrivateShm(PathBuf),
    #[error("hidden path {} is not a directory", .0.display())]
    HiddenNotADirectory(PathBuf),
    /// The kernel takes paths as C strings.
    #[error("{} contains a NUL byte", .0.display())]
    NulByte(PathBuf),
    #[error("cannot create a pipe: {0}")]
    Pipe(#[source] std::io::Error),
    #[error("cannot create a pids cgroup: {0}")]
    PidsCgroup(#[source] std::io::Error),
    #[error("cgroup.procs: {0}")]
    CgroupProcs(#[source] std::io::Error),
    /// The profile check lets no confined command this far without it.
    #[error("Landlock is not available")]
    NoLandlock,
    #[error(transparent)]
    Landlock(#[from] LandlockError),
    #[error(transparent)]
    Seccomp(#[from] &'static SeccompError),
    #[error("cannot place a directory at {}: {reason}", at.display())]
    Place {
        at: PathBuf,
        #[source]
        reason: PlaceError,
    },
    #[error(
        "the host has an entry {OLD_ROOT}, the name tack needs for the old root while it builds \
         a command's own root; remove or rename it"
    )]
    OldRootTaken,
    /// A bug in the sandbox: each plan is for one command.
    #[error("the confinement plan was already used")]
    PlanUsed,
    /// An image's filesystem, or the trial's layer over it, cannot be used.
    #[error("the image filesystem {}: {source}", path.display())]
    Image {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A trial's sandbox (its init) could not start or stopped serving.
    #[error("{0}")]
    Session(String),
    #[error("spawn_service was called outside a Tokio runtime; call it from async code")]
    NoRuntime,
    /// Raised in the spawner process; only its text crossed over.
    #[error("{0}")]
    InSpawner(String),
}

/// Why a directory cannot be placed where a confinement asks.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error("it must be an absolute path below / without `.` or `..`, such as /app")]
    NotPlain,
    #[error("{0} belongs to the kernel")]
    KernelDirectory(&'static str),
    #[error(
        "{} is a symlink or a file on the host; place it at the path that symlink points to",
        .0.display()
    )]
    NotADirectoryOnHost(PathBuf),
    #[error(
        "its host directory {} does not exist or is not a directory; create it first",
        .0.display()
    )]
    NoHostDirectory(PathBuf),
    #[error(
        "{} holds a sealed directory (other trials' workspaces); place a directory inside it \
         instead",
        .0.display()
    )]
    HoldsSealed(PathBuf),
    #[error("it overlaps the placement at {}; place the directories at separate paths", .0.display())]
    Overlaps(PathBuf),
}

impl SetupError {
    pub(crate) fn place(at: &std::path::Path, reason: PlaceError) -> SetupError {
        SetupError::Place {
            at: at.to_path_buf(),
            reason,
        }
    }
}

/// `path` for the kernel.
pub(crate) fn c_path(path: &std::path::Path) -> Result<std::ffi::CString, SetupError> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SetupError::NulByte(path.to_path_buf()))
}
