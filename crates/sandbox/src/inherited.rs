//! Descriptors tack inherited from whatever started it: a shell's
//! `exec 9>>file`, make's jobserver pipes, a CI runner's. Left open, each
//! passes through every exec — the spawner, a trial's init, every command —
//! and so through every wall: a confined command could write to the host
//! file behind one. tack marks them all close-on-exec first thing; what it
//! means a child to have, it passes on purpose.

/// Marks every descriptor above stderr close-on-exec. Best effort: with a
/// kernel before 5.11 (no `CLOSE_RANGE_CLOEXEC`), each descriptor listed
/// in `/proc/self/fd` is marked in turn.
pub fn keep_inherited_descriptors_from_children() {
    #[allow(unsafe_code)]
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing; it sets
    // a flag on the open descriptors in the range.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if marked {
        return;
    }
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<libc::c_int> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        #[allow(unsafe_code)]
        // SAFETY: F_SETFD on a descriptor number changes only its flags; one
        // that closed since it was listed (the directory's own) fails, harmlessly.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}
