//! The seccomp filters, compiled once in the parent (compiling allocates)
//! and installed in the child after the namespace and mount setup, which
//! needs the very calls they deny.
//!
//! Two filters, both installed (the kernel applies the stricter verdict):
//! the deny list below answers EPERM; a small hand-written guard answers
//! ENOSYS for `clone3` (its flags sit behind a pointer, so only refusing it
//! keeps new namespaces out, and glibc falls back to `clone` on ENOSYS)
//! and for x32 system call numbers, which would otherwise bypass the
//! x86-64 table.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
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

/// Names of everything the filters refuse, for `tack doctor`.
pub fn denied_calls(network: bool) -> Vec<String> {
    let mut names: Vec<String> = DENIED.iter().map(|(name, _)| name.to_string()).collect();
    names.push("clone with namespace flags".to_string());
    names.push("clone3 (ENOSYS)".to_string());
    if !network {
        names.push("socket other than AF_UNIX".to_string());
    }
    names
}

/// The compiled filters for a profile: `network = false` also refuses
/// sockets of any family but AF_UNIX.
pub(crate) fn filters(network: bool) -> Result<[&'static BpfProgram; 2], String> {
    static WITH_NETWORK: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    static WITHOUT_NETWORK: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    static GUARD: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    let cell = if network {
        &WITH_NETWORK
    } else {
        &WITHOUT_NETWORK
    };
    let main = cell.get_or_init(|| compile(network)).as_ref()?;
    let guard = GUARD.get_or_init(guard).as_ref()?;
    Ok([main, guard])
}

fn target_arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no seccomp filter for {}", std::env::consts::ARCH))
}

fn compile(network: bool) -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .map(|(_, number)| (*number, Vec::new()))
        .collect();
    rules.insert(libc::SYS_clone, clone_rules()?);
    if !network {
        let not_unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        let rule = SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?;
        rules.insert(libc::SYS_socket, vec![rule]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target_arch()?,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

fn clone_rules() -> Result<Vec<SeccompRule>, String> {
    NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = *flag as u64;
            let condition = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .map_err(|e| e.to_string())?;
            SeccompRule::new(vec![condition]).map_err(|e| e.to_string())
        })
        .collect()
}

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_RISCV64: u32 = 0xC000_00F3;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// `clone3` and x32 numbers → ENOSYS; everything else allowed (other
/// architectures are killed by the main filter's own arch check).
fn guard() -> Result<BpfProgram, String> {
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
        jump(JEQ_K, arch, 0, 4),                              // 1: other arch → 6
        stmt(LD_W_ABS, 0),                                    // 2: syscall number
        jump(JGE_K, X32_SYSCALL_BIT, 1, 0),                   // 3: x32 → 5
        jump(JEQ_K, libc::SYS_clone3 as u32, 0, 1),           // 4: clone3 → 5, else 6
        stmt(RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32), // 5
        stmt(RET_K, SECCOMP_RET_ALLOW),                       // 6
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_filters_compile() {
        let [strict, guard] = filters(false).unwrap();
        let [open, _] = filters(true).unwrap();
        assert!(
            strict.len() > open.len(),
            "the socket rule adds instructions"
        );
        assert_eq!(guard.len(), 7);
    }

    #[test]
    fn lists_what_it_denies() {
        let names = denied_calls(false);
        assert!(names.iter().any(|n| n == "ptrace"));
        assert!(names.iter().any(|n| n.contains("AF_UNIX")));
        assert!(!denied_calls(true).iter().any(|n| n.contains("AF_UNIX")));
    }
}
