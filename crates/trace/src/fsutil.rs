use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::TraceError;

/// Where a file is written before it is renamed into place. Readers glob
/// `*.parquet`, which never matches this name.
pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

/// Writes `bytes` to `path` so that readers see the old file or the whole new
/// one, never a torn one: temporary file, fsync, rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), TraceError> {
    let temporary = temporary_path(path);
    let mut file = create_fresh(&temporary).map_err(|e| TraceError::io(&temporary, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| TraceError::io(&temporary, e))?;
    fs::rename(&temporary, path).map_err(|e| TraceError::io(path, e))
}

/// A new, empty file at `path` for writing, whatever was there: a run may
/// come from elsewhere, and a link left at a temporary's name (to
/// `/etc/shadow`, or to a path that does not exist yet) would otherwise
/// have tack write the file it leads to. What is at the name is removed
/// (a link itself, not what it leads to), and the file is made anew
/// (`O_EXCL`, which follows no link).
pub(crate) fn create_fresh(path: &Path) -> io::Result<File> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Opens `path`, a file of a run, for reading. A run may come from
/// elsewhere (a bucket, a colleague): a link in it is not followed (to
/// `~/.ssh/id_rsa`, or `/dev/zero`, which would fill memory), and a named
/// pipe neither blocks the open nor is read (it would hang the reader).
pub(crate) fn open_run_file(path: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link, which tack does not follow in a run: a run's files are \
                 regular files",
            ));
        }
        opened => opened?,
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file (a pipe, a socket or a device): a run's files are regular \
             files",
        ));
    }
    Ok(file)
}

/// The text of `path`, a small file of a run (its writer's claim, a
/// compaction plan), opened as [`open_run_file`] opens; more than `limit`
/// bytes is an error.
pub(crate) fn read_run_text(path: &Path, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    open_run_file(path)?
        .take(limit.saturating_add(1))
        .read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("is larger than {limit} bytes, more than tack writes there"),
        ));
    }
    Ok(text)
}

/// Checks that the run's own directories (its tables and journals) are
/// directories, not links: a run received from elsewhere whose `journal/`
/// or `spans/` led to another place would have tack read, copy (merge) and
/// remove (recovery) files there.
pub(crate) fn check_run_dirs(run_dir: &Path) -> Result<(), TraceError> {
    use crate::schema::{JOURNAL_DIR, MESSAGES_DIR, SPANS_DIR, TRIALS_DIR};
    for name in [TRIALS_DIR, SPANS_DIR, MESSAGES_DIR, JOURNAL_DIR] {
        let dir = run_dir.join(name);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if !meta.is_dir() => {
                return Err(TraceError::Format {
                    path: dir,
                    message: "is a link or a file, not the run's own directory: refused, nothing \
                              read or removed through it (a run received from elsewhere?)"
                        .to_string(),
                });
            }
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(TraceError::io(&dir, error)),
        }
    }
    Ok(())
}
