//! The mounts of a command in an image's filesystem ([`ImageRoot`]),
//! planned in the parent before the fork: the overlay as the new root, a
//! few of the host's devices, the placed directories, then the host's root
//! dropped; and the writable layer made ready for the image's root.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use crate::child::{HostOverlay, MountStep, Node};
use crate::mounts::OLD_ROOT;
use crate::setup_error::{SetupError, c_path};
use crate::{Confinement, IMAGE_ID_BASE, IMAGE_IDS, ImageRoot};

/// What a command with the host's network needs of the host's files.
const NAME_SERVICE: [&str; 2] = ["/etc/resolv.conf", "/etc/hosts"];

/// A directory the child opens onto the descriptor reserved for it
/// (`ChildPlan::reach`).
pub(crate) type Reach = (CString, OwnedFd);

/// The mounts of a command in an image.
pub(crate) struct ImageMounts {
    /// Each step, with what it does (for errors).
    pub steps: Vec<(MountStep, String)>,
    pub reach: Vec<Reach>,
    pub overlay: HostOverlay,
}

/// The uid and gid maps of an image's user namespace.
pub(crate) fn id_maps() -> (Vec<u8>, Vec<u8>) {
    let map = format!("0 {IMAGE_ID_BASE} {IMAGE_IDS}\n").into_bytes();
    (map.clone(), map)
}

/// The mount steps (with what each does, for errors), the mount point of
/// the overlay being `scratch` (an empty directory of the command's own),
/// and the directories the overlay is made of, for the child to reach.
pub(crate) fn mount_steps(
    confinement: &Confinement,
    image: &ImageRoot,
    scratch: &Path,
) -> Result<ImageMounts, SetupError> {
    let at = scratch.to_path_buf();
    let overlay = host_overlay(image, c_path(&at)?)?;
    let mut steps = vec![
        (MountStep::MakePrivate, "make / private".to_string()),
        (
            MountStep::OverlayRoot {
                at: c_path(&at)?,
                old_root: c_path(&at.join(OLD_ROOT.trim_start_matches('/')))?,
            },
            format!("{} as the root", image.rootfs.display()),
        ),
    ];
    device_steps(&mut steps)?;
    // With the host's network, its name service: a container engine gives
    // a container these two files as well. Read-only: they are the host's.
    if !confinement.own_network_namespace() {
        for file in NAME_SERVICE {
            steps.push((
                graft(Path::new(file), Path::new(file), Node::File, false)?,
                format!("the host's {file}"),
            ));
            steps.push((
                MountStep::ReadOnly(c_path(Path::new(file))?),
                format!("{file} read-only"),
            ));
        }
    }
    let reach = placement_steps(confinement, &mut steps)?;
    steps.push((dirs(Path::new("/proc"))?, "/proc".to_string()));
    steps.push((MountStep::Proc, "a fresh /proc".to_string()));
    steps.push((MountStep::DropOldRoot, "drop the host's root".to_string()));
    steps.push((dirs(Path::new("/dev/shm"))?, "/dev/shm".to_string()));
    steps.push((
        MountStep::Tmpfs(c"/dev/shm".to_owned()),
        "private /dev/shm".to_string(),
    ));
    // An image without /tmp gets one (its own is kept, as a container's is).
    if !image.rootfs.join("tmp").is_dir() {
        steps.push((dirs(Path::new("/tmp"))?, "/tmp".to_string()));
        steps.push((MountStep::Tmpfs(c"/tmp".to_owned()), "a /tmp".to_string()));
    }
    Ok(ImageMounts {
        steps,
        reach,
        overlay,
    })
}

/// `/dev` as a container has it: the host's devices a container sees too,
/// and terminals of the command's own.
fn device_steps(steps: &mut Vec<(MountStep, String)>) -> Result<(), SetupError> {
    steps.push((dirs(Path::new("/dev"))?, "/dev".to_string()));
    for device in crate::landlock::DEVICES {
        steps.push((
            graft(Path::new(device), Path::new(device), Node::File, true)?,
            device.to_string(),
        ));
    }
    // Terminals of the command's own, as a container has them.
    steps.push((dirs(Path::new("/dev/pts"))?, "/dev/pts".to_string()));
    steps.push((
        MountStep::Devpts(c"/dev/pts".to_owned()),
        "a devpts of its own on /dev/pts".to_string(),
    ));
    // Its ptmx at /dev/ptmx: bound, not linked, so that what the image or
    // an earlier command of the trial left there does not matter.
    steps.push((
        MountStep::Graft {
            target: c"/dev/ptmx".to_owned(),
            node: Node::File,
            source: Some(c"/dev/pts/ptmx".to_owned()),
            optional: false,
        },
        "/dev/ptmx".to_string(),
    ));
    Ok(())
}

