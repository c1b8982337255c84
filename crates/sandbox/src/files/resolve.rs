//! Opening directories beneath the workspace root with the kernel's help,
//! and telling where an opened directory really is.
//!
//! Every lookup is relative to a descriptor of the root, never a path
//! string, so a rename or a symlink swapped in between a check and the use
//! cannot redirect it. `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//! does the work where the kernel has it (Linux 5.6+). Where it does not
//! (`ENOSYS`, or `EPERM` from a container's seccomp profile older than the
//! call), a walk does the same in user space: one component at a time,
//! `O_NOFOLLOW`, following a symlink only by reading it and resolving its
//! text against the directories already opened, and refusing one that
//! leads out of the root. `TACK_SANDBOX_DISABLE=openat2` forces the walk,
//! so it can be tested on a kernel that has openat2.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::probe::DISABLE_ENV;

/// Symlinks followed in one lookup before giving up, as the kernel does.
pub(super) const MAX_SYMLINKS: usize = 40;
/// Directories climbed looking for the root before calling a directory
/// outside it; far deeper than any real tree.
const MAX_DEPTH: usize = 4096;
/// `openat2` answers `EAGAIN` when a rename or mount raced the lookup.
const RACE_RETRIES: usize = 8;

const DIR_PATH: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

/// A file's identity: device and inode, compared instead of path strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    pub fn of(fd: impl AsFd) -> io::Result<FileId> {
        Ok(Self::from_stat(&rustix::fs::fstat(fd)?))
    }

    // The stat field types differ between targets (u64 on x86_64, narrower
    // elsewhere), so the conversion is a no-op only on some.
    #[allow(clippy::useless_conversion)]
    pub fn from_stat(stat: &rustix::fs::Stat) -> FileId {
        FileId {
            dev: u64::from(stat.st_dev),
            ino: u64::from(stat.st_ino),
        }
    }

    pub fn of_path(path: &Path) -> io::Result<FileId> {
        let meta = std::fs::metadata(path)?;
        Ok(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// The workspace root, held open.
#[derive(Debug)]
pub(super) struct Root {
    fd: OwnedFd,
    id: FileId,
    /// The workspace as the caller named it (made absolute) and its real,
    /// symlink-free path: an absolute path the model gives may use either.
    given: PathBuf,
    real: PathBuf,
    /// Where commands are shown the workspace (a placement at `/app`): an
    /// absolute path the model gives may use it too.
    aliases: Vec<PathBuf>,
    openat2: bool,
}

impl Root {
    pub fn open(workspace: &Path) -> io::Result<Root> {
        let given = std::path::absolute(workspace)?;
        let fd = rustix::fs::open(&given, DIR_PATH, Mode::empty())?;
        let id = FileId::of(&fd)?;
        let real = given.canonicalize()?;
        let openat2 = openat2_usable(&fd);
        Ok(Root {
            fd,
            id,
            given,
            real,
            aliases: Vec::new(),
            openat2,
        })
    }

    /// Also answers absolute paths beneath `alias`.
    pub fn with_alias(mut self, alias: PathBuf) -> Root {
        self.aliases.push(alias);
        self
    }

    pub fn real(&self) -> &Path {
        &self.real
    }

    /// Whether `workspace` is the path this root was opened as.
    pub fn is_named(&self, workspace: &Path) -> bool {
        std::path::absolute(workspace).is_ok_and(|given| given == self.given)
    }

    #[cfg(test)]
    pub fn without_openat2(mut self) -> Root {
        self.openat2 = false;
        self
    }

    /// `path` relative to the root, if it is absolute and names a place
    /// beneath it (spelled from the given or the real root path).
    pub fn relative(&self, absolute: &Path) -> Option<PathBuf> {
        [&self.given, &self.real]
            .into_iter()
            .chain(&self.aliases)
            .find_map(|base| absolute.strip_prefix(base).ok())
            .map(Path::to_path_buf)
    }

    /// Opens the directory `rel` (relative to the root) as an `O_PATH`
    /// descriptor. `EXDEV` means the path leads out of the root.
    pub fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        if self.openat2 {
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            for _ in 0..RACE_RETRIES {
                match rustix::fs::openat2(&self.fd, rel, DIR_PATH, Mode::empty(), resolve) {
                    Err(Errno::AGAIN) => continue,
                    // RESOLVE_BENEATH refuses every absolute symlink, even
                    // one naming a place inside the workspace: the walk
                    // follows those and refuses the rest.
                    Err(Errno::XDEV) => return self.walk(rel),
                    other => return other.map_err(io::Error::from),
                }
            }
        }
        self.walk(rel)
    }

    /// The user-space lookup: every directory on the way is held open, so
    /// `..` returns to the directory it came from and cannot pass the root.
    fn walk(&self, rel: &Path) -> io::Result<OwnedFd> {
        let mut opened: Vec<OwnedFd> = Vec::new();
        let mut steps = steps(rel);
        let mut symlinks = 0;
        while let Some(step) = steps.pop_front() {
            let Some(name) = step else {
                if opened.pop().is_none() {
                    return Err(Errno::XDEV.into());
                }
                continue;
            };
            let here = opened.last().unwrap_or(&self.fd);
            let stat = rustix::fs::statat(here, &name, AtFlags::SYMLINK_NOFOLLOW)?;
            if FileType::from_raw_mode(stat.st_mode) != FileType::Symlink {
                // O_NOFOLLOW: swapped for a symlink since the stat, it fails.
                let flags = DIR_PATH | OFlags::NOFOLLOW;
                opened.push(rustix::fs::openat(here, &name, flags, Mode::empty())?);
                continue;
            }
            symlinks += 1;
            if symlinks > MAX_SYMLINKS {
                return Err(Errno::LOOP.into());
            }
            let target = PathBuf::from(OsString::from_vec(
                rustix::fs::readlinkat(here, &name, Vec::new())?.into_bytes(),
            ));
            if target.is_absolute() {
                let inside = self.relative(&target).ok_or(Errno::XDEV)?;
                opened.clear();
                prepend(&mut steps, self::steps(&inside));
            } else {
                prepend(&mut steps, self::steps(&target));
            }
        }
        match opened.pop() {
            Some(fd) => Ok(fd),
            None => Ok(rustix::fs::openat(&self.fd, ".", DIR_PATH, Mode::empty())?),
        }
    }

    /// The identities of `dir` and every directory above it up to and
    /// including the root; `EXDEV` if climbing never meets the root (the
    /// directory is not beneath it, or was moved out meanwhile).
    pub fn ancestors(&self, dir: &OwnedFd) -> io::Result<Vec<FileId>> {
        let mut ids = Vec::new();
        let mut current = rustix::fs::openat(dir, ".", DIR_PATH, Mode::empty())?;
        for _ in 0..MAX_DEPTH {
            let id = FileId::of(&current)?;
            ids.push(id);
            if id == self.id {
                return Ok(ids);
            }
            let parent = rustix::fs::openat(&current, "..", DIR_PATH, Mode::empty())?;
            if FileId::of(&parent)? == id {
                break; // "/" is its own parent
            }
            current = parent;
        }
        Err(Errno::XDEV.into())
    }

    /// The real path of an opened file or directory beneath the root. The
    /// kernel's name for the descriptor is used only after checking that it
    /// names this very file and lies beneath the root.
    pub fn real_path(&self, fd: &OwnedFd) -> io::Result<PathBuf> {
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let path = std::fs::read_link(&link).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot be located ({link}: {e}; is /proc mounted?)"),
            )
        })?;
        let meta = std::fs::symlink_metadata(&path)?;
        let same = FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        } == FileId::of(fd)?;
        if same && path.starts_with(&self.real) {
            Ok(path)
        } else {
            Err(io::Error::other("moved while being opened; try again"))
        }
    }
}

