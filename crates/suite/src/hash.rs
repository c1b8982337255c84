use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::SuiteError;

/// sha256 over every file below `root`, in path order (path and content), so
/// that a run's manifest pins exactly which suite it ran.
pub fn content_hash(root: &Path) -> Result<String, SuiteError> {
    let mut files = Vec::new();
    collect_files(root, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let bytes = fs::read(&file).map_err(|e| SuiteError::io(&file, e))?;
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let digest = hasher.finalize();
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), SuiteError> {
    let entries = fs::read_dir(dir).map_err(|e| SuiteError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SuiteError::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        if name == "__pycache__" {
            continue;
        }
        let kind = entry.file_type().map_err(|e| SuiteError::io(&path, e))?;
        if kind.is_dir() {
            collect_files(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}
