//! Reading one file that something untrusted left (a confined command's
//! reward file, a task's or an agent's file beneath a root) without being
//! led elsewhere by it: no link followed out, no FIFO waited on.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::error::io_error;
use super::{FileAccessError, WorkspaceFiles};
use crate::Confinement;

/// Reads at most `limit` bytes of `path`, a file a confined command wrote
/// (a check's reward): as a regular file only, without following a link
/// (which would be resolved on the host, outside the command's walls) and
/// without waiting on a FIFO. `Ok(None)` when there is no such file;
/// `Err(reason)` says what is wrong with it, as a clause ("is a link").
pub fn read_left_file(path: &Path, limit: u64) -> Result<Option<String>, String> {
    let opened = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err("is a link, which is not followed".to_string()),
        Err(errno) => return Err(format!("cannot be read: {}", io::Error::from(errno))),
    };
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".to_string());
    }
    let mut bytes = Vec::new();
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Reads at most `limit` bytes of `relative`, a file beneath `root` that a
/// task or an agent controls (a workspace's `AGENTS.md`, a skill), as the
/// file tools read: a link that stays beneath `root` is followed (AGENTS.md
/// pointing at CLAUDE.md), one that leads out is refused, and only a
/// regular file is read (a FIFO would block). `Ok(None)` when there is no
/// such file; the bytes are cut at `limit`.
pub fn read_beneath(
    root: &Path,
    relative: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>, FileAccessError> {
    let files = WorkspaceFiles::new(root, &Confinement::off())?;
    let file = match files.open(relative) {
        Ok(file) => file,
        Err(FileAccessError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let mut bytes = Vec::new();
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|source| io_error(relative, source))?;
    Ok(Some(bytes))
}
