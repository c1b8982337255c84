use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// Resolves a path the model gave against the workspace. Paths that leave
/// the workspace — absolute elsewhere, `..` past the root, or through a
/// symlink pointing out — are refused: file tools never write outside it.
pub(crate) fn resolve(workspace: &Path, requested: &str) -> Result<PathBuf, ToolError> {
    if requested.trim().is_empty() {
        return Err(ToolError::failed(
            "the path is empty; give a path relative to the workspace",
        ));
    }
    let joined = workspace.join(requested);
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    let outside = || {
        ToolError::failed(format!(
            "`{requested}` is outside the workspace; file tools work only on paths inside it"
        ))
    };
    if !normal.starts_with(workspace) {
        return Err(outside());
    }
    // A symlink inside the workspace may point out of it: judge the real path
    // of the deepest part that exists.
    let mut existing = normal.as_path();
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => break,
        }
    }
    let real_workspace = workspace.canonicalize().map_err(|e| {
        ToolError::failed(format!(
            "the workspace {} is unreadable: {e}",
            workspace.display()
        ))
    })?;
    match existing.canonicalize() {
        Ok(real) if real.starts_with(&real_workspace) => Ok(normal),
        Ok(_) => Err(outside()),
        Err(e) => Err(ToolError::failed(format!(
            "cannot resolve `{requested}`: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_that_leave_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        assert!(resolve(ws, "a/b.txt").is_ok());
        assert!(resolve(ws, "./a/../b.txt").is_ok());
        assert!(resolve(ws, "../escape.txt").is_err());
        assert!(resolve(ws, "/etc/passwd").is_err());
        assert!(resolve(ws, "").is_err());
        std::os::unix::fs::symlink("/etc", ws.join("link")).unwrap();
        assert!(resolve(ws, "link/passwd").is_err());
    }
}
