use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Copies a directory tree, keeping file modes and symlinks as they are.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&source)?, &target)?;
        } else {
            fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

/// [`copy_tree`] for an image task's workspace: each entry owned by
/// `owner` (uid, gid), or, when `None`, by its source's owner, `to` itself
/// included; modes (set-id bits too) as in the source. Needs root. Only
/// regular files, directories and links are copied: an image's device or
/// FIFO in its working directory is not the workspace's business.
pub(crate) fn copy_tree_owned(
    from: &Path,
    to: &Path,
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    let existed = to.is_dir();
    fs::create_dir_all(to)?;
    if owner.is_none() || !existed {
        copy_meta(from, to, owner)?;
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree_owned(&source, &target, owner)?;
            continue;
        }
        if kind.is_symlink() {
            if target.symlink_metadata().is_ok() {
                fs::remove_file(&target)?;
            }
            std::os::unix::fs::symlink(fs::read_link(&source)?, &target)?;
        } else if kind.is_file() {
            fs::copy(&source, &target)?;
        } else {
            continue;
        }
        copy_meta(&source, &target, owner)?;
    }
    Ok(())
}

/// A file or a directory copied as [`copy_tree_owned`] copies a tree.
pub(crate) fn copy_path_owned(
    from: &Path,
    to: &Path,
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    if fs::symlink_metadata(from)?.is_dir() {
        return copy_tree_owned(from, to, owner);
    }
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(from, to)?;
    copy_meta(from, to, owner)
}

/// `target` owned as `source` is (or by `owner`), with its mode.
fn copy_meta(source: &Path, target: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(source)?;
    let (uid, gid) = owner.unwrap_or((meta.uid(), meta.gid()));
    std::os::unix::fs::lchown(target, Some(uid), Some(gid))?;
    if !meta.file_type().is_symlink() {
        use std::os::unix::fs::PermissionsExt;
        // After the chown, which clears set-id bits.
        fs::set_permissions(target, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    }
    Ok(())
}

/// `path` owned by `owner`, if given.
pub(crate) fn own(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::lchown(path, Some(uid), Some(gid)),
        None => Ok(()),
    }
}
