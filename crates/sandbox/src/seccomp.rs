//! The seccomp filters, compiled once in the parent (compiling allocates)
//! and installed in the child after the namespace and mount setup, which
//! needs the very calls they deny.
//!
//! Two filters, both installed (the kernel applies the stricter verdict):
//! the deny list below answers EPERM; a small hand-written guard answers
//! ENOSYS for `clone3` and `openat2` (their flags and modes sit behind a
//! pointer, so only refusing them keeps new namespaces and set-id files
//! out; glibc falls back to `clone` on ENOSYS, and `openat2` is Linux
//! 5.6's, so its callers have a fallback) and for x32 system call numbers,
//! which would otherwise bypass the x86-64 table. Commands whose files land
//! on the host get a third ([`SetIdFiles`]), and narrowed sockets a fourth.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};

/// Calls no agent command needs and every escape loves: new namespaces and
/// mounts, tracing other processes, kernel keyrings, eBPF, perf, io_uring
/// (its operations bypass seccomp), module and kexec loading.
const DENIED: &[(&str, libc::c_long)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("kexec_load", libc::SYS_kexec_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
];

/// `clone` flags that would create a namespace (and with it, privileges in
/// a fresh user namespace).
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Which sockets a command may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Sockets {
    /// Any (`workspace_write`).
    Any,
    /// AF_UNIX only (`strict`: its network namespace has nothing else).
    UnixOnly,
    /// AF_UNIX, and TCP over IPv4 and IPv6: the network narrowed to ports
    /// by Landlock, whose rules cover TCP only; UDP (DNS included), raw,
    /// SCTP, MPTCP and other families would go round them.
    UnixAndTcp,
}

/// Whether a command may make set-user-id and set-group-id files. On the
/// host it may not: what it writes lands there as its user's (root's, when
/// tack runs as root), and a set-uid copy of a shell left in a workspace
/// would be anyone's way to that user who can reach it (a path shows in
/// `/proc/PID/mountinfo`). In an image's filesystem its ids are the image's
/// own, mapped to unused ones on the host, and root there may `chmod`.
/// (File capabilities need `CAP_SETFCAP`, dropped with it: `caps`.)
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum SetIdFiles {
    #[default]
    Refused,
    Allowed,
}

/// Names of everything the filters refuse, for `tack doctor`.
pub fn denied_calls(network: bool) -> Vec<String> {
    let sockets = if network {
        Sockets::Any
    } else {
        Sockets::UnixOnly
    };
    denied_calls_for(sockets)
}

pub(crate) fn denied_calls_for(sockets: Sockets) -> Vec<String> {
    let mut names: Vec<String> = DENIED.iter().map(|(name, _)| name.to_string()).collect();
    names.push("clone with namespace flags".to_string());
    names.push("clone3 and openat2 (ENOSYS)".to_string());
    names.push("set-uid and set-gid modes (chmod, open, mknod) on the host".to_string());
    match sockets {
        Sockets::Any => {}
        Sockets::UnixOnly => names.push("socket other than AF_UNIX".to_string()),
        Sockets::UnixAndTcp => {
            names.push("socket other than AF_UNIX or TCP over AF_INET/AF_INET6".to_string())
        }
    }
    names
}

/// Why the filters could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("no seccomp filter for {arch}")]
    Arch {
        arch: &'static str,
        source: BackendError,
    },
    #[error("could not compile the seccomp filter: {0}; this is a bug in tack's rule table")]
    Compile(#[from] BackendError),
}

type Compiled = OnceLock<Result<BpfProgram, SeccompError>>;

/// The compiled filters for a command allowed `sockets`: the deny list,
/// the guard, the set-id filter where they are refused, and (when sockets
/// are narrowed) the families filter. A failure is kept like a filter
/// (compiling again would fail again), so it is lent.
pub(crate) fn filters(
    sockets: Sockets,
    set_id: SetIdFiles,
) -> Result<Vec<&'static BpfProgram>, &'static SeccompError> {
    static ANY: Compiled = OnceLock::new();
    static UNIX_ONLY: Compiled = OnceLock::new();
    static UNIX_AND_TCP: Compiled = OnceLock::new();
    static GUARD: Compiled = OnceLock::new();
    static SET_ID: Compiled = OnceLock::new();
    static FAMILIES: Compiled = OnceLock::new();
    let cell = match sockets {
        Sockets::Any => &ANY,
        Sockets::UnixOnly => &UNIX_ONLY,
        Sockets::UnixAndTcp => &UNIX_AND_TCP,
    };
    let mut all = vec![
        cell.get_or_init(|| compile(sockets)).as_ref()?,
        GUARD.get_or_init(guard).as_ref()?,
    ];
    if set_id == SetIdFiles::Refused {
        all.push(SET_ID.get_or_init(set_id_modes).as_ref()?);
    }
    if sockets != Sockets::Any {
        all.push(FAMILIES.get_or_init(families).as_ref()?);
    }
    Ok(all)
}

/// `__O_TMPFILE`, the bit of `O_TMPFILE` beside `O_DIRECTORY`: a file made
/// with it takes the call's mode, and `linkat` then gives it a name.
const TMPFILE_BIT: u32 = 0o2000_0000;

/// Calls that would give a file a set-user-id or set-group-id mode, EPERM:
/// `chmod` and its kin, and the calls that create a file with a mode
/// (`open` with `O_CREAT` or `O_TMPFILE`, `creat`, `mknod`). Each rule is
/// one mode bit in the mode argument (and a creating flag in the flags
/// one); any rule refuses.
fn set_id_modes() -> Result<BpfProgram, SeccompError> {
    let bits = [libc::S_ISUID, libc::S_ISGID];
    let bit = |arg: u8, bit: u32| {
        SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(bit.into()),
            bit.into(),
        )
    };
    let mode_at = |arg: u8| -> Result<Vec<SeccompRule>, BackendError> {
        bits.iter()
            .map(|b| SeccompRule::new(vec![bit(arg, *b)?]))
            .collect()
    };
    let created = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>, BackendError> {
        let mut rules = Vec::new();
        for flag in [libc::O_CREAT as u32, TMPFILE_BIT] {
            for b in bits {
                rules.push(SeccompRule::new(vec![bit(flags, flag)?, bit(mode, b)?])?);
            }
        }
        Ok(rules)
    };
    let rules = BTreeMap::from([
        (libc::SYS_chmod, mode_at(1)?),
        (libc::SYS_fchmod, mode_at(1)?),
        (libc::SYS_fchmodat, mode_at(2)?),
        (libc::SYS_fchmodat2, mode_at(2)?),
        (libc::SYS_creat, mode_at(1)?),
        (libc::SYS_mknod, mode_at(1)?),
        (libc::SYS_mknodat, mode_at(2)?),
        (libc::SYS_open, created(1, 2)?),
        (libc::SYS_openat, created(2, 3)?),
    ]);
    answering(rules, libc::EPERM)
}

