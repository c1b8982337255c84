//! Placements ([`Confinement::placing`]): host directories shown at paths
//! that may not exist on the host. The command gets a root of its own, a
//! tmpfs in its mount namespace, holding a recursive bind of every entry of
//! the host's root (symlinks recreated as symlinks) and the placed
//! directories. A directory on the way to a placement that exists on the
//! host (`/logs` for `/logs/verifier`, say) is rebuilt in the tmpfs the
//! same way, entry by entry, so that its mount point never has to be
//! created on the host. Planned here, before the fork; carried out by
//! `mounts.rs` in the child.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::Confinement;
use crate::child::{MountStep, Node};
use crate::mounts::OLD_ROOT;
use crate::setup_error::{PlaceError, SetupError, c_path};

/// Paths the kernel fills itself: a new root rebuilt there would not be
/// what a program expects of them.
const KERNEL_DIRS: &[&str] = &["/proc", "/dev", "/sys"];

/// The placements of a confinement, ready to mount.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// Building the new root, each with what it does (for errors).
    pub steps: Vec<(MountStep, String)>,
    /// Where writable placements are, in the new root (made writable again
    /// after everything is made read-only).
    pub writable_at: Vec<PathBuf>,
    /// Host directories placed writable, for Landlock: the bind shares the
    /// host directory's inode, which is where Landlock looks.
    pub host_writable: Vec<PathBuf>,
    /// Host directories placed read-only, for Landlock's read rules.
    pub host_readable: Vec<PathBuf>,
    /// Host directories rebuilt in the new root: Landlock rules go on their
    /// entries, which are what the binds show.
    pub rebuilt: Vec<PathBuf>,
}

/// Plans the new root for `confinement`'s placements, mounted first on
/// `scratch` (an empty directory of the command's own on the host); `None`
/// without placements. A placed directory may be inside a `sealed` one
/// (a trial's own tests), not hold one (other trials' workspaces).
pub(crate) fn plan(
    confinement: &Confinement,
    scratch: &Path,
    sealed: &[PathBuf],
) -> Result<Option<Placed>, SetupError> {
    if confinement.placed.is_empty() {
        return Ok(None);
    }
    if Path::new(OLD_ROOT).symlink_metadata().is_ok() {
        return Err(SetupError::OldRootTaken);
    }
    let mut placed = Placed::default();
    let mut places = Vec::new();
    for placement in &confinement.placed {
        check_at(&placement.at)?;
        let host = host_dir(placement)?;
        if sealed.iter().any(|dir| dir.starts_with(&host)) {
            return Err(SetupError::place(
                &placement.at,
                PlaceError::HoldsSealed(host),
            ));
        }
        if placement.writable {
            placed.writable_at.push(placement.at.clone());
            placed.host_writable.push(host.clone());
        } else {
            placed.host_readable.push(host.clone());
        }
        places.push((placement.at.clone(), host));
    }
    check_disjoint(&places)?;
    let rebuilt: BTreeSet<PathBuf> = places
        .iter()
        .flat_map(|(at, _)| at.ancestors().skip(1).map(Path::to_path_buf))
        .collect();
    let old_root = scratch.join(&OLD_ROOT[1..]);
    placed.steps.push((
        MountStep::NewRoot {
            at: c_path(scratch)?,
            old_root: c_path(&old_root)?,
        },
        "a new root".to_string(),
    ));
    // Parents first: a BTreeSet of paths orders `/logs` before `/logs/x`.
    for dir in &rebuilt {
        rebuild(dir, &rebuilt, &places, &mut placed.steps)?;
    }
    for (at, host) in &places {
        placed.steps.push((
            graft(at, Node::Dir, Some(host), false)?,
            format!("{} at {}", host.display(), at.display()),
        ));
    }
    placed
        .steps
        .push((MountStep::DropOldRoot, "detach the old root".to_string()));
    placed.rebuilt = rebuilt.into_iter().filter(|dir| dir.is_dir()).collect();
    Ok(Some(placed))
}

/// An absolute, plain path (no `.` or `..`), not `/`, not where the
/// kernel's own filesystems are.
fn check_at(at: &Path) -> Result<(), SetupError> {
    let plain = at.is_absolute()
        && at
            .components()
            .skip(1)
            .all(|c| matches!(c, Component::Normal(_)))
        && at.parent().is_some();
    if !plain {
        return Err(SetupError::place(at, PlaceError::NotPlain));
    }
    if let Some(dir) = KERNEL_DIRS.iter().find(|dir| at.starts_with(dir)) {
        return Err(SetupError::place(at, PlaceError::KernelDirectory(dir)));
    }
    for ancestor in at.ancestors().skip(1) {
        match ancestor.symlink_metadata() {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(SetupError::place(
                    at,
                    PlaceError::NotADirectoryOnHost(ancestor.to_path_buf()),
                ));
            }
            // Nothing below a missing directory exists either.
            Err(_) => break,
        }
    }
    Ok(())
}

/// No two placements at the same path or one inside another: the inner
/// mount point would have to be created in the outer host directory.
fn check_disjoint(places: &[(PathBuf, PathBuf)]) -> Result<(), SetupError> {
    for (i, (at, _)) in places.iter().enumerate() {
        if let Some((other, _)) = places[i + 1..]
            .iter()
            .find(|(other, _)| other.starts_with(at) || at.starts_with(other))
        {
            return Err(SetupError::place(other, PlaceError::Overlaps(at.clone())));
        }
    }
    Ok(())
}

