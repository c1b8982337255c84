//! The workspace as the agent's file tools (read, write, replace, list,
//! grep) may touch it: exactly what the sandbox lets `bash` touch. The
//! tools run inside tack's own process, outside the mounts and Landlock
//! that confine `bash`, so the same rules are enforced here on descriptors:
//!
//! - Beneath the workspace only: lookups go through `openat2` with
//!   `RESOLVE_BENEATH` from a descriptor of the root (see `resolve`), so
//!   `..`, absolute paths elsewhere and symlinks pointing out are refused
//!   by the kernel, and nothing can be swapped in between check and use.
//! - The confinement's read-only paths (`.git`) are unwritable, and its
//!   hidden paths unreadable, judged by the device and inode of the opened
//!   directory and each one above it, never by the string the model gave:
//!   a symlink to `.git` inside the workspace does not get around it.
//! - A file with more than one hard link is never written: it shares its
//!   content with another path, possibly outside the workspace.
//!
//! Under the `off` profile bash is unconfined, so there are no read-only or
//! hidden paths here either; staying beneath the workspace is the file
//! tools' own contract and holds for every profile.

mod error;
mod resolve;
mod untrusted;

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::Confinement;
pub use error::FileAccessError;
use error::{denied, hard_link, invalid, io_error, outside};
use resolve::{FileId, MAX_SYMLINKS, Root};
pub use untrusted::{read_beneath, read_left_file};

/// The workspace as the file tools may touch it: exactly what the sandbox
/// lets `bash` touch. Paths are relative to the workspace, or absolute and
/// inside it (or inside where the confinement places it: `/app/x`).
#[derive(Debug)]
pub struct WorkspaceFiles {
    root: Arc<Root>,
    read_only: Vec<Protected>,
    hidden: Vec<Protected>,
    /// In an image, the owner (the workspace's) of what the tools create:
    /// tack's own ids are no user of the image's, which could not write it.
    adopt: Option<(u32, u32)>,
}

/// A read-only or hidden path of the confinement, as it was when
/// [`WorkspaceFiles::new`] ran (the mounts protect it for `bash` from then
/// on, so it cannot be swapped for another directory).
#[derive(Debug)]
struct Protected {
    id: FileId,
    real: PathBuf,
    /// How messages name it: relative to the workspace when inside it.
    name: String,
}

