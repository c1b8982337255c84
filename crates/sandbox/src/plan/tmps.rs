//! A confined command's tmps: its private one (in [`tmp_root`], swept when
//! a killed run left it), one shown at a path of the task's (`/tmp` for
//! scripts written for a container), and the system tmp as it sees it:
//! covered, but for what it may use there ([`MountStep::CoverTmp`]).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Confinement;
use crate::child::{KeptInTmp, MountStep};
use crate::held::HeldDir;
use crate::setup_error::{SetupError, c_path};

/// The directory in the system tmp that holds every private tmp tack's
/// sandbox makes. Directly in the system tmp each would be one more entry
/// that every later command's Landlock rules list (they grant the system
/// tmp entry by entry, all but the sealed directories), and readable by
/// those commands: with 200 trials at once, 200 more rules per command and
/// each trial's tmp open to the others.
pub(crate) fn tmp_root() -> PathBuf {
    std::env::temp_dir().join("tack-sandbox-tmp")
}

/// A command's (or a session's) private tmp: `tmp` in a directory held in
/// [`tmp_root`], so that what a killed run leaves is swept by the next.
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    held: HeldDir,
    path: PathBuf,
}

impl PrivateTmp {
    /// A new one in [`tmp_root`].
    pub(super) fn new() -> Result<PrivateTmp, SetupError> {
        use std::os::unix::fs::DirBuilderExt;
        let root = tmp_root();
        ready_tmp_root(&root)?;
        let held = HeldDir::new_in(&root, "tack-tmp-").map_err(SetupError::TmpDir)?;
        let path = held.path().join("tmp");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(SetupError::TmpDir)?;
        Ok(PrivateTmp { held, path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// An empty directory beside the tmp, where the tmpfs that covers the
    /// system tmp is built ([`MountStep::CoverTmp`]).
    pub(super) fn stage(&self) -> Result<PathBuf, SetupError> {
        use std::os::unix::fs::DirBuilderExt;
        let stage = self.held.path().join("cover");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&stage)
            .map_err(SetupError::TmpDir)?;
        Ok(stage)
    }

    /// Lets an image's root, which is not the host's, pass through (not
    /// list) the tmp and the directory holding it: the image's root is
    /// mounted below them (`prepare_in_image`).
    pub(super) fn open_to_image_root(&self) -> Result<(), SetupError> {
        for dir in [self.held.path(), self.path.as_path()] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
                .map_err(SetupError::TmpDir)?;
        }
        Ok(())
    }
}

/// Makes [`tmp_root`] if missing and checks that it is a directory of this
/// user's (in a shared /tmp another user could have put a link or a
/// directory of theirs there first); the first time it is ready in this
/// process, sweeps what killed runs left in it. Once ready, not checked
/// again: it is asked for every command.
fn ready_tmp_root(root: &Path) -> Result<(), SetupError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static READY: AtomicBool = AtomicBool::new(false);
    if READY.load(Ordering::Acquire) {
        return Ok(());
    }
    crate::held::ready_root(root).map_err(|error| match error.kind() {
        std::io::ErrorKind::PermissionDenied => SetupError::TmpRoot(root.to_path_buf()),
        _ => SetupError::TmpDir(error),
    })?;
    if !READY.swap(true, Ordering::AcqRel) {
        crate::held::sweep_stale(root);
    }
    Ok(())
}

/// With [`Confinement::tmp_at`], the tmp directory (the given host one, or
/// a subdirectory of the command's own) is placed at that path, and the new
/// root is built on another subdirectory: one directory cannot be both.
pub(super) struct ShownTmp {
    pub confinement: Option<Confinement>,
    pub scratch: Option<PathBuf>,
}

impl ShownTmp {
    pub(super) fn new(confinement: &Confinement, own: &Path) -> Result<ShownTmp, SetupError> {
        let Some(at) = &confinement.tmp_at else {
            return Ok(ShownTmp {
                confinement: None,
                scratch: None,
            });
        };
        let root = own.join("root");
        let files = match &confinement.tmp_host {
            Some(host) => host.clone(),
            None => own.join("tmp"),
        };
        let fresh = [&root]
            .into_iter()
            .chain(confinement.tmp_host.is_none().then_some(&files));
        for dir in fresh {
            std::fs::create_dir(dir).map_err(|source| SetupError::CreateDir {
                path: dir.clone(),
                source,
            })?;
        }
        Ok(ShownTmp {
            confinement: Some(confinement.clone().placing(&files, at, true)),
            scratch: Some(root),
        })
    }
}

/// `TMPDIR`, `TMP` and `TEMP`: where the tmp is shown, or the private tmp
/// (the last writable path).
pub(super) fn tmp_env(confinement: &Confinement, writable: &[PathBuf]) -> Vec<(String, String)> {
    let tmp_text = match &confinement.tmp_at {
        Some(at) => at.display().to_string(),
        None => writable
            .last()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    ["TMPDIR", "TMP", "TEMP"]
        .map(|name| (name.to_string(), tmp_text.clone()))
        .to_vec()
}

/// The system tmp. Other programs keep their sockets there (tmux's, an ssh
/// agent's, X11's, an editor's): a confined command that could connect to
/// one would be outside its walls (a tmux server runs what it is sent, as
/// its user), and Landlock does not govern connecting to a socket file
/// before ABI 9. So a confined command sees none of it but what it may use.
pub(crate) const SYSTEM_TMP: &str = "/tmp";

/// How the system tmp is covered ([`MountStep::CoverTmp`]).
pub(super) struct TmpCover {
    stage: PathBuf,
    /// What is bound back, outermost only.
    kept: Vec<Kept>,
}

/// A path of the system tmp that a covered one keeps.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Kept {
    path: PathBuf,
    is_dir: bool,
    /// An entry found there, which may be gone by the time the walls are
    /// made; a path the command was granted may not.
    found: bool,
}