/// A filter that answers `errno` to every call a rule matches (an empty
/// list matches any call of that number) and allows the rest.
fn answering(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: libc::c_int,
) -> Result<BpfProgram, SeccompError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        target_arch()?,
    )?;
    Ok(BpfProgram::try_from(filter)?)
}

/// Sockets of a family other than AF_UNIX, AF_INET and AF_INET6 (netlink,
/// packet, vsock…) are answered EAFNOSUPPORT, as by a kernel built without
/// them, which programs take in their stride; EPERM is a refusal some
/// treat as fatal (PAM's audit, under `su` in an image, says "System
/// error"). A filter of its own: a filter has one answer.
fn families() -> Result<BpfProgram, SeccompError> {
    let other = rule(vec![
        condition(0, SeccompCmpOp::Ne, libc::AF_UNIX)?,
        condition(0, SeccompCmpOp::Ne, libc::AF_INET)?,
        condition(0, SeccompCmpOp::Ne, libc::AF_INET6)?,
    ])?;
    answering(
        BTreeMap::from([(libc::SYS_socket, vec![other])]),
        libc::EAFNOSUPPORT,
    )
}

fn target_arch() -> Result<TargetArch, SeccompError> {
    let arch = std::env::consts::ARCH;
    TargetArch::try_from(arch).map_err(|source| SeccompError::Arch { arch, source })
}

fn compile(sockets: Sockets) -> Result<BpfProgram, SeccompError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .map(|(_, number)| (*number, Vec::new()))
        .collect();
    rules.insert(libc::SYS_clone, clone_rules()?);
    match sockets {
        Sockets::Any => {}
        // Other families: see `families`.
        Sockets::UnixOnly => {
            let inet = [libc::AF_INET, libc::AF_INET6]
                .map(|family| rule(vec![condition(0, SeccompCmpOp::Eq, family)?]));
            rules.insert(
                libc::SYS_socket,
                inet.into_iter().collect::<Result<_, _>>()?,
            );
        }
        Sockets::UnixAndTcp => {
            rules.insert(libc::SYS_socket, tcp_only_rules()?);
        }
    }
    answering(rules, libc::EPERM)
}

