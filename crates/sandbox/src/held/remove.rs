//! Removing a tree an agent or a task made, whatever its shape. The
//! standard library's `remove_dir_all` recurses once per level: a tree
//! 20,000 directories deep (`mkdir d; cd d` in a loop) overflowed tack's
//! stack, or a spawner worker's small one, and took the whole run (and
//! every later run's sweep) down with it. This walk keeps its way down on
//! the heap, holds one directory open at a time, and follows no link.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Removes `path` and everything beneath it; a link is removed, never
/// followed. Missing is not an error.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let mut dir = match rustix::fs::open(path, DIR_FLAGS, Mode::empty()) {
        Ok(dir) => dir,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        // Not a directory (or a link to one): removed as it is.
        Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
            return std::fs::remove_file(path);
        }
        Err(errno) => return Err(errno.into()),
    };
    // The names from `path` down to `dir`.
    let mut down: Vec<OsString> = Vec::new();
    loop {
        match empty_but_for_a_directory(&dir)? {
            Some(child) => {
                match rustix::fs::openat(&dir, child.as_os_str(), DIR_FLAGS, Mode::empty()) {
                    Ok(opened) => {
                        dir = opened;
                        down.push(child);
                    }
                    // Gone, or no longer a directory: the next pass sees.
                    Err(rustix::io::Errno::NOENT) => {}
                    Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                        rustix::fs::unlinkat(&dir, child.as_os_str(), AtFlags::empty())?;
                    }
                    Err(errno) => return Err(errno.into()),
                }
            }
            None => {
                let Some(name) = down.pop() else { break };
                let parent = rustix::fs::openat(&dir, "..", DIR_FLAGS, Mode::empty())?;
                rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::REMOVEDIR)?;
                dir = parent;
            }
        }
    }
    drop(dir);
    std::fs::remove_dir(path)
}

/// Removes every entry of `dir` but its directories, and names one of
/// those, if any is left.
fn empty_but_for_a_directory(dir: &OwnedFd) -> io::Result<Option<OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let entries = Dir::read_from(dir)?;
    let mut subdirectory = None;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Unknown => {
                rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
            }
            kind => kind == FileType::Directory,
        };
        if is_dir {
            subdirectory.get_or_insert_with(|| std::ffi::OsStr::from_bytes(name).to_os_string());
        } else {
            rustix::fs::unlinkat(dir, entry.file_name(), AtFlags::empty())?;
        }
    }
    Ok(subdirectory)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_tree_deeper_than_the_stack_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path().join("deep");
        std::fs::create_dir(&top).unwrap();
        // Made as an agent makes it: one level at a time, relative, with
        // a file now and then and a link out at the bottom.
        let mut here = rustix::fs::open(&top, DIR_FLAGS, Mode::empty()).unwrap();
        for i in 0..30_000 {
            rustix::fs::mkdirat(&here, "d", Mode::from_raw_mode(0o755)).unwrap();
            if i % 1000 == 0 {
                let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC;
                rustix::fs::openat(&here, "f", flags, Mode::from_raw_mode(0o644)).unwrap();
            }
            here = rustix::fs::openat(&here, "d", DIR_FLAGS, Mode::empty()).unwrap();
        }
        rustix::fs::symlinkat("/etc", &here, "out").unwrap();
        drop(here);
        // On a thread with a small stack, as a spawner worker's is.
        let removing = top.clone();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || remove_tree(&removing).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(!top.exists());
        assert!(Path::new("/etc/hostname").exists());
    }

    #[test]
    fn a_link_or_a_file_is_removed_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let kept = root.path().join("kept");
        std::fs::create_dir(&kept).unwrap();
        std::fs::write(kept.join("file"), "x").unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&kept, &link).unwrap();
        remove_tree(&link).unwrap();
        assert!(!link.exists() && kept.join("file").exists());
        remove_tree(&root.path().join("missing")).unwrap();
    }
}