/// `dir` in the new root: created (but for `/`, the tmpfs itself), then,
/// if the host has it, each host entry grafted but for those rebuilt or
/// placed in turn.
fn rebuild(
    dir: &Path,
    rebuilt: &BTreeSet<PathBuf>,
    places: &[(PathBuf, PathBuf)],
    steps: &mut Vec<(MountStep, String)>,
) -> Result<(), SetupError> {
    if dir.parent().is_some() {
        steps.push((
            graft(dir, Node::Dir, None, false)?,
            format!("{} rebuilt", dir.display()),
        ));
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if rebuilt.contains(&path) || places.iter().any(|(at, _)| *at == path) {
            continue;
        }
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let step = if meta.is_symlink() {
            let Ok(text) = std::fs::read_link(&path) else {
                continue;
            };
            graft(&path, Node::Symlink(c_path(&text)?), None, true)?
        } else {
            let node = if meta.is_dir() { Node::Dir } else { Node::File };
            graft(&path, node, Some(&path), true)?
        };
        steps.push((step, format!("{} from the host", path.display())));
    }
    Ok(())
}

fn graft(
    target: &Path,
    node: Node,
    source: Option<&Path>,
    optional: bool,
) -> Result<MountStep, SetupError> {
    let source = match source {
        Some(source) => Some(c_path(&crate::mounts::below_old_root(source))?),
        None => None,
    };
    Ok(MountStep::Graft {
        target: c_path(target)?,
        node,
        source,
        optional,
    })
}

/// The host directory a placement shows, resolved; it must exist.
pub(crate) fn host_dir(placement: &crate::Placement) -> Result<std::path::PathBuf, SetupError> {
    std::fs::canonicalize(&placement.host)
        .ok()
        .filter(|host| host.is_dir())
        .ok_or_else(|| {
            SetupError::place(
                &placement.at,
                PlaceError::NoHostDirectory(placement.host.clone()),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placing(at: &str) -> Result<Option<Placed>, SetupError> {
        let host = tempfile::tempdir().unwrap();
        let confinement =
            Confinement::strict(Path::new("/w")).placing(host.path(), Path::new(at), true);
        plan(&confinement, Path::new("/scratch"), &[])
    }

    #[test]
    fn odd_places_are_refused_with_a_reason() {
        for (at, why) in [
            ("app", "absolute"),
            ("/", "absolute path below /"),
            ("/app/../etc", "without `.` or `..`"),
            ("/proc/app", "/proc belongs to the kernel"),
        ] {
            let error = placing(at).unwrap_err().to_string();
            assert!(error.contains(why), "{at}: {error}");
        }
        let host = tempfile::tempdir().unwrap();
        let nested = Confinement::strict(Path::new("/w"))
            .placing(host.path(), Path::new("/logs"), true)
            .placing(host.path(), Path::new("/logs/verifier"), true);
        let error = plan(&nested, Path::new("/s"), &[]).unwrap_err().to_string();
        assert!(error.contains("overlaps the placement at /logs"), "{error}");
        let missing = Confinement::strict(Path::new("/w")).placing(
            Path::new("/no/such/dir"),
            Path::new("/app"),
            false,
        );
        let error = plan(&missing, Path::new("/s"), &[])
            .unwrap_err()
            .to_string();
        assert!(error.contains("/no/such/dir does not exist"), "{error}");
        let trials = host.path().canonicalize().unwrap();
        let sealed = [trials.join("sealed")];
        let holding = Confinement::strict(Path::new("/w")).placing(&trials, Path::new("/t"), false);
        let error = plan(&holding, Path::new("/s"), &sealed)
            .unwrap_err()
            .to_string();
        assert!(error.contains("holds a sealed directory"), "{error}");
        let inside = Confinement::strict(Path::new("/w")).placing(&trials, Path::new("/t"), false);
        assert!(
            plan(
                &inside,
                Path::new("/s"),
                &[trials.parent().unwrap().to_path_buf()]
            )
            .is_ok()
        );
    }

    #[test]
    fn the_new_root_grafts_the_hosts_entries_and_the_placement() {
        let placed = placing("/tack-test-nowhere/deeper").unwrap().unwrap();
        let targets: Vec<&str> = placed.steps.iter().map(|(_, what)| what.as_str()).collect();
        assert_eq!(targets.first(), Some(&"a new root"));
        assert_eq!(targets.last(), Some(&"detach the old root"));
        assert!(targets.contains(&"/usr from the host"), "{targets:?}");
        assert!(
            targets.contains(&"/tack-test-nowhere rebuilt"),
            "{targets:?}"
        );
        assert!(targets[targets.len() - 2].ends_with(" at /tack-test-nowhere/deeper"));
        assert_eq!(
            placed.writable_at,
            vec![PathBuf::from("/tack-test-nowhere/deeper")]
        );
        assert!(placed.rebuilt.contains(&PathBuf::from("/")));
        assert!(
            !placed
                .rebuilt
                .contains(&PathBuf::from("/tack-test-nowhere"))
        );
    }
}