fn condition(
    arg: u8,
    op: SeccompCmpOp,
    value: libc::c_int,
) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, BackendError> {
    SeccompRule::new(conditions)
}

/// `socket(family, type, protocol)` calls of AF_INET and AF_INET6 refused
/// when only TCP may leave the process (other families: see `families`): each rule matches a refused call (the conditions of a rule
/// all hold; any rule refuses). The type's low bits are the socket type,
/// the rest flags (SOCK_NONBLOCK, SOCK_CLOEXEC); protocol 0 is TCP for a
/// stream socket.
fn tcp_only_rules() -> Result<Vec<SeccompRule>, BackendError> {
    const TYPE_MASK: u64 = 0xf;
    let mut rules = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        let inet = || condition(0, SeccompCmpOp::Eq, family);
        let not_stream = (0..=TYPE_MASK as libc::c_int).filter(|kind| *kind != libc::SOCK_STREAM);
        for kind in not_stream {
            rules.push(rule(vec![
                inet()?,
                condition(1, SeccompCmpOp::MaskedEq(TYPE_MASK), kind)?,
            ])?);
        }
        rules.push(rule(vec![
            inet()?,
            condition(2, SeccompCmpOp::Ne, 0)?,
            condition(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP)?,
        ])?);
    }
    Ok(rules)
}

