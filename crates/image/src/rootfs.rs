//! An image's filesystem for tack's sandbox: exported once per image id by
//! the engine, unpacked by `tar`, its owners shifted onto the host ids the
//! sandbox maps the image's users to, and kept under the cache; a marker
//! written last says it is whole (a cut-off extraction is made again).

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{Engine, ImageError};

/// An extracted image.
#[derive(Debug, Clone)]
pub struct Rootfs {
    /// The image's files, owners shifted by the `id_base` it was made with.
    pub path: PathBuf,
    pub cached: bool,
}

/// Written last into a whole extraction.
const COMPLETE: &str = ".tack-complete";

/// The first line of [`COMPLETE`]: how the extraction was made. One made
/// otherwise (before devices were removed and ids checked) is made again.
const FORMAT: &str = "tack-rootfs-3";

/// The filesystem of `image` (a tag or id) under `cache`, its owners
/// shifted by `id_base` (the image's ids below `ids` are mapped, the rest
/// become its `nobody`, as the sandbox shows them); extracted unless
/// already there.
pub fn rootfs(
    engine: &Engine,
    image: &str,
    image_id: &str,
    (id_base, ids): (u32, u32),
    cache: &Path,
) -> Result<Rootfs, ImageError> {
    let name = image_id.trim_start_matches("sha256:");
    let dir = cache.join("rootfs").join(format!("{name}-{id_base}"));
    let path = dir.join("root");
    if is_complete(&dir) {
        return Ok(Rootfs { path, cached: true });
    }
    // Another run may be extracting the same image: one at a time.
    let locks = cache.join("rootfs");
    std::fs::create_dir_all(&locks).map_err(|e| ImageError::io(&locks, e))?;
    let lock_path = locks.join(format!("{name}-{id_base}.lock"));
    let lock = std::fs::File::create(&lock_path).map_err(|e| ImageError::io(&lock_path, e))?;
    lock.lock().map_err(|e| ImageError::io(&lock_path, e))?;
    if is_complete(&dir) {
        return Ok(Rootfs { path, cached: true });
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| ImageError::io(&dir, e))?;
    }
    // Only tack may enter while tar, as root, makes the image's files with
    // their owners (a set-uid root shell), before they are shifted; then
    // only the image's root (see below).
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| ImageError::io(&dir, e))?;
    std::fs::create_dir_all(&path).map_err(|e| ImageError::io(&path, e))?;
    // Named after the image, so one left by a run that was killed is
    // removed here, by the next.
    let container = format!("tack-export-{}", &name[..name.len().min(16)]);
    let _ = engine.output(&["rm", "-f", &container]);
    engine.output(&["create", "--name", &container, image, "/bin/true"])?;
    let unpacked = export(engine, &container, &path);
    let _ = engine.output(&["rm", "-f", &container]);
    unpacked?;
    shift_owners(&path, id_base, ids)?;
    // The sandbox mounts it as the image's root (host id `id_base`); no
    // other user of the machine reaches its files (set-uid programs of
    // the image's users among them).
    std::os::unix::fs::chown(&dir, Some(id_base), Some(id_base))
        .map_err(|e| ImageError::io(&dir, e))?;
    std::fs::write(dir.join(COMPLETE), format!("{FORMAT}\n{image_id}\n"))
        .map_err(|e| ImageError::io(&dir, e))?;
    Ok(Rootfs {
        path,
        cached: false,
    })
}

/// Whether `dir` holds a whole extraction of this format.
fn is_complete(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(COMPLETE))
        .is_ok_and(|text| text.lines().next() == Some(FORMAT))
}

