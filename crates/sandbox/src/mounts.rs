//! Mount operations in the child's new mount namespace (raw syscalls only,
//! see child.rs).

#![allow(unsafe_code)] // raw mount syscalls between fork and exec; each block says why

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;

use crate::child::{CoverSteps, MountStep, Node, check};

/// Where the host's root stays while a new root is built (see
/// [`MountStep::NewRoot`]); removed before the command runs.
pub(crate) const OLD_ROOT: &str = "/.tack-old-root";

/// Where a host path is, in a new root, while the host's root is beneath it.
pub(crate) fn below_old_root(host: &std::path::Path) -> std::path::PathBuf {
    std::path::Path::new(OLD_ROOT).join(host.strip_prefix("/").unwrap_or(host))
}

/// The `mount_setattr` flag the libc crate does not name.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub(crate) fn mount(step: &MountStep) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    match step {
        MountStep::MakePrivate => sys_mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            none,
        ),
        MountStep::AllReadOnly => set_attr(c"/", MOUNT_ATTR_RDONLY, 0, true),
        MountStep::Writable(path) => {
            bind(path)?;
            set_attr(path, 0, MOUNT_ATTR_RDONLY, false)
        }
        MountStep::ReadOnly(path) => {
            bind(path)?;
            set_attr(path, MOUNT_ATTR_RDONLY, 0, true)
        }
        // Hidden: an empty, read-only, tiny tmpfs over the path.
        MountStep::Hide(path) => tmpfs(
            path,
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"size=4k,mode=0555",
        ),
        MountStep::Tmpfs(path) => tmpfs(
            path,
            libc::MS_NOSUID | libc::MS_NODEV,
            c"size=512m,mode=1777",
        ),
        MountStep::Devpts(path) => {
            let devpts = c"devpts".as_ptr();
            sys_mount(
                devpts,
                path.as_ptr(),
                devpts,
                libc::MS_NOSUID | libc::MS_NOEXEC,
                c"newinstance,ptmxmode=0666,mode=0620".as_ptr(),
            )
        }
        MountStep::NewRoot { at, old_root } => new_root(at, old_root),
        MountStep::OverlayRoot { at, old_root } => overlay_root(at, old_root),
        MountStep::Proc => mount_proc(),
        MountStep::MakeDirs(dirs) => {
            for dir in dirs {
                make(dir, &Node::Dir)?;
            }
            Ok(())
        }
        MountStep::Graft {
            target,
            node,
            source,
            optional,
        } => {
            make(target, node)?;
            let Some(source) = source else { return Ok(()) };
            let flags = libc::MS_BIND | libc::MS_REC;
            match sys_mount(source.as_ptr(), target.as_ptr(), none, flags, none) {
                Err(e) if *optional && e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                done => done,
            }
        }
        MountStep::Cover(cover) => cover_tmp(cover),
        // SAFETY: umount2 and rmdir read a NUL-terminated path.
        MountStep::DropOldRoot => unsafe {
            check(libc::umount2(OLD_ROOT_C.as_ptr(), libc::MNT_DETACH) as libc::c_long)?;
            check(libc::rmdir(OLD_ROOT_C.as_ptr()) as libc::c_long)
        },
    }
}

const OLD_ROOT_C: &std::ffi::CStr = c"/.tack-old-root";

/// See [`MountStep::Cover`].
fn cover_tmp(cover: &CoverSteps) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    tmpfs(&cover.stage, flags, c"size=1m,mode=0755")?;
    make(&cover.mask, &Node::Dir)?;
    for dir in &cover.mask_dirs {
        make(dir, &Node::Dir)?;
    }
    make(&cover.view, &Node::Dir)?;
    let bind = |source: &CString, target: &CString| {
        let flags = libc::MS_BIND | libc::MS_REC;
        sys_mount(source.as_ptr(), target.as_ptr(), none, flags, none)
    };
    let overlay = c"overlay".as_ptr();
    match sys_mount(
        overlay,
        cover.view.as_ptr(),
        overlay,
        flags | libc::MS_RDONLY,
        cover.layers.as_ptr().cast(),
    ) {
        // A mount below the directory: the mask alone.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => bind(&cover.mask, &cover.view)?,
        done => done?,
    }
    for (stage_dir, root) in &cover.sealed {
        make(stage_dir, &Node::Dir)?;
        bind(stage_dir, root)?;
    }
    for dir in &cover.dirs {
        make(dir, &Node::Dir)?;
    }
    for (source, target) in &cover.keep {
        bind(source, target)?;
    }
    sys_mount(
        cover.view.as_ptr(),
        cover.at.as_ptr(),
        none,
        libc::MS_MOVE,
        none,
    )
}

