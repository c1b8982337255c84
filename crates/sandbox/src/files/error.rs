//! Why the file tools could not touch a path: a sandbox denial, written for
//! the model with what to do instead, or an ordinary I/O error.

use std::io;

/// Why the file tools could not touch a path.
#[derive(Debug, thiserror::Error)]
pub enum FileAccessError {
    /// The sandbox refuses it (outside the workspace, read-only, hidden,
    /// hard link): a sandbox denial. `reason` is a whole sentence, written
    /// for the model, naming the path and what to do instead.
    #[error("{reason}")]
    Denied { path: String, reason: String },
    /// An ordinary I/O error (not found, is a directory, …).
    #[error("{}", describe(.path, .source))]
    Io { path: String, source: io::Error },
}

impl FileAccessError {
    /// Whether the sandbox refused it (as opposed to an ordinary error).
    pub fn is_denied(&self) -> bool {
        matches!(self, FileAccessError::Denied { .. })
    }
}

pub(super) fn denied(path: &str, reason: String) -> FileAccessError {
    FileAccessError::Denied {
        path: path.to_string(),
        reason,
    }
}

pub(super) fn outside(path: &str, how: &str) -> FileAccessError {
    denied(
        path,
        format!(
            "`{path}` is outside the workspace ({how}); the file tools work only beneath it: give \
             a path relative to the workspace"
        ),
    )
}

pub(super) fn hard_link(path: &str, others: impl std::fmt::Display) -> FileAccessError {
    denied(
        path,
        format!(
            "`{path}` is a hard link: its content is shared with {others} other path(s), possibly \
             outside the workspace, so the sandbox does not write it; to change it, replace it \
             with a copy first (`cp {path} {path}.new && mv {path}.new {path}`)"
        ),
    )
}

pub(super) fn io_error(path: &str, source: io::Error) -> FileAccessError {
    FileAccessError::Io {
        path: path.to_string(),
        source,
    }
}

pub(super) fn invalid(path: &str, what: &str) -> FileAccessError {
    io_error(path, io::Error::new(io::ErrorKind::InvalidInput, what))
}

/// The message of an ordinary error, saying what is wrong with the path.
fn describe(path: &str, error: &io::Error) -> String {
    let what = match error.raw_os_error() {
        Some(libc::ENOENT) => "does not exist".to_string(),
        Some(libc::EISDIR) => "is a directory, not a file".to_string(),
        Some(libc::ENOTDIR) => "has a part that is not a directory".to_string(),
        Some(libc::ELOOP) => "goes through too many symlinks".to_string(),
        Some(libc::EACCES) => "is not permitted by its file permissions".to_string(),
        Some(_) => format!("could not be accessed: {error}"),
        None => error.to_string(),
    };
    if path.trim().is_empty() {
        format!("the path {what}; give a path relative to the workspace")
    } else {
        format!("`{path}` {what}")
    }
}
