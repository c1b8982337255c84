//! The capabilities a confined command keeps. It runs as root of its own
//! user namespace, which gives it every capability there; it keeps only
//! what a container's root gets by default (Docker's set: owning files,
//! switching users, killing its own processes…). Without
//! `CAP_SYS_PTRACE` it cannot reach a trial's sandbox init through
//! `/proc/1/mem` (the init is not dumpable); without `CAP_SYS_ADMIN` it
//! cannot change what the namespaces hold. Runs between fork and exec:
//! no allocation.

#![allow(unsafe_code)] // prctl between fork and exec; each block says why

use std::io;

use crate::seccomp::SetIdFiles;

/// Docker's default capabilities, by number (linux/capability.h).
const KEPT: [u32; 14] = [
    0,  // CAP_CHOWN
    1,  // CAP_DAC_OVERRIDE
    3,  // CAP_FOWNER
    4,  // CAP_FSETID
    5,  // CAP_KILL
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    8,  // CAP_SETPCAP
    10, // CAP_NET_BIND_SERVICE
    13, // CAP_NET_RAW
    18, // CAP_SYS_CHROOT
    27, // CAP_MKNOD
    29, // CAP_AUDIT_WRITE
    31, // CAP_SETFCAP
];

/// Above any capability number this kernel or a later one defines.
const LAST: u32 = 63;

/// Becomes the image's user `uid`/`gid` (no supplementary groups), which
/// clears every capability as well: after the bounding set is dropped,
/// before no_new_privs.
pub(crate) fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: setgroups with no list, setresgid and setresuid take integers.
    let calls = unsafe {
        [
            libc::setgroups(0, std::ptr::null()),
            libc::setresgid(gid, gid, gid),
            libc::setresuid(uid, uid, uid),
        ]
    };
    if calls.iter().any(|ret| *ret < 0) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `CAP_SETFCAP`: writing `security.capability`, a file's capabilities.
const SETFCAP: u32 = 31;

/// Drops every other capability from the bounding set, so the program
/// exec'd next cannot hold it; `CAP_SETFCAP` too where set-id files are
/// refused (a file given capabilities on the host is one).
pub(crate) fn drop_bounding(set_id: SetIdFiles) -> io::Result<()> {
    for cap in 0..=LAST {
        if KEPT.contains(&cap) && !(cap == SETFCAP && set_id == SetIdFiles::Refused) {
            continue;
        }
        // SAFETY: prctl(PR_CAPBSET_DROP) takes integers only.
        let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
        if ret < 0 {
            let error = io::Error::last_os_error();
            // Past the kernel's last capability: nothing more to drop.
            if error.raw_os_error() == Some(libc::EINVAL) {
                return Ok(());
            }
            return Err(error);
        }
    }
    Ok(())
}
