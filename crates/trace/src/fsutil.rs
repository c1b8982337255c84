use std::fs::{self, File};
use std::io::Write;
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
    let mut file = File::create(&temporary).map_err(|e| TraceError::io(&temporary, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| TraceError::io(&temporary, e))?;
    fs::rename(&temporary, path).map_err(|e| TraceError::io(path, e))
}