impl TmpCover {
    pub(super) fn new(stage: PathBuf, kept: Vec<Kept>) -> TmpCover {
        TmpCover { stage, kept }
    }

    pub(super) fn step(&self) -> Result<MountStep, SetupError> {
        let in_stage = |path: &Path| {
            let below = path.strip_prefix(SYSTEM_TMP).unwrap_or(path);
            self.stage.join(below)
        };
        let mut dirs = Vec::new();
        let mut keep = Vec::new();
        for Kept {
            path,
            is_dir,
            found,
        } in &self.kept
        {
            let target = in_stage(path);
            let above: Vec<&Path> = target.ancestors().skip(1).collect();
            for dir in above.into_iter().rev() {
                if dir.starts_with(&self.stage) && dir != self.stage {
                    let dir = c_path(dir)?;
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
            }
            keep.push(KeptInTmp {
                source: c_path(path)?,
                target: c_path(&target)?,
                is_dir: *is_dir,
                optional: *found,
            });
        }
        Ok(MountStep::CoverTmp {
            stage: c_path(&self.stage)?,
            dirs,
            keep,
        })
    }

    /// Whether `path` is still there once the system tmp is covered.
    pub(super) fn shows(&self, path: &Path) -> bool {
        !path.starts_with(SYSTEM_TMP) || self.kept.iter().any(|kept| path.starts_with(&kept.path))
    }
}

/// What of the system tmp a confined command keeps, or `None` when it is
/// not covered: a tmp of the command's own is shown there already
/// (`tmp_at`), a path granted is the system tmp itself, or it is a link.
/// Kept: the `writable` paths beneath it (its workspace, its private tmp,
/// what is exposed to it), and the entries there now but for sockets,
/// directories holding one, links and the sealed directories (the trials'
/// roots, of which a command sees its own alone). An entry made later is
/// not there (a tmux started after the trial).
pub(super) fn tmp_kept(confinement: &Confinement, writable: &[PathBuf]) -> Option<Vec<Kept>> {
    let tmp = Path::new(SYSTEM_TMP);
    if confinement.tmp_at.is_some() || !tmp.is_dir() || tmp.is_symlink() {
        return None;
    }
    let mut kept: Vec<Kept> = writable
        .iter()
        .filter(|path| path.starts_with(tmp))
        .map(|path| Kept {
            path: path.clone(),
            is_dir: true,
            found: false,
        })
        .collect();
    if kept.iter().any(|kept| kept.path == tmp) {
        return None;
    }
    let sealed: Vec<PathBuf> = (confinement.sealed.iter().chain([&tmp_root()]))
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect();
    keep_found(tmp, &sealed, &mut kept);
    kept.sort();
    kept.dedup_by(|later, earlier| {
        let within = later.path.starts_with(&earlier.path);
        // A granted path inside an entry found there: the entry may go, the
        // grant may not.
        if within {
            earlier.found &= later.found;
        }
        within
    });
    Some(kept)
}

/// The entries of `dir` a covered tmp keeps: its files, and its
/// directories but those holding a socket; a directory holding a sealed
/// one is kept entry by entry, the sealed one left out (with `TMPDIR` in
/// a directory of the system tmp, the trials' roots are there). Links are
/// not kept: a link to a sealed directory would show it.
fn keep_found(dir: &Path, sealed: &[PathBuf], kept: &mut Vec<Kept>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if sealed.contains(&path) {
            continue;
        }
        if kind.is_dir() && sealed.iter().any(|sealed| sealed.starts_with(&path)) {
            keep_found(&path, sealed, kept);
        } else if kind.is_dir() && !holds_a_socket(&path) {
            kept.push(Kept {
                path,
                is_dir: true,
                found: true,
            });
        } else if kind.is_file() {
            kept.push(Kept {
                path,
                is_dir: false,
                found: true,
            });
        }
    }
}

/// Whether a socket is directly in `dir` (tmux's, an ssh agent's, X11's
/// directory).
fn holds_a_socket(dir: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| entry.file_type().is_ok_and(|kind| kind.is_socket()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files and directories are kept; a directory holding a socket, a
    /// link and a sealed directory are not, and the directory holding the
    /// sealed one is kept entry by entry.
    #[test]
    fn a_covered_tmp_keeps_all_but_sockets_links_and_sealed_directories() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().canonicalize().unwrap();
        for path in ["kept-dir", "sockets", "ci/tack-trials/other", "ci/beside"] {
            std::fs::create_dir_all(tmp.join(path)).unwrap();
        }
        std::fs::write(tmp.join("kept-file"), "x").unwrap();
        std::fs::write(tmp.join("ci/file"), "x").unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(tmp.join("sockets/s")).unwrap();
        std::os::unix::fs::symlink(tmp.join("ci/tack-trials"), tmp.join("link")).unwrap();
        let sealed = [tmp.join("ci/tack-trials")];
        let mut kept = Vec::new();
        keep_found(&tmp, &sealed, &mut kept);
        kept.sort();
        let kept: Vec<(String, bool)> = kept
            .iter()
            .map(|kept| {
                let path = kept.path.strip_prefix(&tmp).unwrap();
                (path.display().to_string(), kept.is_dir)
            })
            .collect();
        let expected = [
            ("ci/beside", true),
            ("ci/file", false),
            ("kept-dir", true),
            ("kept-file", false),
        ];
        assert_eq!(kept, expected.map(|(path, dir)| (path.to_string(), dir)));
    }
}
