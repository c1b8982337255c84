use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Copies a directory tree of a task whose directory is `task`, keeping
/// file modes. A link whose text is relative and stays inside the tree
/// copied stays a link (a fixture may be about links); any other that leads
/// to a file of the task (a check's `expected.txt -> ../expected.txt`, an
/// absolute link, which would name the suite's own file from the trial) is
/// copied as that file; one that leads out of the task, or to a directory,
/// is refused, never followed (loading a suite refuses both first).
pub fn copy_tree(from: &Path, to: &Path, task: &Path) -> std::io::Result<()> {
    let task = task.canonicalize()?;
    let root = from.canonicalize()?;
    copy_below(from, to, &Tree { root, task }, 0)
}

/// The tree being copied and the task it is in, both real paths.
struct Tree {
    root: std::path::PathBuf,
    task: std::path::PathBuf,
}

fn copy_below(from: &Path, to: &Path, tree: &Tree, depth: usize) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_below(&source, &target, tree, depth + 1)?;
        } else if kind.is_symlink() {
            copy_link(&source, &target, tree, depth)?;
        } else if kind.is_file() {
            fs::copy(&source, &target)?;
        } else {
            // Opening a FIFO would block the copy for ever; a device is no
            // task's file.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is a named pipe, socket or device; a task holds only files, directories \
                     and links",
                    source.display()
                ),
            ));
        }
    }
    Ok(())
}

/// A link `depth` directories below the tree's root (see [`copy_tree`]).
fn copy_link(source: &Path, target: &Path, tree: &Tree, depth: usize) -> std::io::Result<()> {
    let text = fs::read_link(source)?;
    let real = source.canonicalize()?;
    // Only a relative text that never climbs above the tree means the same
    // in a copy.
    let stays = text.is_relative() && !tack_image::climbs_out_from(&text, depth);
    if stays && real.starts_with(&tree.root) {
        return std::os::unix::fs::symlink(text, target);
    }
    if real.starts_with(&tree.task) && real.is_file() {
        fs::copy(&real, target)?;
        return Ok(());
    }
    let what = if real.starts_with(&tree.task) {
        "a directory; a task's links name files"
    } else {
        "outside its task; copy the file in instead"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is a symbolic link to {}, {what}",
            source.display(),
            real.display()
        ),
    ))
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