/// `engine export container | tar -x`, owners and modes as in the image.
fn export(engine: &Engine, container: &str, into: &Path) -> Result<(), ImageError> {
    let mut exporting = engine
        .command(&["export", container])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ImageError::Run {
            command: format!("{} export", engine.kind.as_str()),
            source,
        })?;
    let stream = exporting
        .stdout
        .take()
        .map(Stdio::from)
        .unwrap_or(Stdio::null());
    let untar = std::process::Command::new("tar")
        .args(["-x", "--numeric-owner", "--same-permissions", "-C"])
        .arg(into)
        .stdin(stream)
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| ImageError::Run {
            command: "tar -x".to_string(),
            source,
        })?;
    let exported = exporting
        .wait_with_output()
        .map_err(|source| ImageError::Run {
            command: format!("{} export", engine.kind.as_str()),
            source,
        })?;
    if !exported.status.success() {
        return Err(ImageError::Engine {
            command: format!("{} export {container}", engine.kind.as_str()),
            stderr: String::from_utf8_lossy(&exported.stderr).trim().to_string(),
        });
    }
    if !untar.status.success() {
        return Err(ImageError::Engine {
            command: format!("tar -x -C {}", into.display()),
            stderr: String::from_utf8_lossy(&untar.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// The image's `nobody`: an id the sandbox does not map shows there as it.
const NOBODY: u32 = 65_534;

/// Moves every owner under `root` up by `base` (symlinks themselves, not
/// what they point to; set-id bits kept, which chown would clear). An id
/// from `ids` up becomes `nobody`'s, and its file loses its set-id bits
/// (unchecked, a huge id wrapped round to the host's root). Device nodes
/// are removed: tar made them as root, they would open the host's devices
/// to whoever reaches them, and the sandbox mounts a `/dev` of its own.
fn shift_owners(root: &Path, base: u32, ids: u32) -> Result<(), ImageError> {
    let mut stack = vec![root.to_path_buf()];
    // A file of several names (hard links) is shifted once: by its second
    // name it would look like an id beyond the map.
    let mut shifted = std::collections::HashSet::new();
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).map_err(|e| ImageError::io(&path, e))?;
        let kind = meta.file_type();
        // Every name of a device goes (one with three names keeps two
        // after the first is removed).
        if kind.is_block_device() || kind.is_char_device() {
            std::fs::remove_file(&path).map_err(|e| ImageError::io(&path, e))?;
            continue;
        }
        if meta.nlink() > 1 && !meta.is_dir() && !shifted.insert((meta.dev(), meta.ino())) {
            continue;
        }
        let mapped = |id: u32| (id < ids).then_some(id);
        let (uid, gid) = (mapped(meta.uid()), mapped(meta.gid()));
        let nobody = NOBODY.min(ids.saturating_sub(1));
        let host = |id: Option<u32>| base.saturating_add(id.unwrap_or(nobody));
        std::os::unix::fs::lchown(&path, Some(host(uid)), Some(host(gid)))
            .map_err(|e| ImageError::io(&path, e))?;
        if !kind.is_symlink() && meta.mode() & 0o6000 != 0 {
            let kept = if uid.is_some() && gid.is_some() {
                0o7777
            } else {
                0o1777
            };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(meta.mode() & kept))
                .map_err(|e| ImageError::io(&path, e))?;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(|e| ImageError::io(&path, e))? {
                stack.push(entry.map_err(|e| ImageError::io(&path, e))?.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Needs root (chown to any id), as extraction does.
    #[test]
    fn ids_beyond_the_map_become_nobody_and_lose_set_id_bits() {
        if euid() != 0 {
            eprintln!("skipped: chown to any id needs root, as extraction does");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let file = |name: &str, uid: u32, mode: u32| {
            let path = root.join(name);
            std::fs::write(&path, name).unwrap();
            std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        file("mapped-suid", 0, 0o4755);
        file("huge-suid", 4_294_867_296, 0o4755);
        file("beyond", 70_000, 0o644);
        std::fs::hard_link(root.join("mapped-suid"), root.join("also-mapped-suid")).unwrap();
        let made = std::process::Command::new("mknod")
            .arg(root.join("disk"))
            .args(["b", "8", "0"])
            .status()
            .unwrap();
        assert!(made.success());
        for name in ["disk2", "disk3"] {
            std::fs::hard_link(root.join("disk"), root.join(name)).unwrap();
        }
        shift_owners(root, 100_000, 65_536).unwrap();
        for name in ["disk", "disk2", "disk3"] {
            assert!(
                std::fs::symlink_metadata(root.join(name)).is_err(),
                "{name}"
            );
        }
        let meta = |name: &str| std::fs::metadata(root.join(name)).unwrap();
        assert_eq!(
            (
                meta("mapped-suid").uid(),
                meta("mapped-suid").mode() & 0o7777
            ),
            (100_000, 0o4755)
        );
        assert_eq!(
            (meta("huge-suid").uid(), meta("huge-suid").mode() & 0o7777),
            (165_534, 0o755)
        );
        assert_eq!(
            (meta("beyond").uid(), meta("beyond").gid()),
            (165_534, 165_534)
        );
        // Shifted once, by whichever of its names came first.
        assert_eq!(
            (
                meta("also-mapped-suid").uid(),
                meta("also-mapped-suid").mode() & 0o7777
            ),
            (100_000, 0o4755)
        );
    }

    fn euid() -> u32 {
        std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX)
    }
}