/// A trial's workspace root, held open from its file tools' first call on:
/// each call then resolves beneath the same directory instead of opening
/// the root and resolving its path again (under `strict` the workspace is
/// a mount point for `bash`, which cannot move it). Clones share it.
#[derive(Debug, Default, Clone)]
pub struct HeldWorkspace(Arc<OnceLock<Arc<Root>>>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

impl WorkspaceFiles {
    /// Holds the workspace root open and notes the confinement's read-only
    /// and hidden paths (those that exist, as the mounts do).
    pub fn new(workspace: &Path, confinement: &Confinement) -> Result<Self, FileAccessError> {
        Self::held(&HeldWorkspace::default(), workspace, confinement)
    }

    /// [`new`](Self::new) with the root `held` keeps open for `workspace`
    /// (opened now if it holds none); the read-only and hidden paths are
    /// noted afresh, as by `new`.
    pub fn held(
        held: &HeldWorkspace,
        workspace: &Path,
        confinement: &Confinement,
    ) -> Result<Self, FileAccessError> {
        let root = match held.0.get() {
            Some(root) if root.is_named(workspace) => root.clone(),
            _ => {
                let root = Arc::new(open_root(workspace, confinement)?);
                held.0.get_or_init(|| root.clone());
                root
            }
        };
        let (read_only, hidden) = if confinement.is_confined() {
            (
                protected(&root, &confinement.read_only),
                protected(&root, &confinement.hidden),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let adopt = match &confinement.image {
            Some(_) => {
                use std::os::unix::fs::MetadataExt;
                let meta =
                    std::fs::metadata(root.real()).map_err(|source| FileAccessError::Io {
                        path: workspace.display().to_string(),
                        source,
                    })?;
                Some((meta.uid(), meta.gid()))
            }
            None => None,
        };
        Ok(WorkspaceFiles {
            root,
            read_only,
            hidden,
            adopt,
        })
    }

    /// The workspace's real, symlink-free path (what
    /// [`resolve_for_read`](Self::resolve_for_read) answers beneath).
    pub fn root(&self) -> &Path {
        self.root.real()
    }

    /// The content of a regular file.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, FileAccessError> {
        let (file, stat) = self.open_regular(path)?;
        // Sized by the open's own fstat: `File::read_to_end` would ask the
        // size again (statx and lseek) before reading.
        let size = usize::try_from(stat.st_size).unwrap_or(0);
        let mut bytes = Vec::with_capacity(size.saturating_add(1));
        file.take(u64::MAX)
            .read_to_end(&mut bytes)
            .map_err(|source| io_error(path, source))?;
        Ok(bytes)
    }

    /// A regular file opened for reading, after the same checks as
    /// [`read`](Self::read): for tools that stream (grep).
    pub fn open(&self, path: &str) -> Result<File, FileAccessError> {
        self.open_regular(path).map(|(file, _)| file)
    }

    fn open_regular(&self, path: &str) -> Result<(File, rustix::fs::Stat), FileAccessError> {
        // O_NONBLOCK keeps a FIFO from blocking the open; regular files,
        // the only kind returned, ignore it.
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let (_dir, fd) = self.open_entry(path, Access::Read, |dir, name| {
            rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, Mode::empty())
        })?;
        let fd = fd.ok_or_else(|| io_error(path, Errno::ISDIR.into()))?;
        let stat = fstat(path, &fd)?;
        self.refuse(path, &[FileId::from_stat(&stat)], Access::Read)?;
        regular_file(path, &stat)?;
        Ok((File::from(fd), stat))
    }

    /// Replaces the content of a file, or creates it (and any missing
    /// directories above it, beneath the workspace).
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), FileAccessError> {
        let (_dir, fd) = self.open_entry(path, Access::Write, open_for_write)?;
        let fd = fd.ok_or_else(|| io_error(path, Errno::ISDIR.into()))?;
        // Everything is checked on the open descriptor before the first
        // change: it was opened without O_TRUNC for that.
        let stat = fstat(path, &fd)?;
        regular_file(path, &stat)?;
        self.refuse(path, &[FileId::from_stat(&stat)], Access::Write)?;
        if stat.st_nlink > 1 {
            return Err(hard_link(path, stat.st_nlink.saturating_sub(1)));
        }
        if let Some((uid, gid)) = self.adopt
            && stat.st_uid < crate::IMAGE_ID_BASE
        {
            rustix::fs::fchown(
                &fd,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(|errno| io_error(path, errno.into()))?;
        }
        let mut file = File::from(fd);
        file.set_len(0)
            .and_then(|()| file.write_all(bytes))
            .map_err(|source| io_error(path, source))
    }

    /// For walkers (list_files, grep): the real path of an existing file or
    /// directory beneath the workspace, after the same checks as
    /// [`read`](Self::read). Entries found below it can be filtered with
    /// [`is_readable`](Self::is_readable); reading one still goes through
    /// [`read`](Self::read) or [`open`](Self::open).
    pub fn resolve_for_read(&self, path: &str) -> Result<PathBuf, FileAccessError> {
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (dir, fd) = self.open_entry(path, Access::Read, |dir, name| {
            rustix::fs::openat(dir, name, flags, Mode::empty())
        })?;
        let target = match fd {
            Some(fd) => {
                let stat = fstat(path, &fd)?;
                if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
                    self.check_dir(path, &fd, Access::Read)?;
                } else {
                    self.refuse(path, &[FileId::from_stat(&stat)], Access::Read)?;
                }
                fd
            }
            None => dir,
        };
        self.root
            .real_path(&target)
            .map_err(|source| io_error(path, source))
    }

    /// Whether a real path (as a walker below [`resolve_for_read`]'s answer
    /// finds it) is beneath the workspace and not hidden: lets walkers skip
    /// hidden entries without opening them.
    ///
    /// [`resolve_for_read`]: Self::resolve_for_read
    pub fn is_readable(&self, real_path: &Path) -> bool {
        real_path.is_absolute()
            && !real_path
                .components()
                .any(|c| matches!(c, Component::ParentDir))
            && real_path.starts_with(self.root.real())
            && !self.hidden.iter().any(|h| real_path.starts_with(&h.real))
    }

    /// Opens the directory holding `path`'s last component and, with `open`,
    /// that component (which must not follow a symlink: a symlink there is
    /// read and its target looked up again beneath the root). The entry is
    /// `None` when the path ends in a directory (`.`, `..`). The directory
    /// is checked before `open` runs, so nothing is created in a read-only
    /// one.
    fn open_entry(
        &self,
        path: &str,
        access: Access,
        open: impl Fn(&OwnedFd, &OsStr) -> rustix::io::Result<OwnedFd>,
    ) -> Result<(OwnedFd, Option<OwnedFd>), FileAccessError> {
        let mut rel = self.relative(path)?;
        for _ in 0..=MAX_SYMLINKS {
            let (parent, name) = split(&rel);
            let dir = self.parent_dir(path, &parent, access)?;
            self.check_dir(path, &dir, access)?;
            let Some(name) = name else {
                return Ok((dir, None));
            };
            match open(&dir, &name) {
                // O_PATH | O_NOFOLLOW opens a symlink itself.
                Ok(fd) if !is_symlink(&fd) => return Ok((dir, Some(fd))),
                // O_NOFOLLOW on a symlink otherwise fails with ELOOP.
                Ok(_) | Err(Errno::LOOP) => {}
                Err(errno) => return Err(io_error(path, errno.into())),
            }
            let target = rustix::fs::readlinkat(&dir, &name, Vec::new())
                .map_err(|errno| io_error(path, errno.into()))?;
            rel = self.follow(path, &parent, target)?;
        }
        Err(io_error(path, Errno::LOOP.into()))
    }

    /// The directory `parent`, created (one level at a time, each checked)
    /// when writing and it is missing.
    fn parent_dir(
        &self,
        path: &str,
        parent: &Path,
        access: Access,
    ) -> Result<OwnedFd, FileAccessError> {
        match self.root.open_dir(parent) {
            Ok(dir) => Ok(dir),
            Err(e) if access == Access::Write && e.raw_os_error() == Some(libc::ENOENT) => {
                self.make_dirs(path, parent)
            }
            Err(e) => Err(self.lookup_error(path, e)),
        }
    }

    /// Creates the missing directories of `parent`, each one only after
    /// checking the directory it goes in. Nothing is created for a path that
    /// climbs (`..`) out of a directory that does not exist yet: the lookup
    /// could not be judged before creating it.
    fn make_dirs(&self, path: &str, parent: &Path) -> Result<OwnedFd, FileAccessError> {
        let components: Vec<Component> = parent.components().collect();
        let mut current = self
            .root
            .open_dir(Path::new(""))
            .map_err(|e| self.lookup_error(path, e))?;
        let mut prefix = PathBuf::new();
        let mut missing = components.len();
        for (index, component) in components.iter().enumerate() {
            prefix.push(component);
            match self.root.open_dir(&prefix) {
                Ok(dir) => current = dir,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    missing = index;
                    break;
                }
                Err(e) => return Err(self.lookup_error(path, e)),
            }
        }
        let mut names = Vec::new();
        for component in &components[missing..] {
            match component {
                Component::Normal(name) => names.push(*name),
                _ => return Err(io_error(path, Errno::NOENT.into())),
            }
        }
        for name in names {
            self.check_dir(path, &current, Access::Write)?;
            match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o777)) {
                Ok(()) => {
                    if let Some((uid, gid)) = self.adopt {
                        rustix::fs::chownat(
                            &current,
                            name,
                            Some(rustix::fs::Uid::from_raw(uid)),
                            Some(rustix::fs::Gid::from_raw(gid)),
                            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                        )
                        .map_err(|errno| io_error(path, errno.into()))?;
                    }
                }
                Err(Errno::EXIST) => {}
                Err(errno) => return Err(io_error(path, errno.into())),
            }
            // O_NOFOLLOW: whatever was there already must be a directory.
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            current = rustix::fs::openat(&current, name, flags, Mode::empty())
                .map_err(|errno| io_error(path, errno.into()))?;
        }
        Ok(current)
    }

    /// Refuses `access` to anything in or below the opened directory `dir`
    /// that the confinement protects, judged by where `dir` really is.
    fn check_dir(&self, path: &str, dir: &OwnedFd, access: Access) -> Result<(), FileAccessError> {
        // Nothing to refuse (an unconfined trial, a read where nothing is
        // hidden): no climb to the root.
        if self.hidden.is_empty() && (access == Access::Read || self.read_only.is_empty()) {
            return Ok(());
        }
        let ids = self
            .root
            .ancestors(dir)
            .map_err(|e| self.lookup_error(path, e))?;
        self.refuse(path, &ids, access)
    }

    /// Refuses `access` if any of `ids` (a file, or a directory and those
    /// above it) is hidden, or read-only when writing.
    fn refuse(&self, path: &str, ids: &[FileId], access: Access) -> Result<(), FileAccessError> {
        if self.hidden.iter().any(|h| ids.contains(&h.id)) {
            return Err(denied(
                path,
                format!(
                    "`{path}` is not visible in this sandbox; work with the other files of the \
                     workspace"
                ),
            ));
        }
        if access == Access::Write
            && let Some(protected) = self.read_only.iter().find(|p| ids.contains(&p.id))
        {
            let what = if protected.name == ".git" {
                "the .git directory is protected".to_string()
            } else {
                format!("`{}` is protected", protected.name)
            };
            return Err(denied(
                path,
                format!(
                    "`{path}` is read-only in this sandbox ({what}); change files of the project \
                     instead"
                ),
            ));
        }
        Ok(())
    }

    /// `path` relative to the workspace.
    fn relative(&self, path: &str) -> Result<PathBuf, FileAccessError> {
        if path.trim().is_empty() {
            return Err(invalid(path, "is empty"));
        }
        if path.contains('\0') {
            return Err(invalid(path, "contains a NUL byte"));
        }
        let requested = Path::new(path);
        if !requested.is_absolute() {
            return Ok(requested.to_path_buf());
        }
        self.root
            .relative(requested)
            .ok_or_else(|| outside(path, "an absolute path elsewhere"))
    }

    /// Where a symlink found in `parent` leads, relative to the workspace.
    fn follow(
        &self,
        path: &str,
        parent: &Path,
        target: CString,
    ) -> Result<PathBuf, FileAccessError> {
        let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
        if !target.is_absolute() {
            return Ok(parent.join(target));
        }
        self.root
            .relative(&target)
            .ok_or_else(|| outside(path, &format!("through a symlink to {}", target.display())))
    }

    fn lookup_error(&self, path: &str, error: io::Error) -> FileAccessError {
        if error.raw_os_error() == Some(libc::EXDEV) {
            outside(path, "it leads out through `..` or a symlink")
        } else {
            io_error(path, error)
        }
    }
}

