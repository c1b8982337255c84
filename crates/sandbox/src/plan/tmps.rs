//! A confined command's tmps: its private one (in [`tmp_root`], swept when
//! a killed run left it), one shown at a path of the task's (`/tmp` for
//! scripts written for a container), and the system tmp as it sees it:
//! covered, but for what it may use there ([`MountStep::CoverTmp`]).

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Confinement;
use crate::child::{CoverSteps, MountStep};
use crate::held::HeldDir;
use crate::setup_error::{SetupError, c_path};

/// The directory in the system tmp that holds every private tmp tack's
/// sandbox makes, sealed: directly in the system tmp each would be readable
/// by the other commands, and with `TMPDIR` outside `/tmp` one more entry
/// that every later command's Landlock rules list (they grant it entry by
/// entry, all but the sealed directories): with 200 trials at once, 200
/// more rules per command.
pub(crate) fn tmp_root() -> PathBuf {
    std::env::temp_dir().join(TMP_ROOT)
}

const TMP_ROOT: &str = "tack-sandbox-tmp";

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

    /// An empty directory beside the tmp, where the cover of the system tmp
    /// is built ([`MountStep::CoverTmp`]).
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
/// agent's, X11's, an editor's, at any depth, made at any time): a confined
/// command that could connect to one would be outside its walls (a tmux
/// server runs what it is sent, as its user), and Landlock does not govern
/// connecting to a socket file before ABI 9. So a confined command sees it
/// through a read-only overlay ([`MountStep::CoverTmp`]), where no socket
/// answers.
pub(crate) const SYSTEM_TMP: &str = "/tmp";

/// How the system tmp is covered ([`MountStep::CoverTmp`]).
pub(super) struct TmpCover {
    stage: PathBuf,
    /// tack's roots in the system tmp (the trials' workspaces, the checks,
    /// the private tmps), each covered by a directory of the stage holding
    /// only the command's own paths inside.
    sealed: Vec<PathBuf>,
    /// The command's own paths in the system tmp, bound back as they are.
    granted: Vec<PathBuf>,
}

