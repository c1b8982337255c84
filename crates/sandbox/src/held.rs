//! Directories a living process holds: a trial's directory (its workspace
//! and walls), a command's private tmp. Each is made under a root with a
//! lock file that its maker holds locked while it lives; a run killed with
//! SIGKILL leaves directories whose lock anyone can take, and the next
//! [`sweep_stale`] over the root removes them. A directory without a lock
//! file (a kept workspace) is never swept, unless it is empty and old: its
//! maker was killed before it put the lock in.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

pub use remove::remove_tree;

mod remove;

/// The lock file of a held directory (beside what it holds, so out of the
/// sight of the commands that use it). Named when only trial directories
/// had one: kept, so that what runs of earlier versions left is swept too.
const LOCK: &str = ".tack-trial.lock";

/// The lock file before it is locked and renamed to [`LOCK`].
const UNLOCKED: &str = ".tack-trial.lock.new";

/// A new directory under `root`, held until dropped (then removed) or
/// [`HeldDir::keep`]t.
#[derive(Debug)]
pub struct HeldDir {
    path: PathBuf,
    /// `None` once kept.
    dir: Option<tempfile::TempDir>,
    /// Locked while this lives; closed (and so unlocked) with it.
    _lock: File,
}

impl HeldDir {
    /// Makes a directory named `prefix` and a random suffix under `root`
    /// (which must exist) and holds it.
    pub fn new_in(root: &Path, prefix: &str) -> std::io::Result<HeldDir> {
        use std::os::unix::fs::PermissionsExt;
        // Tack's alone: a trial's files (a set-uid program an image or an
        // agent made) are no other local user's to reach.
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(root)?;
        // Locked under another name, then renamed: a sweep that sees the
        // lock file sees it locked (the lock is the file's, not its name's).
        let unlocked = dir.path().join(UNLOCKED);
        let lock = File::create(&unlocked)?;
        lock.lock()?;
        std::fs::rename(&unlocked, dir.path().join(LOCK))?;
        Ok(HeldDir {
            path: dir.path().to_path_buf(),
            dir: Some(dir),
            _lock: lock,
        })
    }

    /// [`HeldDir::new_in`], making `root` if missing. The first time this
    /// process makes one under `root`, what killed runs left there is swept
    /// first ([`sweep_stale`]).
    pub fn new_in_swept(root: &Path, prefix: &str) -> std::io::Result<HeldDir> {
        static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
        ready_root(root)?;
        {
            let mut swept = SWEPT.lock().unwrap_or_else(PoisonError::into_inner);
            if !swept.iter().any(|done| done == root) {
                sweep_stale(root);
                swept.push(root.to_path_buf());
            }
        }
        HeldDir::new_in(root, prefix)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory on disk, without its lock, so that no sweep
    /// removes it; returns where it is.
    pub fn keep(mut self) -> PathBuf {
        if let Some(dir) = self.dir.take() {
            let _ = dir.keep();
        }
        let _ = std::fs::remove_file(self.path.join(LOCK));
        self.path.clone()
    }
}

impl Drop for HeldDir {
    fn drop(&mut self) {
        if self.dir.is_some() {
            // Before the TempDir's own removal, which then finds nothing.
            let _ = remove_lock_last(&self.path);
        }
    }
}

/// Makes `root` (mode 0711: entered, not listed) if missing, and checks
/// that it is this user's own directory. In a shared `/tmp` another user
/// could have made it first, or put a link there, and then swapped what
/// tack makes in it for links to places of their choosing, for tack (as
/// root) to write through.
pub fn ready_root(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Some(parent) = root.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o711).create(root) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    let meta = std::fs::symlink_metadata(root)?;
    let euid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != euid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not this user's own directory (it is a link, or belongs to uid {}): \
                 another user may have made it; remove it, or set TMPDIR to a directory of \
                 your own",
                root.display(),
                meta.uid()
            ),
        ));
    }
    // Made by an earlier tack that left it listable (0755).
    if meta.mode() & 0o077 != 0o011 {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))?;
    }
    Ok(())
}

