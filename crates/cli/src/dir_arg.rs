//! Directories given on the command line to write into (`--out`,
//! `--reports`, `--workspace`): one that names an existing file, or a
//! workspace that is the whole filesystem or the system tmp, is refused
//! when the arguments are read (exit 2), not found out while writing or
//! confining (exit 3).

use std::path::PathBuf;

/// clap's parser for a directory tack writes into, made if absent.
pub fn out_dir(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_dir() => Err(format!(
            "`{text}` is a file; name a directory (it is made if absent)"
        )),
        _ => Ok(path),
    }
}

/// clap's parser for an agent's or a command's workspace: never `/`, under
/// which every file on the machine would be writable, nor `/tmp`,
/// `/var/tmp` or a directory holding `$TMPDIR`, which hold other programs'
/// sockets and every trial's files (the sandbox refuses them too, later).
pub fn workspace(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    let Ok(canonical) = std::fs::canonicalize(&path) else {
        return Ok(path);
    };
    if canonical.parent().is_none() {
        return Err(tack_sandbox::SetupError::RootWritable(path).to_string());
    }
    let tmpdir = std::env::temp_dir();
    let tmpdir = std::fs::canonicalize(&tmpdir).unwrap_or(tmpdir);
    let holds = (tack_sandbox::SHARED_TMPS.map(PathBuf::from).into_iter())
        .chain([tmpdir])
        .find(|held| held.starts_with(&canonical));
    match holds {
        Some(holds) => {
            Err(tack_sandbox::SetupError::WritableHoldsOthers { path, holds }.to_string())
        }
        None => Ok(path),
    }
}

#[cfg(test)]
mod tests {
    use super::{out_dir, workspace};

    #[test]
    fn the_root_is_no_workspace() {
        assert!(workspace("/").is_err());
        assert!(workspace("/..").is_err());
        assert!(workspace("/tmp").is_err());
        assert!(workspace("/var/tmp").is_err() || !std::path::Path::new("/var/tmp").is_dir());
        assert!(workspace("/var").is_err() || !std::path::Path::new("/var/tmp").is_dir());
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let inside = dir.path().to_str().unwrap();
        assert_eq!(workspace(inside), Ok(inside.into()));
    }

    #[test]
    fn a_file_is_refused_and_a_directory_or_a_new_path_taken() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        std::fs::write(&file, "x").unwrap();
        let file = file.to_str().unwrap();
        assert_eq!(
            out_dir(file),
            Err(format!(
                "`{file}` is a file; name a directory (it is made if absent)"
            ))
        );
        let new = dir.path().join("new");
        assert_eq!(out_dir(new.to_str().unwrap()), Ok(new));
        assert!(out_dir(dir.path().to_str().unwrap()).is_ok());
    }
}
