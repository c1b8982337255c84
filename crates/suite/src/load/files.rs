//! The files and directories of a suite: reading its TOML files, finding its
//! tasks, and refusing what a run could not copy, hash or read later.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::SuiteError;

/// Reads a TOML file of the suite as text. Everything that can be wrong with
/// the file itself — missing, a directory, a link that leads nowhere, not
/// UTF-8 — is said here, before any field is looked at.
pub(super) fn read_text(file: &Path) -> Result<String, SuiteError> {
    let meta = fs::metadata(file).map_err(|e| unreachable_path(file, &e))?;
    if !meta.is_file() {
        // Opening a named pipe would block forever, so look before reading.
        return Err(SuiteError::file(
            file,
            format!(
                "is {}, not a file: put the TOML text in a regular file here",
                kind_of(&meta)
            ),
        ));
    }
    let bytes = fs::read(file).map_err(|e| SuiteError::file(file, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
        SuiteError::file(
            file,
            format!(
                "is not UTF-8 text (byte {at}, line {line}, column {column}): TOML files must be UTF-8; re-save it as UTF-8"
            ),
        )
    })
}

/// Why a path that should be there cannot be reached.
pub(super) fn unreachable_path(path: &Path, error: &io::Error) -> SuiteError {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let message = if is_link {
        format!(
            "is a symbolic link that cannot be followed ({error}): point it at what it stands for, or replace it with the real file or directory"
        )
    } else if error.kind() == io::ErrorKind::NotFound {
        "does not exist".to_string()
    } else {
        format!("cannot be read: {error}")
    };
    SuiteError::file(path, message)
}

fn kind_of(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_file() {
        "a file"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a named pipe"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "something other than a file"
    }
}

/// The task directories under `tasks/`, sorted. Every entry must be a task:
/// a file or a directory without a `task.toml` there is a mistake (a task
/// that silently never runs), not something to skip. Hidden entries
/// (`.DS_Store`, `.gitkeep`) are the exception.
pub(super) fn task_dirs(root: &Path, task_file: &str) -> Result<Vec<PathBuf>, SuiteError> {
    let tasks_dir = root.join("tasks");
    let no_tasks = "a suite keeps its tasks in tasks/<id>/, each directory with a task.toml (see suites/README.md)";
    match fs::metadata(&tasks_dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(SuiteError::file(
                &tasks_dir,
                format!("is not a directory: {no_tasks}"),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound && !is_link(&tasks_dir) => {
            return Err(SuiteError::file(
                &tasks_dir,
                format!("does not exist: {no_tasks}"),
            ));
        }
        Err(e) => return Err(unreachable_path(&tasks_dir, &e)),
    }
    let entries = fs::read_dir(&tasks_dir)
        .map_err(|e| SuiteError::file(&tasks_dir, format!("cannot be listed: {e}")))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| SuiteError::file(&tasks_dir, format!("cannot be listed: {e}")))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = fs::metadata(&path).map_err(|e| unreachable_path(&path, &e))?;
        if !meta.is_dir() {
            return Err(SuiteError::file(
                &path,
                format!(
                    "is {}, not a task directory: {no_tasks}; move it out of tasks/",
                    kind_of(&meta)
                ),
            ));
        }
        let file = path.join(task_file);
        if fs::symlink_metadata(&file).is_err() {
            return Err(SuiteError::file(
                &file,
                "does not exist: every directory in tasks/ is a task and needs a task.toml (see suites/README.md); add one, or move the directory out of tasks/",
            ));
        }
        dirs.push(path);
    }
    dirs.sort();
    if dirs.is_empty() {
        return Err(SuiteError::invalid(
            &tasks_dir,
            "tasks",
            "holds no task: each task is a directory tasks/<id>/ with a task.toml",
        ));
    }
    Ok(dirs)
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Walks the suite's tree without following links and refuses what a run
/// would trip over after the trials are planned: links that lead nowhere or
/// in a circle, links to directories (the suite's content hash reads every
/// entry as a file), and pipes, sockets and devices (reading or copying one
/// blocks). Caches such as `__pycache__` are looked at too: the hash skips
/// them, but a copy of the task does not.
/// A link must stay inside its task (a directory holding `task_file`), or
/// inside the suite (`boundary`) for the suite's other files: a task is
/// copied, imported and shared whole, and one that read a file of the host
/// through a link would pass on this machine only.
pub(super) fn check_tree(dir: &Path, boundary: &Path, task_file: &str) -> Result<(), SuiteError> {
    let entries =
        fs::read_dir(dir).map_err(|e| SuiteError::file(dir, format!("cannot be listed: {e}")))?;
    for entry in entries {
        let entry = entry.map_err(|e| SuiteError::file(dir, format!("cannot be listed: {e}")))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| SuiteError::file(&path, format!("cannot be read: {e}")))?;
        if kind.is_dir() {
            let inner = if path.join(task_file).is_file() {
                &path
            } else {
                boundary
            };
            check_tree(&path, inner, task_file)?;
        } else if kind.is_symlink() {
            check_link(&path, boundary)?;
        } else if !kind.is_file() {
            let meta = fs::symlink_metadata(&path)
                .map_err(|e| SuiteError::file(&path, format!("cannot be read: {e}")))?;
            return Err(SuiteError::file(
                &path,
                format!(
                    "is {}: a suite holds only files, directories and links to files; remove it",
                    kind_of(&meta)
                ),
            ));
        }
    }
    Ok(())
}

fn check_link(path: &Path, boundary: &Path) -> Result<(), SuiteError> {
    let meta = fs::metadata(path).map_err(|e| {
        SuiteError::file(
            path,
            format!(
                "is a symbolic link that cannot be followed ({e}): a run hashes every file of the suite and cannot read a link that loops or points at nothing; point it at an existing file or remove it"
            ),
        )
    })?;
    let real = path.canonicalize().map_err(|e| SuiteError::io(path, e))?;
    let within = boundary
        .canonicalize()
        .map_err(|e| SuiteError::io(boundary, e))?;
    if !real.starts_with(&within) {
        return Err(SuiteError::file(
            path,
            format!(
                "is a symbolic link to {}, outside {}: a task carries its own files (it is \
                 copied, hashed and shared whole); copy the file in instead",
                real.display(),
                within.display()
            ),
        ));
    }
    if meta.is_file() {
        return Ok(());
    }
    Err(SuiteError::file(
        path,
        format!(
            "is a symbolic link to {}: a run hashes every file of the suite and cannot read through it; copy what it points to instead",
            kind_of(&meta)
        ),
    ))
}