/// The trial's directories placed in the image (its workspace at
/// `WORKDIR`, `/logs/agent`, …), each reached through a descriptor held
/// until the mounts are made: the steps are added to `steps`, the
/// descriptors returned.
fn placement_steps(
    confinement: &Confinement,
    steps: &mut Vec<(MountStep, String)>,
) -> Result<Vec<Reach>, SetupError> {
    let mut reach = Vec::new();
    for placement in &confinement.placed {
        let host = crate::places::host_dir(placement)?;
        let shown = placement.at.display().to_string();
        if let Some(parent) = placement.at.parent() {
            steps.push((dirs(parent)?, shown.clone()));
        }
        // Through a descriptor, as the overlay's layers are: the image's
        // root may not walk the host's path to it.
        let through = reserve(&host)?;
        let fd = format!("/proc/self/fd/{}", through.1.as_raw_fd());
        reach.push(through);
        steps.push((
            graft(&placement.at, Path::new(&fd), Node::Dir, false)?,
            shown.clone(),
        ));
        if !placement.writable {
            steps.push((
                MountStep::ReadOnly(c_path(&placement.at)?),
                format!("{shown} read-only"),
            ));
        }
    }
    Ok(reach)
}

/// The overlay on `at`, with the trial's layer made: its upper directory
/// is the overlay's root directory, so it is owned by the image's root and
/// has the image root's mode.
///
/// Each directory is named as `/proc/self/fd/N`, the child opening it
/// onto a descriptor reserved here once in its own mount namespace; this
/// also keeps `,` and `:` in a path out of the option string.
fn host_overlay(image: &ImageRoot, at: CString) -> Result<HostOverlay, SetupError> {
    let rootfs = std::fs::canonicalize(&image.rootfs).map_err(|source| SetupError::Image {
        path: image.rootfs.clone(),
        source,
    })?;
    let (upper, work) = (image.layer.join("upper"), image.layer.join("work"));
    for dir in [&upper, &work] {
        own_dir(dir, &rootfs)?;
    }
    let layers = [&rootfs, &upper, &work]
        .into_iter()
        .map(|path| reserve(path))
        .collect::<Result<Vec<_>, _>>()?;
    let [lower, upper, work] = [0, 1, 2].map(|i| layers[i].1.as_raw_fd());
    // redirect_dir: a directory of the image can be renamed (dpkg does).
    let options = format!(
        "lowerdir=/proc/self/fd/{lower},upperdir=/proc/self/fd/{upper},\
         workdir=/proc/self/fd/{work},redirect_dir=on"
    );
    let options = CString::new(options).map_err(|_| SetupError::NulByte(image.layer.clone()))?;
    Ok(HostOverlay {
        at,
        options,
        layers,
    })
}

/// A descriptor reserved for the child to open `path` onto.
fn reserve(path: &Path) -> Result<Reach, SetupError> {
    let reserved = std::fs::File::open("/dev/null").map_err(|source| SetupError::Image {
        path: path.to_path_buf(),
        source,
    })?;
    Ok((c_path(path)?, OwnedFd::from(reserved)))
}

/// Makes `dir` (if missing) owned by the image's root, with `like`'s mode.
fn own_dir(dir: &Path, like: &Path) -> Result<(), SetupError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let failed = |source| SetupError::Image {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    std::os::unix::fs::chown(dir, Some(IMAGE_ID_BASE), Some(IMAGE_ID_BASE)).map_err(failed)?;
    let mode = std::fs::metadata(like).map_err(failed)?.mode() & 0o7777;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(failed)
}

/// Binds `host` (beneath the old root) at `at` in the image.
fn graft(at: &Path, host: &Path, node: Node, optional: bool) -> Result<MountStep, SetupError> {
    let source = crate::mounts::below_old_root(host);
    Ok(MountStep::Graft {
        target: c_path(at)?,
        node,
        source: Some(c_path(&source)?),
        optional,
    })
}

/// Makes `path` and each directory on the way to it, in the new root.
fn dirs(path: &Path) -> Result<MountStep, SetupError> {
    let mut prefix = PathBuf::from("/");
    let mut made = Vec::new();
    for component in path.components() {
        if let Component::Normal(name) = component {
            prefix.push(name);
            made.push(c_path(&prefix)?);
        }
    }
    Ok(MountStep::MakeDirs(made))
}
