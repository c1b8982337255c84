use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Copies a directory tree of a task whose directory is `task`, keeping
/// file modes. A link that stays inside the tree copied stays a link (a
/// fixture may be about links); one that leads elsewhere in the task (a
/// check's `expected.txt -> ../expected.txt`) would point at nothing in the
/// copy, so the file it names is copied instead; one that leads out of the
/// task is refused, never followed (loading a suite refuses it first).
pub fn copy_tree(from: &Path, to: &Path, task: &Path) -> std::io::Result<()> {
    let task = task.canonicalize()?;
    let root = from.canonicalize()?;
    copy_below(from, to, &root, &task)
}

fn copy_below(from: &Path, to: &Path, root: &Path, task: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_below(&source, &target, root, task)?;
        } else if kind.is_symlink() {
            let real = source.canonicalize()?;
            if real.starts_with(root) {
                std::os::unix::fs::symlink(fs::read_link(&source)?, &target)?;
            } else if real.starts_with(task) && real.is_file() {
                fs::copy(&real, &target)?;
            } else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} is a symbolic link to {}, outside its task; copy the file in instead",
                        source.display(),
                        real.display()
                    ),
                ));
            }
        } else {
            fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

/// Who owns what [`copy_tree_owned`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owners {
    /// Each entry its source's owner, its ids less this many: an image's
    /// files, extracted with their owners moved up for the sandbox, copied
    /// for a container that runs with the host's ids (0 keeps them).
    Source { less: u32 },
    /// Every entry this uid and gid.
    All(u32, u32),
}

/// [`copy_tree`] for an image task's workspace: each entry owned as
/// `owners` says, `to` itself included (when it is made, or when owners
/// come from the source); modes (set-id bits too) as in the source. Needs
/// root. Only regular files, directories and links are copied: an image's
/// device or FIFO in its working directory is not the workspace's business.
pub(crate) fn copy_tree_owned(from: &Path, to: &Path, owners: Owners) -> std::io::Result<()> {
    let existed = to.is_dir();
    fs::create_dir_all(to)?;
    if matches!(owners, Owners::Source { .. }) || !existed {
        copy_meta(from, to, owners)?;
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree_owned(&source, &target, owners)?;
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
        copy_meta(&source, &target, owners)?;
    }
    Ok(())
}

/// A file or a directory copied as [`copy_tree_owned`] copies a tree.
pub(crate) fn copy_path_owned(from: &Path, to: &Path, owners: Owners) -> std::io::Result<()> {
    if fs::symlink_metadata(from)?.is_dir() {
        return copy_tree_owned(from, to, owners);
    }
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(from, to)?;
    copy_meta(from, to, owners)
}

/// `target` owned as `owners` says, with `source`'s mode.
fn copy_meta(source: &Path, target: &Path, owners: Owners) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(source)?;
    let (uid, gid) = match owners {
        Owners::Source { less } => (
            meta.uid().saturating_sub(less),
            meta.gid().saturating_sub(less),
        ),
        Owners::All(uid, gid) => (uid, gid),
    };
    std::os::unix::fs::lchown(target, Some(uid), Some(gid))?;
    if !meta.file_type().is_symlink() {
        use std::os::unix::fs::PermissionsExt;
        // After the chown, which clears set-id bits.
        fs::set_permissions(target, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    }
    Ok(())
}

/// `path` owned by `uid` and `gid`.
pub(crate) fn own(path: &Path, (uid, gid): (u32, u32)) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}
