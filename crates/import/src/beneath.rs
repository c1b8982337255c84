//! The files of an input that came from elsewhere (a Harbor task, a job
//! directory), read beneath its directory as the file tools read a
//! workspace (`tack_sandbox::read_beneath`: a link within followed, one
//! out of it refused, only a regular file read), and refused past a size.

use std::path::Path;

/// Why a file beneath an input's directory was not read.
pub(crate) enum NotRead {
    Missing,
    /// Larger than the limit it was read with.
    TooBig,
    /// Reached through a path or link leading out of the directory.
    Outside,
    /// Any other failure (a FIFO, a directory, an I/O error), said.
    Unreadable(String),
}

/// The bytes of `relative` beneath `root`, at most `limit` of them.
pub(crate) fn read_within(root: &Path, relative: &str, limit: u64) -> Result<Vec<u8>, NotRead> {
    match tack_sandbox::read_beneath(root, relative, limit.saturating_add(1)) {
        Ok(Some(bytes)) if bytes.len() as u64 > limit => Err(NotRead::TooBig),
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(NotRead::Missing),
        Err(error) if error.is_denied() => Err(NotRead::Outside),
        Err(error) => Err(NotRead::Unreadable(error.to_string())),
    }
}