fn clone_rules() -> Result<Vec<SeccompRule>, BackendError> {
    NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = *flag as u64;
            let condition = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?;
            SeccompRule::new(vec![condition])
        })
        .collect()
}

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_RISCV64: u32 = 0xC000_00F3;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// `clone3`, `openat2` and x32 numbers → ENOSYS; everything else allowed
/// (other architectures are killed by the main filter's own arch check).
fn guard() -> Result<BpfProgram, SeccompError> {
    let arch = match target_arch()? {
        TargetArch::x86_64 => AUDIT_ARCH_X86_64,
        TargetArch::aarch64 => AUDIT_ARCH_AARCH64,
        TargetArch::riscv64 => AUDIT_ARCH_RISCV64,
    };
    let stmt = |code: u16, k: u32| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u16, k: u32, jt: u8, jf: u8| sock_filter { code, jt, jf, k };
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    Ok(vec![
        stmt(LD_W_ABS, 4),                                    // 0: arch
        jump(JEQ_K, arch, 0, 5),                              // 1: other arch → 7
        stmt(LD_W_ABS, 0),                                    // 2: syscall number
        jump(JGE_K, X32_SYSCALL_BIT, 2, 0),                   // 3: x32 → 6
        jump(JEQ_K, libc::SYS_clone3 as u32, 1, 0),           // 4: clone3 → 6
        jump(JEQ_K, libc::SYS_openat2 as u32, 0, 1),          // 5: openat2 → 6, else 7
        stmt(RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32), // 6
        stmt(RET_K, SECCOMP_RET_ALLOW),                       // 7
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_filter_compiles() {
        let allowed = SetIdFiles::Allowed;
        let [strict, guard, families] = filters(Sockets::UnixOnly, allowed).unwrap()[..] else {
            panic!("a narrowed command has three filters")
        };
        let open = filters(Sockets::Any, allowed).unwrap()[0];
        let tcp = filters(Sockets::UnixAndTcp, allowed).unwrap()[0];
        assert_eq!(filters(Sockets::Any, allowed).unwrap().len(), 2);
        assert!(families.len() > 3);
        assert!(
            strict.len() > open.len(),
            "the socket rule adds instructions"
        );
        assert!(tcp.len() > strict.len());
        assert_eq!(guard.len(), 8);
        let on_host = filters(Sockets::UnixOnly, SetIdFiles::Refused).unwrap();
        assert_eq!(on_host.len(), 4);
        assert!(on_host[2].len() > 20, "the set-id rules");
    }

    /// On the host no call makes a set-uid or set-gid file, and no file
    /// gets capabilities; ordinary modes still work. In an image's
    /// filesystem root may (run in a child: the filters stay there).
    #[test]
    fn set_id_modes_are_refused_on_the_host_only() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "import os, stat\n\
             d = {dir:?}\n\
             refused = 0\n\
             def tries(f):\n    \
                 global refused\n    \
                 try:\n        f()\n    \
                 except PermissionError:\n        refused += 1\n\
             open(d + '/plain', 'w').close()\n\
             os.chmod(d + '/plain', 0o755)\n\
             tries(lambda: os.chmod(d + '/plain', 0o4755))\n\
             tries(lambda: os.chmod(d + '/plain', 0o2755))\n\
             fd = os.open(d + '/plain', os.O_RDONLY)\n\
             tries(lambda: os.fchmod(fd, 0o6755))\n\
             tries(lambda: os.close(os.open(d + '/made', os.O_CREAT | os.O_WRONLY, 0o4755)))\n\
             tries(lambda: os.mknod(d + '/node', stat.S_IFREG | 0o4755))\n\
             tries(lambda: os.close(os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o2755)))\n\
             caps = (0x02000001).to_bytes(4, 'little') + (1 << 21).to_bytes(4, 'little') + bytes(12)\n\
             tries(lambda: os.setxattr(d + '/plain', 'security.capability', caps))\n\
             modes = [os.stat(os.path.join(d, n)).st_mode for n in os.listdir(d)]\n\
             set_id = [m for m in modes if m & 0o6000]\n\
             raise SystemExit(0 if refused == 7 and not set_id else 1)\n",
            dir = dir.path().display().to_string(),
        );
        let plan = crate::child::ChildPlan {
            seccomp: filters(Sockets::Any, SetIdFiles::Refused).unwrap(),
            ..Default::default()
        };
        crate::probe::works_with(plan, "python3", &["-c", &script]).unwrap();
        let allowed = format!(
            "import os\nopen({p:?}, 'w').close()\nos.chmod({p:?}, 0o4755)\n",
            p = dir.path().join("allowed").display().to_string()
        );
        let plan = crate::child::ChildPlan {
            seccomp: filters(Sockets::Any, SetIdFiles::Allowed).unwrap(),
            ..Default::default()
        };
        crate::probe::works_with(plan, "python3", &["-c", &allowed]).unwrap();
    }

    #[test]
    fn lists_what_it_denies() {
        let names = denied_calls(false);
        assert!(names.iter().any(|n| n == "ptrace"));
        assert!(names.iter().any(|n| n.contains("AF_UNIX")));
        assert!(!denied_calls(true).iter().any(|n| n.contains("AF_UNIX")));
        let tcp = denied_calls_for(Sockets::UnixAndTcp);
        assert!(tcp.iter().any(|n| n.contains("TCP over")));
    }

    /// The TCP-only filters: TCP sockets open, UDP and ICMP ones are
    /// refused, netlink is absent (the filters run in a child).
    #[test]
    fn tcp_only_refuses_udp_raw_and_other_families() {
        let plan = crate::child::ChildPlan {
            seccomp: filters(Sockets::UnixAndTcp, SetIdFiles::Allowed).unwrap(),
            ..Default::default()
        };
        let script = [
            "import socket as s",
            "s.socket(s.AF_INET, s.SOCK_STREAM | s.SOCK_CLOEXEC).close()",
            "s.socket(s.AF_INET6, s.SOCK_STREAM, s.IPPROTO_TCP).close()",
            "s.socket(s.AF_UNIX, s.SOCK_DGRAM).close()",
            "refused = 0",
            "for args in [(s.AF_INET, s.SOCK_DGRAM), (s.AF_INET6, s.SOCK_DGRAM | s.SOCK_NONBLOCK),",
            "             (s.AF_INET, s.SOCK_STREAM, 132), (s.AF_INET, s.SOCK_DGRAM, 1),",
            "             (s.AF_INET, s.SOCK_RAW, 1)]:",
            "    try:",
            "        s.socket(*args).close()",
            "    except PermissionError:",
            "        refused += 1",
            "try:",
            "    s.socket(s.AF_NETLINK, s.SOCK_RAW, 9).close()",
            "except OSError as e:",
            "    refused += e.errno == 97  # EAFNOSUPPORT, as without netlink",
            "raise SystemExit(0 if refused == 6 else 1)",
        ]
        .join("\n");
        crate::probe::works_with(plan, "python3", &["-c", &script]).unwrap();
    }
}
