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
            copy_file(&source, &target)?;
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
        return copy_file(&real, target);
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

/// A task's file copied by tack, its mode kept but for set-id bits: tack
/// may run as root, and a copy it makes of a task's set-uid file would be
/// a set-uid root program (`fs::copy` keeps the bits).
fn copy_file(source: &Path, target: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::copy(source, target)
        .and_then(|_| fs::metadata(target))?
        .mode();
    if mode & 0o6000 != 0 {
        fs::set_permissions(target, fs::Permissions::from_mode(mode & 0o1777))?;
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
/// come from the source); modes as in the source (set-id bits only for an
/// image's files, `Owners::Source`). Needs
/// root. Only regular files, directories and links are copied: an image's
/// device or FIFO in its working directory is not the workspace's business.
///
/// `to` may hold a tree copied before (the fixture goes over the image's
/// WORKDIR), whose links are the image's: `/app/data.txt -> /etc/passwd`
/// means the image's file inside the sandbox, a host file here. So what is
/// in the way of an entry is replaced, never written through: a link (or
/// file) where a directory or file goes is removed first; a directory
/// where a file goes is an error. Nothing else writes to `to` meanwhile
/// (no command of the trial has started).
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
        if !(kind.is_dir() || kind.is_symlink() || kind.is_file()) {
            continue;
        }
        let in_the_way = target
            .symlink_metadata()
            .is_ok_and(|there| !(kind.is_dir() && there.is_dir()));
        if in_the_way {
            fs::remove_file(&target)?;
        }
        if kind.is_dir() {
            copy_tree_owned(&source, &target, owners)?;
            continue;
        }
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&source)?, &target)?;
        } else {
            fs::copy(&source, &target)?;
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
        // After the chown, which clears set-id bits. An image's own keep
        // theirs (its users' programs: su, passwd); a task's files lose
        // them, as [`copy_tree`] copies them.
        let kept = match owners {
            Owners::Source { .. } => 0o7777,
            Owners::All(..) => 0o1777,
        };
        fs::set_permissions(target, fs::Permissions::from_mode(meta.mode() & kept))?;
    }
    Ok(())
}

/// `path` owned by `uid` and `gid`.
pub(crate) fn own(path: &Path, (uid, gid): (u32, u32)) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// An image's WORKDIR holds links to host paths (absolute, meaning the
    /// image's own files inside the sandbox); the fixture copied over it
    /// replaces them and writes nothing through them.
    #[test]
    fn the_fixture_replaces_the_images_links_and_writes_nothing_through_them() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::create_dir_all(victim.join("dir")).unwrap();
        fs::write(victim.join("target.txt"), "host file").unwrap();
        let image = dir.path().join("image");
        fs::create_dir_all(&image).unwrap();
        symlink(victim.join("target.txt"), image.join("data.txt")).unwrap();
        symlink(victim.join("dir"), image.join("sub")).unwrap();
        let fixture = dir.path().join("fixture");
        fs::create_dir_all(fixture.join("sub")).unwrap();
        fs::write(fixture.join("data.txt"), "task file").unwrap();
        fs::write(fixture.join("run"), "#!/bin/sh\n").unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(fixture.join("run"), fs::Permissions::from_mode(0o4755)).unwrap();
        }
        fs::write(fixture.join("sub/evil.txt"), "task file").unwrap();
        let workspace = dir.path().join("workspace");
        let ids = (
            std::fs::metadata(dir.path()).unwrap().uid(),
            std::fs::metadata(dir.path()).unwrap().gid(),
        );
        copy_tree_owned(&image, &workspace, Owners::Source { less: 0 }).unwrap();
        assert!(workspace.join("data.txt").is_symlink());
        copy_tree_owned(&fixture, &workspace, Owners::All(ids.0, ids.1)).unwrap();
        assert_eq!(
            fs::read_to_string(victim.join("target.txt")).unwrap(),
            "host file"
        );
        assert!(!victim.join("dir/evil.txt").exists());
        assert!(!workspace.join("data.txt").is_symlink());
        assert_eq!(
            fs::read_to_string(workspace.join("data.txt")).unwrap(),
            "task file"
        );
        assert!(
            fs::symlink_metadata(workspace.join("sub"))
                .unwrap()
                .is_dir()
        );
        assert!(workspace.join("sub/evil.txt").is_file());
        // A task's set-uid file, copied by tack (root), is no set-uid program.
        assert_eq!(
            fs::metadata(workspace.join("run")).unwrap().mode() & 0o7777,
            0o755
        );
        let plain = dir.path().join("plain");
        copy_tree(&fixture, &plain, &fixture).unwrap();
        assert_eq!(
            fs::metadata(plain.join("run")).unwrap().mode() & 0o7777,
            0o755
        );
    }
}