impl TmpCover {
    pub(super) fn step(&self) -> Result<MountStep, SetupError> {
        let in_view = |path: &Path| {
            let below = path.strip_prefix(SYSTEM_TMP).unwrap_or(path);
            self.stage.join("view").join(below)
        };
        // Every place a mount goes in the view, and the way down to it, is a
        // directory of the mask, the overlay's upper layer: there whether or
        // not the host's /tmp has it, now or later (a root another tack
        // makes after these walls, a file squatting a root's name).
        let in_mask = |path: &Path| {
            let below = path.strip_prefix(SYSTEM_TMP).unwrap_or(path);
            self.stage.join("mask").join(below)
        };
        let mut mask_dirs: Vec<CString> = Vec::new();
        for place in self.sealed.iter().chain(&self.granted) {
            let mask = in_mask(place);
            let down: Vec<&Path> = mask
                .ancestors()
                .take_while(|dir| *dir != self.stage.join("mask"))
                .collect();
            for dir in down.into_iter().rev() {
                let dir = c_path(dir)?;
                if !mask_dirs.contains(&dir) {
                    mask_dirs.push(dir);
                }
            }
        }
        let mut dirs = Vec::new();
        let mut keep = Vec::new();
        for path in &self.granted {
            // Below a sealed root the way down is made in its cover; elsewhere
            // the mask has made it.
            if let Some(root) = self.sealed.iter().find(|root| path.starts_with(root)) {
                let target = in_view(path);
                let below_root: Vec<&Path> = target
                    .ancestors()
                    .take_while(|dir| *dir != in_view(root))
                    .collect();
                for dir in below_root.into_iter().rev() {
                    let dir = c_path(dir)?;
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
            }
            keep.push((c_path(path)?, c_path(&in_view(path))?));
        }
        let layers = format!(
            "lowerdir={}:{SYSTEM_TMP}",
            escape_layer(&self.stage.join("mask"))
        );
        Ok(MountStep::CoverTmp(CoverSteps {
            stage: c_path(&self.stage)?,
            mask: c_path(&self.stage.join("mask"))?,
            mask_dirs,
            view: c_path(&self.stage.join("view"))?,
            layers: CString::new(layers).map_err(|_| SetupError::NulByte(self.stage.clone()))?,
            sealed: (self.sealed.iter().enumerate())
                .map(|(n, root)| {
                    let cover = self.stage.join(format!("sealed-{n}"));
                    Ok((c_path(&cover)?, c_path(&in_view(root))?))
                })
                .collect::<Result<_, SetupError>>()?,
            dirs,
            keep,
        }))
    }

    /// Whether `path` is in sight once the system tmp is covered: all of it
    /// is, but what is inside tack's roots other than the command's own.
    pub(super) fn shows(&self, path: &Path) -> bool {
        !self.sealed.iter().any(|root| path.starts_with(root))
            || self.granted.iter().any(|own| path.starts_with(own))
    }
}

/// The cover of a command granted nothing in the system tmp, staged in
/// `dir`, for the probe; `None` where the system tmp is not a directory.
pub(crate) fn probe_cover(dir: &Path) -> Result<Option<MountStep>, SetupError> {
    let tmp = Path::new(SYSTEM_TMP);
    if !tmp.is_dir() || tmp.is_symlink() {
        return Ok(None);
    }
    let stage = dir.join("cover");
    std::fs::create_dir(&stage).map_err(SetupError::TmpDir)?;
    let cover = TmpCover {
        stage,
        sealed: Vec::new(),
        granted: Vec::new(),
    };
    cover.step().map(Some)
}

/// A directory in overlayfs' `lowerdir`: `:` separates layers and `,`
/// options, so both are escaped, and the escape itself.
fn escape_layer(path: &Path) -> String {
    let mut escaped = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '\\' | ':' | ',') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// How a confined command's system tmp is covered, or `None` when it is
/// not: a tmp of the command's own is shown there already (`tmp_at`), or it
/// is a link. The command's own paths there (its workspace, its private
/// tmp, what is exposed to it) are bound back; tack's `roots` there are
/// covered but for those. (No writable path holds the system tmp:
/// `host_writable` refuses one.)
pub(super) fn tmp_cover(
    confinement: &Confinement,
    writable: &[PathBuf],
    roots: &[PathBuf],
    stage: impl FnOnce() -> Result<PathBuf, SetupError>,
) -> Result<Option<TmpCover>, SetupError> {
    let tmp = Path::new(SYSTEM_TMP);
    if confinement.tmp_at.is_some() || !tmp.is_dir() || tmp.is_symlink() {
        return Ok(None);
    }
    let mut granted: Vec<PathBuf> = writable
        .iter()
        .filter(|path| path.starts_with(tmp))
        .cloned()
        .collect();
    granted.sort();
    // A path inside another granted one comes with it.
    granted.dedup_by(|later, earlier| later.starts_with(&*earlier));
    // A root not made yet is covered all the same: the mask makes its place.
    let mut sealed: Vec<PathBuf> = (roots.iter())
        .filter(|path| path.starts_with(tmp) && *path != tmp)
        .cloned()
        .collect();
    sealed.sort();
    sealed.dedup_by(|later, earlier| later.starts_with(&*earlier));
    Ok(Some(TmpCover {
        stage: stage()?,
        sealed,
        granted,
    }))
}

/// tack's roots a command is kept out of, but for its own paths: the
/// confinement's sealed directories, the private tmps' root, and that of a
/// tack with `TMPDIR` unset; canonical where they exist, as given where
/// they do not yet.
pub(super) fn tack_roots(confinement: &Confinement) -> Vec<PathBuf> {
    let others = Path::new(SYSTEM_TMP).join(TMP_ROOT);
    (confinement.sealed.iter())
        .chain([&tmp_root(), &others])
        .map(|path| std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_path_is_escaped_for_overlayfs() {
        assert_eq!(escape_layer(Path::new("/a:b,c\\d")), "/a\\:b\\,c\\\\d");
        assert_eq!(escape_layer(Path::new("/var/tmp/x")), "/var/tmp/x");
    }

    /// The command's own paths under a sealed root are reached through
    /// directories made in its tmpfs; elsewhere the overlay shows the way.
    #[test]
    fn the_cover_binds_the_commands_own_paths_back() {
        let cover = TmpCover {
            stage: PathBuf::from("/s"),
            sealed: vec![PathBuf::from("/tmp/ci/tack-trials")],
            granted: vec![
                PathBuf::from("/tmp/ci/tack-trials/t-1/workspace"),
                PathBuf::from("/tmp/project"),
            ],
        };
        let MountStep::CoverTmp(CoverSteps {
            layers,
            mask_dirs,
            sealed,
            dirs,
            keep,
            ..
        }) = cover.step().unwrap()
        else {
            panic!("a cover step")
        };
        assert_eq!(layers.to_str().unwrap(), "lowerdir=/s/mask:/tmp");
        assert_eq!(
            mask_dirs,
            vec![
                c"/s/mask/ci".to_owned(),
                c"/s/mask/ci/tack-trials".to_owned(),
                c"/s/mask/ci/tack-trials/t-1".to_owned(),
                c"/s/mask/ci/tack-trials/t-1/workspace".to_owned(),
                c"/s/mask/project".to_owned(),
            ]
        );
        assert_eq!(
            sealed,
            vec![(
                c"/s/sealed-0".to_owned(),
                c"/s/view/ci/tack-trials".to_owned()
            )]
        );
        assert_eq!(
            dirs,
            vec![
                c"/s/view/ci/tack-trials/t-1".to_owned(),
                c"/s/view/ci/tack-trials/t-1/workspace".to_owned(),
            ]
        );
        assert_eq!(keep[1].1, c"/s/view/project".to_owned());
        assert!(cover.shows(Path::new("/tmp/anything/deep")));
        assert!(cover.shows(Path::new("/tmp/ci/tack-trials/t-1/workspace/a")));
        assert!(!cover.shows(Path::new("/tmp/ci/tack-trials/t-2")));
    }
}
