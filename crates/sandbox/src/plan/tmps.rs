//! A confined command's tmps: its private one (in [`tmp_root`], swept when
//! a killed run left it), one shown at a path of the task's (`/tmp` for
//! scripts written for a container), and the system tmp as it sees it:
//! covered, but for what it may use there ([`MountStep::Cover`]).

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Confinement;
use crate::child::{CoverSteps, MountStep};
use crate::held::HeldDir;
use crate::mounts::below_old_root;
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

    /// An empty directory beside the tmp, where the `n`th cover is built
    /// ([`MountStep::Cover`]).
    pub(super) fn stage(&self, n: usize) -> Result<PathBuf, SetupError> {
        use std::os::unix::fs::DirBuilderExt;
        let stage = self.held.path().join(format!("cover-{n}"));
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
/// through a read-only overlay ([`MountStep::Cover`]), where no socket
/// answers; [`SHARED_TMPS`] are all covered so.
pub(crate) const SYSTEM_TMP: &str = "/tmp";

/// The directories every user may make files in, so other programs' sockets
/// too: the system tmp and the one that outlives a reboot.
pub const SHARED_TMPS: [&str; 2] = [SYSTEM_TMP, "/var/tmp"];

/// How a directory is covered ([`MountStep::Cover`]).
pub(super) struct TmpCover {
    /// The covered directory.
    at: PathBuf,
    /// Where overlayfs reads it: `at`, or in a new root the host's, below
    /// the old root (the new root may rebuild it entry by entry, whose
    /// binds an overlay does not look through, around a placement in it).
    lower: PathBuf,
    /// Where it is built: a directory of the private tmp, in a new root
    /// reached below the old root too (a tmp shown at `/tmp` hides it).
    stage: PathBuf,
    /// tack's roots in it (the trials' workspaces, the checks, the private
    /// tmps), each covered by a directory of the stage holding only the
    /// command's own paths inside.
    sealed: Vec<PathBuf>,
    /// The command's own paths in it, bound back as they are.
    granted: Vec<PathBuf>,
}

impl TmpCover {
    pub(super) fn step(&self) -> Result<MountStep, SetupError> {
        let in_view = |path: &Path| {
            let below = path.strip_prefix(&self.at).unwrap_or(path);
            self.stage.join("view").join(below)
        };
        // Every place a mount goes in the view, and the way down to it, is a
        // directory of the mask, the overlay's upper layer: there whether or
        // not the host's directory has it, now or later (a root another tack
        // makes after these walls, a file squatting a root's name).
        let in_mask = |path: &Path| {
            let below = path.strip_prefix(&self.at).unwrap_or(path);
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
            "lowerdir={}:{}",
            escape_layer(&self.stage.join("mask")),
            escape_layer(&self.lower)
        );
        Ok(MountStep::Cover(CoverSteps {
            at: c_path(&self.at)?,
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

    /// The covered directory.
    pub(super) fn at(&self) -> &Path {
        &self.at
    }

    /// Whether `path` is in sight once covered: all of the directory is,
    /// but what is inside tack's roots other than the command's own.
    pub(super) fn shows(&self, path: &Path) -> bool {
        !self.sealed.iter().any(|root| path.starts_with(root))
            || self.granted.iter().any(|own| path.starts_with(own))
    }
}

/// The steps of `covers`, each with what it is for.
pub(super) fn cover_steps(
    covers: &[TmpCover],
    steps: &mut Vec<MountStep>,
    targets: &mut Vec<String>,
) -> Result<(), SetupError> {
    for cover in covers {
        steps.push(cover.step()?);
        targets.push(format!(
            "{} covered, but for what the command may use",
            cover.at().display()
        ));
    }
    Ok(())
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
        at: tmp.to_path_buf(),
        lower: tmp.to_path_buf(),
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

/// The covers of a confined command ([`TmpCover`]): of each of
/// [`SHARED_TMPS`], and of the directory holding each of tack's `roots`
/// found in none of them (a `TMPDIR` elsewhere), so that no socket there
/// answers and no other trial's files are in sight. The command's own paths
/// there (`writable`, and what is placed there) are bound back. Not
/// covered: a directory something is placed at or above, the tmp shown at
/// `tmp_at` included (the host's is out of sight). In a new root the covers
/// are made while the host's root is beneath it, and read the host's
/// directories and their stages there. (No writable path holds a covered
/// directory: `host_writable` refuses one.)
pub(super) fn tmp_covers(
    confinement: &Confinement,
    writable: &[PathBuf],
    roots: &[PathBuf],
    tmp: &PrivateTmp,
    in_new_root: bool,
) -> Result<Vec<TmpCover>, SetupError> {
    let placed_at =
        || (confinement.placed.iter().map(|p| &p.at)).chain(confinement.tmp_at.as_ref());
    let mut dirs: Vec<PathBuf> = (SHARED_TMPS.iter().map(PathBuf::from))
        .filter(|dir| dir.is_dir() && !dir.is_symlink())
        .collect();
    for root in roots {
        if dirs.iter().any(|dir| root.starts_with(dir)) {
            continue;
        }
        if let Some(parent) = root.parent().filter(|p| p.parent().is_some() && p.is_dir()) {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs.sort();
    dirs.dedup_by(|later, earlier| later.starts_with(&*earlier));
    // What is placed at or above a directory hides the host's there.
    dirs.retain(|dir| !placed_at().any(|at| dir.starts_with(at)));
    // What is placed inside one is the command's own there, as its
    // writable paths are: bound into the cover from where the new root
    // shows it (the covers are made once it is built).
    let own: Vec<PathBuf> = (writable.iter()).chain(placed_at()).cloned().collect();
    // The stages are in the private tmp: the cover over it goes last (in a
    // new root they are reached below the old root, which no cover hides).
    dirs.sort_by_key(|dir| tmp.path().starts_with(dir));
    let below = |paths: &[PathBuf], dir: &Path| {
        let mut below: Vec<PathBuf> = (paths.iter())
            .filter(|path| path.starts_with(dir) && *path != dir)
            .cloned()
            .collect();
        below.sort();
        // A path inside another comes with it.
        below.dedup_by(|later, earlier| later.starts_with(&*earlier));
        below
    };
    let mut covers = Vec::with_capacity(dirs.len());
    for (n, at) in dirs.into_iter().enumerate() {
        let (stage, lower) = match in_new_root {
            true => (below_old_root(&tmp.stage(n)?), below_old_root(&at)),
            false => (tmp.stage(n)?, at.clone()),
        };
        covers.push(TmpCover {
            lower,
            stage,
            // A root not made yet is covered all the same: the mask makes
            // its place.
            sealed: below(roots, &at),
            granted: below(&own, &at),
            at,
        });
    }
    Ok(covers)
}

/// `path` made canonical, or if it is not there yet, its parent.
fn canonical_place(path: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    match (path.parent().map(std::fs::canonicalize), path.file_name()) {
        (Some(Ok(parent)), Some(name)) => parent.join(name),
        _ => path.to_path_buf(),
    }
}

/// tack's roots a command is kept out of, but for its own paths: the
/// confinement's sealed directories, the private tmps' root, and that of a
/// tack with `TMPDIR` unset; canonical where they exist, as given where
/// they do not yet (their parent made canonical).
pub(super) fn tack_roots(confinement: &Confinement) -> Vec<PathBuf> {
    let others = Path::new(SYSTEM_TMP).join(TMP_ROOT);
    (confinement.sealed.iter())
        .chain([&tmp_root(), &others])
        .map(|path| canonical_place(path))
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

    /// The shared tmps are covered, and the directory holding a root found
    /// in neither; the cover over the private tmp (where the stages are) is
    /// made last; the tmp shown at `tmp_at` is not covered.
    #[test]
    fn covers_go_over_the_shared_tmps_and_the_directories_holding_roots() {
        // Only planned: nothing is made there (but the stages, in the tmp).
        let elsewhere = PathBuf::from("/usr");
        let root = elsewhere.join("tack-trials-not-made");
        let confinement = Confinement::strict(&elsewhere).sealing([&root]);
        let tmp = PrivateTmp::new().unwrap();
        let writable = vec![elsewhere.join("share")];
        let roots = tack_roots(&confinement);
        let covers = tmp_covers(&confinement, &writable, &roots, &tmp, false).unwrap();
        let at: Vec<&Path> = covers.iter().map(TmpCover::at).collect();
        for dir in SHARED_TMPS.map(Path::new) {
            assert_eq!(
                at.contains(&dir),
                dir.is_dir() && !dir.is_symlink(),
                "{at:?}"
            );
        }
        assert!(tmp.path().starts_with(at.last().unwrap()), "{at:?}");
        let cover = covers.iter().find(|c| c.at == elsewhere).expect("a cover");
        assert_eq!(cover.sealed, vec![root.clone()]);
        assert_eq!(cover.granted, writable);
        assert!(!cover.shows(&root.join("t-1")));

        let shown = confinement.clone().with_tmp_at(Path::new("/tmp"), None);
        let tmp = PrivateTmp::new().unwrap();
        let covers = tmp_covers(&shown, &writable, &roots, &tmp, true).unwrap();
        assert!(covers.iter().all(|c| !c.at.starts_with("/tmp")));
        // In the new root, the stages and the directories read are the
        // host's, below the old root (the shown tmp hides the private one).
        let stages = below_old_root(tmp.path().parent().unwrap());
        assert!(
            covers.iter().all(|c| c.stage.starts_with(&stages)),
            "{stages:?}"
        );
        assert!(covers.iter().all(|c| c.lower == below_old_root(&c.at)));
        // Placed inside a covered directory: bound into its cover; at or
        // above it: the host's is out of sight, so no cover.
        let inside = (confinement.clone()).placing(&elsewhere, Path::new("/var/tmp/app"), true);
        let tmp = PrivateTmp::new().unwrap();
        let covers = tmp_covers(&inside, &writable, &roots, &tmp, true).unwrap();
        if let Some(cover) = covers.iter().find(|c| c.at == Path::new("/var/tmp")) {
            assert_eq!(cover.granted, vec![PathBuf::from("/var/tmp/app")]);
        }
        let above = confinement.placing(&elsewhere, Path::new("/var"), true);
        let tmp = PrivateTmp::new().unwrap();
        let covers = tmp_covers(&above, &writable, &roots, &tmp, true).unwrap();
        assert!(covers.iter().all(|c| c.at != Path::new("/var/tmp")));
    }

    /// The command's own paths under a sealed root are reached through
    /// directories made in its tmpfs; elsewhere the overlay shows the way.
    #[test]
    fn the_cover_binds_the_commands_own_paths_back() {
        let cover = TmpCover {
            at: PathBuf::from("/tmp"),
            lower: PathBuf::from("/tmp"),
            stage: PathBuf::from("/s"),
            sealed: vec![PathBuf::from("/tmp/ci/tack-trials")],
            granted: vec![
                PathBuf::from("/tmp/ci/tack-trials/t-1/workspace"),
                PathBuf::from("/tmp/project"),
            ],
        };
        let MountStep::Cover(CoverSteps {
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