/// Removes `dir`, its lock file last: a process killed while removing it
/// leaves the lock file (no longer locked), so the next sweep removes the
/// rest, where a directory that had lost its lock first would look kept
/// and stay for good.
fn remove_lock_last(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == LOCK {
            continue;
        }
        if entry.file_type()?.is_dir() {
            remove_tree(&entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    match std::fs::remove_file(dir.join(LOCK)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::remove_dir(dir)
}

/// Removes the directories under `root` that a killed run left: the ones
/// whose lock no living process holds. Kept ones (no lock) and those of
/// runs going on stay. Best effort: what cannot be removed stays for the
/// next sweep.
pub fn sweep_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(file) = File::open(dir.join(LOCK)) else {
            if abandoned_before_its_lock(&dir) {
                let _ = std::fs::remove_file(dir.join(UNLOCKED));
                let _ = std::fs::remove_dir(&dir);
            }
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = remove_lock_last(&dir);
        }
    }
}

/// How long a maker may take between making a directory and its lock.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether `dir` is one whose maker was killed between making it and
/// putting its lock in place: empty, or holding only the lock file under its
/// first name, unlocked; and older than [`LOCK_GRACE`] (a living maker
/// locks and renames it within microseconds). A kept directory holds what
/// was kept, so it is never one.
fn abandoned_before_its_lock(dir: &Path) -> bool {
    // The age first: a living maker's lock file is never tried, so the
    // sweep cannot hold its lock even for an instant.
    let old = std::fs::metadata(dir)
        .and_then(|meta| meta.modified())
        .is_ok_and(|modified| modified.elapsed().is_ok_and(|age| age > LOCK_GRACE));
    let Some(entries) = old.then(|| std::fs::read_dir(dir).ok()).flatten() else {
        return false;
    };
    let names: Vec<std::ffi::OsString> = entries.flatten().take(2).map(|e| e.file_name()).collect();
    match names.as_slice() {
        [] => true,
        [only] => {
            only == UNLOCKED
                && File::open(dir.join(UNLOCKED)).is_ok_and(|file| file.try_lock().is_ok())
        }
        _ => false,
    }
}

/// Whether a living process holds the directory `dir` (a kept one, or one
/// already swept, is held by none).
pub fn held(dir: &Path) -> bool {
    File::open(dir.join(LOCK)).is_ok_and(|file| file.try_lock().is_err())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A trial's directory is tack's alone, under a root others may enter
    /// but not list; a root that is a link, or another user's, is refused.
    #[test]
    fn roots_are_tacks_own_and_held_directories_private() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tack-trials");
        let held = HeldDir::new_in_swept(&root, "t-").unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!((mode(&root), mode(held.path())), (0o711, 0o700));
        // Left listable by an earlier tack: closed.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        ready_root(&root).unwrap();
        assert_eq!(mode(&root), 0o711);
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let linked = tmp.path().join("linked");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        let error = ready_root(&linked).unwrap_err().to_string();
        assert!(
            error.contains("is not this user's own directory"),
            "{error}"
        );
        // Another user's (only root can make one here).
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&elsewhere, Some(65534), None).unwrap();
            let error = ready_root(&elsewhere).unwrap_err().to_string();
            assert!(error.contains("belongs to uid 65534"), "{error}");
            assert_eq!(std::fs::metadata(&elsewhere).unwrap().uid(), 65534);
        }
    }

    /// A killed run's directory goes; a living one's and a kept one stay.
    #[test]
    fn the_sweep_removes_only_what_no_process_holds() {
        let root = tempfile::tempdir().unwrap();
        let living = HeldDir::new_in(root.path(), "living-").unwrap();
        let kept = HeldDir::new_in(root.path(), "kept-").unwrap().keep();
        let killed = root.path().join("killed");
        std::fs::create_dir(&killed).unwrap();
        File::create(killed.join(LOCK)).unwrap();
        assert!(held(living.path()) && !held(&kept) && !held(&killed));
        sweep_stale(root.path());
        assert!(!killed.exists());
        assert!(living.path().is_dir() && kept.is_dir());
        let gone = living.path().to_path_buf();
        drop(living);
        assert!(!gone.exists());
    }

    /// A removal cut off after the lock file went would leave a directory
    /// that looks kept; the lock file goes last, so what a removal cut off
    /// leaves still has it, and is swept.
    #[test]
    fn a_removal_cut_off_before_its_lock_file_is_swept_and_a_dropped_one_goes_whole() {
        let root = tempfile::tempdir().unwrap();
        let killed = root.path().join("killed");
        std::fs::create_dir_all(killed.join("workspace/src")).unwrap();
        std::fs::write(killed.join("workspace/src/a.py"), "x").unwrap();
        File::create(killed.join(LOCK)).unwrap();
        // What a removal cut off half-way leaves, its lock file in place
        // (the removal of everything else, then stopped).
        std::fs::remove_dir_all(killed.join("workspace/src")).unwrap();
        sweep_stale(root.path());
        assert!(!killed.exists(), "swept: its lock file was still there");
        // The living one: dropped with its contents.
        let living = HeldDir::new_in(root.path(), "living-").unwrap();
        std::fs::create_dir_all(living.path().join("workspace/src")).unwrap();
        std::fs::write(living.path().join("workspace/src/a.py"), "x").unwrap();
        let gone = living.path().to_path_buf();
        drop(living);
        assert!(!gone.exists());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }

    /// A directory whose maker died before it was locked is empty: swept
    /// once it is older than a maker could take, as long as it is empty.
    #[test]
    fn an_empty_directory_left_before_its_lock_is_swept_once_old() {
        let root = tempfile::tempdir().unwrap();
        let made = |name: &str, age_secs: u64| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age_secs);
            File::open(&dir).unwrap().set_modified(when).unwrap();
            dir
        };
        let abandoned = made("abandoned", 120);
        let just_made = made("just-made", 0);
        // Killed between making its lock file and renaming it.
        let unrenamed = made("unrenamed", 120);
        File::create(unrenamed.join(UNLOCKED)).unwrap();
        File::open(&unrenamed)
            .unwrap()
            .set_modified(std::time::SystemTime::UNIX_EPOCH)
            .unwrap();
        let kept = made("kept", 120);
        std::fs::create_dir(kept.join("workspace")).unwrap();
        File::open(&kept)
            .unwrap()
            .set_modified(std::time::SystemTime::UNIX_EPOCH)
            .unwrap();
        sweep_stale(root.path());
        assert!(!abandoned.exists() && !unrenamed.exists());
        assert!(just_made.is_dir() && kept.join("workspace").is_dir());
    }

    /// The first directory a process makes under a root sweeps it; later
    /// ones do not sweep it again. A missing root is made.
    #[test]
    fn the_first_held_directory_under_a_root_sweeps_it_once() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("root");
        let killed = |name: &str| {
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            File::create(dir.join(LOCK)).unwrap();
            dir
        };
        let first_killed = killed("killed-first");
        let first = HeldDir::new_in_swept(&root, "first-").unwrap();
        assert!(!first_killed.exists() && first.path().is_dir());
        let later_killed = killed("killed-later");
        let second = HeldDir::new_in_swept(&root, "second-").unwrap();
        assert!(later_killed.is_dir() && second.path().is_dir());
        let made = parent.path().join("missing");
        let elsewhere = HeldDir::new_in_swept(&made, "x-").unwrap();
        assert!(elsewhere.path().starts_with(&made));
    }
}