/// The workspace root, also answering the paths the confinement shows it
/// at.
fn open_root(workspace: &Path, confinement: &Confinement) -> Result<Root, FileAccessError> {
    let mut root = Root::open(workspace).map_err(|source| FileAccessError::Io {
        path: workspace.display().to_string(),
        source,
    })?;
    // The workspace placed elsewhere for `bash` (`/app`) is that path to the
    // model, so the file tools take it too.
    for placement in &confinement.placed {
        if placement.host.canonicalize().ok().as_deref() == Some(root.real()) {
            root = root.with_alias(placement.at.clone());
        }
    }
    Ok(root)
}

fn protected(root: &Root, paths: &[PathBuf]) -> Vec<Protected> {
    paths
        .iter()
        .filter_map(|path| {
            let real = path.canonicalize().ok()?;
            let id = FileId::of_path(&real).ok()?;
            let name = match root.relative(&real) {
                Some(rel) => rel.display().to_string(),
                None => real.display().to_string(),
            };
            Some(Protected { id, real, name })
        })
        .collect()
}

/// Opens an existing file for writing, or creates it; never follows a
/// symlink in the last component and never truncates (that waits for the
/// checks on the descriptor).
fn open_for_write(dir: &OwnedFd, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    let flags =
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Err(Errno::NOENT) => {
            let create = flags | OFlags::CREATE | OFlags::EXCL;
            match rustix::fs::openat(dir, name, create, Mode::from_raw_mode(0o666)) {
                // Made by someone else meanwhile: open what is there now.
                Err(Errno::EXIST) => rustix::fs::openat(dir, name, flags, Mode::empty()),
                other => other,
            }
        }
        other => other,
    }
}

/// The directory part and the last component of a relative path; no last
/// component when the path ends in `.` or `..` (or is the root).
fn split(rel: &Path) -> (PathBuf, Option<OsString>) {
    match rel.components().next_back() {
        Some(Component::Normal(name)) => (
            rel.parent().map(Path::to_path_buf).unwrap_or_default(),
            Some(name.to_os_string()),
        ),
        _ => (rel.to_path_buf(), None),
    }
}

fn is_symlink(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

fn fstat(path: &str, fd: &OwnedFd) -> Result<rustix::fs::Stat, FileAccessError> {
    rustix::fs::fstat(fd).map_err(|errno| io_error(path, errno.into()))
}

fn regular_file(path: &str, stat: &rustix::fs::Stat) -> Result<(), FileAccessError> {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(()),
        FileType::Directory => Err(io_error(path, Errno::ISDIR.into())),
        _ => Err(invalid(
            path,
            "is not a regular file (a device, FIFO or socket); the file tools handle regular \
             files only",
        )),
    }
}