/// Whether lookups use `openat2`: asked once per process (the file tools
/// open a root per call), unless `TACK_SANDBOX_DISABLE` names it.
fn openat2_usable(root: &OwnedFd) -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| {
        let forced_off = std::env::var(DISABLE_ENV)
            .unwrap_or_default()
            .split(',')
            .any(|name| name.trim().eq_ignore_ascii_case("openat2"));
        !forced_off && openat2_works(root)
    })
}

/// Whether the kernel has `openat2` for us. Kernels before 5.6 answer
/// `ENOSYS`; container seccomp profiles written before the call existed
/// answer `ENOSYS` or `EPERM`.
fn openat2_works(root: &OwnedFd) -> bool {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    !matches!(
        rustix::fs::openat2(root, ".", DIR_PATH, Mode::empty(), resolve),
        Err(Errno::NOSYS | Errno::PERM)
    )
}

/// A path as lookup steps: `Some(name)` descends, `None` climbs (`..`).
/// `.` and a leading `/` add nothing (callers make paths relative first).
fn steps(path: &Path) -> VecDeque<Option<OsString>> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(Some(name.to_os_string())),
            Component::ParentDir => Some(None),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn prepend(steps: &mut VecDeque<Option<OsString>>, front: VecDeque<Option<OsString>>) {
    for step in front.into_iter().rev() {
        steps.push_front(step);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn roots(ws: &Path) -> [Root; 2] {
        [
            Root::open(ws).unwrap(),
            Root::open(ws).unwrap().without_openat2(),
        ]
    }

    fn errno(result: io::Result<OwnedFd>) -> Option<i32> {
        result.err().and_then(|e| e.raw_os_error())
    }

    #[test]
    fn both_lookups_stay_beneath_the_root() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        symlink(outside.path(), ws.join("out")).unwrap();
        symlink("a/b", ws.join("rel")).unwrap();
        symlink(ws.join("a"), ws.join("abs")).unwrap();
        symlink("../..", ws.join("a/b/up")).unwrap();
        symlink("loop", ws.join("loop")).unwrap();
        let b = FileId::of_path(&ws.join("a/b")).unwrap();
        for root in roots(ws) {
            let id = |rel: &str| FileId::of(root.open_dir(Path::new(rel)).unwrap()).unwrap();
            assert_eq!(id("a/b"), b);
            assert_eq!(id("rel"), b);
            assert_eq!(id("abs/b"), b);
            assert_eq!(
                id("rel/../b"),
                b,
                "`..` after a symlink climbs from its target"
            );
            assert_eq!(id("a/b/up/a/b"), b);
            assert_eq!(id(""), root.id);
            let xdev = Some(libc::EXDEV);
            assert_eq!(errno(root.open_dir(Path::new(".."))), xdev);
            assert_eq!(errno(root.open_dir(Path::new("a/../.."))), xdev);
            assert_eq!(errno(root.open_dir(Path::new("out"))), xdev);
            assert_eq!(errno(root.open_dir(Path::new("a/b/up/.."))), xdev);
            assert_eq!(errno(root.open_dir(Path::new("loop"))), Some(libc::ELOOP));
            assert_eq!(errno(root.open_dir(Path::new("nope"))), Some(libc::ENOENT));
        }
    }

    #[test]
    fn ancestors_end_at_the_root_or_say_outside() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let b = root.open_dir(Path::new("a/b")).unwrap();
        let chain = root.ancestors(&b).unwrap();
        assert_eq!(chain.len(), 3);
        assert_eq!(chain.last(), Some(&root.id));
        let elsewhere = rustix::fs::open(outside.path(), DIR_PATH, Mode::empty()).unwrap();
        let error = root.ancestors(&elsewhere).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EXDEV));
        let real = root.real_path(&b).unwrap();
        assert_eq!(real, dir.path().canonicalize().unwrap().join("a/b"));
    }
}