/// The tmpfs becomes the root; the host's root moves beneath it. Its mode
/// lets the command list and cross it; it is made read-only with the rest.
fn new_root(at: &CString, old_root: &CString) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    let tmpfs = c"tmpfs".as_ptr();
    sys_mount(
        tmpfs,
        at.as_ptr(),
        tmpfs,
        flags,
        c"size=1m,mode=0755".as_ptr(),
    )?;
    pivot_into(at, old_root)
}

/// In a mount namespace of the child's own, entered here, the image's
/// overlay on `overlay.at` (see [`crate::child::HostOverlay`]); the user
/// namespace entered next gets a copy of this namespace, overlay included.
pub(crate) fn host_overlay(overlay: &crate::child::HostOverlay) -> io::Result<()> {
    // SAFETY: unshare and mount take flags and NUL-terminated strings.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS) as libc::c_long)?;
    }
    let none = std::ptr::null();
    sys_mount(
        none,
        c"/".as_ptr(),
        none,
        libc::MS_REC | libc::MS_PRIVATE,
        none,
    )?;
    for (path, at) in &overlay.layers {
        crate::idmap::open_onto(path, at.as_raw_fd())?;
    }
    let kind = c"overlay".as_ptr();
    sys_mount(
        kind,
        overlay.at.as_ptr(),
        kind,
        libc::MS_NODEV,
        overlay.options.as_ptr().cast(),
    )
}

/// An image's overlay becomes the root; the host's root moves beneath it.
fn overlay_root(at: &CString, old_root: &CString) -> io::Result<()> {
    // The overlay came from a more privileged namespace, so it is locked
    // to its place, and a locked mount cannot become the root: a bind of
    // it, made here, can.
    let none = std::ptr::null();
    sys_mount(at.as_ptr(), at.as_ptr(), none, libc::MS_BIND, none)?;
    pivot_into(at, old_root)
}

/// Makes the mount on `at` the root, the old one beneath it at `old_root`.
fn pivot_into(at: &CString, old_root: &CString) -> io::Result<()> {
    // SAFETY: mkdir, pivot_root and chdir read NUL-terminated paths.
    unsafe {
        check(libc::mkdir(old_root.as_ptr(), 0o700) as libc::c_long)?;
        check(libc::syscall(
            libc::SYS_pivot_root,
            at.as_ptr(),
            old_root.as_ptr(),
        ))?;
        check(libc::chdir(c"/".as_ptr()) as libc::c_long)
    }
}

/// Creates the mount point (or symlink) of a graft in the new root; a
/// directory or file already there (in an image) is used as it is.
fn make(target: &CString, node: &Node) -> io::Result<()> {
    match make_new(target, node) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !matches!(node, Node::Symlink(_)) => {
            Ok(())
        }
        made => made,
    }
}

fn make_new(target: &CString, node: &Node) -> io::Result<()> {
    // SAFETY: each call reads NUL-terminated paths; the file descriptor is
    // closed at once.
    unsafe {
        match node {
            Node::Dir => check(libc::mkdir(target.as_ptr(), 0o755) as libc::c_long),
            Node::Symlink(text) => {
                check(libc::symlink(text.as_ptr(), target.as_ptr()) as libc::c_long)
            }
            Node::File => {
                let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
                let fd = libc::open(target.as_ptr(), flags, 0o644);
                check(fd as libc::c_long)?;
                libc::close(fd);
                Ok(())
            }
        }
    }
}

fn bind(path: &CString) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    let flags = libc::MS_BIND | libc::MS_REC;
    sys_mount(path.as_ptr(), path.as_ptr(), none, flags, none)
}

pub(crate) fn mount_proc() -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let proc = c"proc".as_ptr();
    sys_mount(proc, c"/proc".as_ptr(), proc, flags, std::ptr::null())
}

/// Mounts a fresh tmpfs at `path`.
fn tmpfs(
    path: &std::ffi::CStr,
    flags: libc::c_ulong,
    data: &std::ffi::CStr,
) -> std::io::Result<()> {
    sys_mount(
        c"tmpfs".as_ptr(),
        path.as_ptr(),
        c"tmpfs".as_ptr(),
        flags,
        data.as_ptr(),
    )
}

fn sys_mount(
    source: *const libc::c_char,
    target: *const libc::c_char,
    fstype: *const libc::c_char,
    flags: libc::c_ulong,
    data: *const libc::c_char,
) -> io::Result<()> {
    // SAFETY: every pointer is null or a NUL-terminated string that
    // outlives the call.
    let ret = unsafe { libc::mount(source, target, fstype, flags, data.cast()) };
    check(ret as libc::c_long)
}

fn set_attr(path: &std::ffi::CStr, set: u64, clear: u64, recursive: bool) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: mount_setattr reads `attr` (on our stack) for its given size.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_root_has_one_name() {
        assert_eq!(OLD_ROOT_C.to_str().ok(), Some(OLD_ROOT));
    }

    #[test]
    fn mount_attr_has_the_kernel_size() {
        assert_eq!(std::mem::size_of::<MountAttr>(), 32);
    }
}
