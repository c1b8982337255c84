//! What this kernel can enforce, found by trying each mechanism in a
//! throw-away child (the same code the real commands run), and whether a
//! profile can run here. `TACK_SANDBOX_DISABLE=landlock,seccomp,userns`
//! (also `netns`, `pidns`, `cgroup`, `landlock_net`) pretends a mechanism is missing, so
//! the failure paths can be tested on a machine that has everything;
//! `openat2` makes the file tools' lookups use their user-space walk.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};

use crate::child::{ChildPlan, MountStep};
use crate::landlock::LandlockError;
use crate::limits::CgroupError;
use crate::profiles::TCP_PORT_ABI;
use crate::seccomp::SeccompError;
use crate::{ResourceLimits, landlock, limits, seccomp};

pub const DISABLE_ENV: &str = "TACK_SANDBOX_DISABLE";

/// Why a mechanism is missing. [`Missing`] keeps it as text: a probe is
/// cached, cloned and compared, which the I/O errors inside cannot be.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("disabled by {DISABLE_ENV}")]
    Disabled,
    #[error(transparent)]
    Landlock(#[from] LandlockError),
    #[error(
        "Landlock ABI {0} cannot stop truncation of files outside the workspace; ABI {min} \
         (Linux 6.2) or later is needed",
        min = landlock::MIN_ABI
    )]
    LandlockTooOld(i32),
    #[error(
        "Landlock ABI {0} has no network rules; ABI {TCP_PORT_ABI} (Linux 6.7) or later is needed"
    )]
    NoNetworkRules(i32),
    /// Another mechanism that is missing.
    #[error("needs {0}")]
    Needs(&'static str),
    #[error("{step} failed: {source}")]
    Failed {
        step: &'static str,
        source: ChildError,
    },
    #[error("a pid namespace cannot set its own pid_max (Linux 6.14+)")]
    NoNamespacePidMax(#[source] ChildError),
    #[error(transparent)]
    Seccomp(&'static SeccompError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error("cannot make a directory to try mounts on: {0}")]
    Scratch(#[source] std::io::Error),
    #[error("{} contains a NUL byte", .0.display())]
    NulByte(PathBuf),
    #[error("cannot plan the cover of /tmp: {0}")]
    Cover(#[source] Box<crate::SetupError>),
}

/// Why a probe child did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChildError {
    #[error("the probe child failed ({0})")]
    Status(ExitStatus),
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// A mechanism that is not available, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub mechanism: &'static str,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Probe {
    /// The Landlock ABI version, if Landlock is enabled.
    pub landlock_abi: Option<i32>,
    /// Landlock can limit TCP `connect` and `bind` to given ports (ABI 4,
    /// Linux 6.7), for [`crate::Confinement::allowing_tcp_connect_only`].
    pub landlock_net: bool,
    pub seccomp: bool,
    pub user_namespaces: bool,
    /// Mount namespaces with `mount_setattr` (recursive read-only remounts).
    pub mount_namespaces: bool,
    pub network_namespaces: bool,
    pub pid_namespaces: bool,
    pub rlimits: bool,
    /// `RLIMIT_NPROC` binds this user (it never binds root).
    pub nproc_rlimit: bool,
    /// A pid namespace can have its own `kernel.pid_max` (Linux 6.14+).
    pub namespace_pid_max: bool,
    /// Where per-command pids cgroups are made, if possible.
    pub pids_cgroup: Option<PathBuf>,
    /// Mechanisms that are missing, with the reason.
    pub missing: Vec<Missing>,
    /// Mechanisms turned off by `TACK_SANDBOX_DISABLE`.
    pub disabled: Vec<String>,
}

impl Probe {
    /// What bounds the number of processes a confined command can have.
    pub fn process_bounds(&self) -> Vec<String> {
        let mut bounds = Vec::new();
        if self.rlimits && self.nproc_rlimit {
            bounds.push("RLIMIT_NPROC".to_string());
        }
        if self.namespace_pid_max {
            bounds.push("pid_max of the command's pid namespace".to_string());
        }
        if let Some(base) = &self.pids_cgroup {
            bounds.push(format!("pids cgroup under {}", base.display()));
        }
        bounds
    }

    /// Why a mechanism is missing, if it is.
    pub fn reason(&self, mechanism: &str) -> Option<&str> {
        self.missing
            .iter()
            .find(|m| m.mechanism == mechanism)
            .map(|m| m.reason.as_str())
    }
}

/// The probe of this machine, run once per process.
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| detect(&std::env::var(DISABLE_ENV).unwrap_or_default()))
}

/// The names `TACK_SANDBOX_DISABLE` takes.
pub const DISABLE_NAMES: [&str; 8] = [
    "landlock",
    "landlock_net",
    "seccomp",
    "userns",
    "mountns",
    "netns",
    "pidns",
    "cgroup",
];

/// Probes now, pretending the comma-separated mechanisms in `disable` are
/// missing (uncached; [`probe`] is the cached one).
pub fn detect(disable: &str) -> Probe {
    let disabled: Vec<String> = disable
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    let off = |name: &str| disabled.iter().any(|d| d == name);
    let mut probe = Probe {
        nproc_rlimit: limits::nproc_rlimit_enforced(),
        disabled: disabled.clone(),
        ..Probe::default()
    };
    let mut note = |mechanism: &'static str, result: Result<(), ProbeError>| {
        let ok = result.is_ok();
        if let Err(reason) = result {
            let reason = reason.to_string();
            probe.missing.push(Missing { mechanism, reason });
        }
        ok
    };
    let unless = |name: &str, attempt: &dyn Fn() -> Result<(), ProbeError>| {
        if off(name) { by_env() } else { attempt() }
    };
    let abi = if off("landlock") {
        by_env()
    } else {
        landlock::kernel_abi().map_err(ProbeError::from)
    };
    let landlock_abi = abi.as_ref().ok().copied();
    note("landlock", abi.and_then(landlock_is_enough));
    let landlock_net = note(
        "landlock network rules",
        if off("landlock_net") {
            by_env()
        } else {
            tcp_port_rules(landlock_abi)
        },
    );
    let seccomp = note("seccomp", unless("seccomp", &try_seccomp));
    let userns = |name: &str, attempt: &dyn Fn() -> Result<(), ProbeError>| {
        if off("userns") {
            by_env()
        } else {
            unless(name, attempt)
        }
    };
    let user = note(
        "user namespaces",
        userns("userns", &|| try_namespaces(libc::CLONE_NEWUSER, false)),
    );
    let mount = note("mount namespaces", userns("mountns", &try_mounts));
    let net = note(
        "network namespaces",
        userns("netns", &|| {
            try_namespaces(libc::CLONE_NEWUSER | libc::CLONE_NEWNET, false)
        }),
    );
    let pid = note(
        "pid namespaces",
        userns("pidns", &|| {
            try_namespaces(libc::CLONE_NEWUSER | libc::CLONE_NEWPID, true)
        }),
    );
    let rlimits = note("rlimits", try_rlimits());
    let pid_max = note(
        "pid_max",
        if pid {
            try_pid_max()
        } else {
            Err(ProbeError::Needs("pid namespaces"))
        },
    );
    let cgroup = if off("cgroup") {
        by_env()
    } else {
        limits::find_pids_cgroup_base().map_err(ProbeError::from)
    };
    let pids_cgroup = match cgroup {
        Ok(base) => Some(base),
        Err(reason) => {
            note("pids cgroup", Err(reason));
            None
        }
    };
    Probe {
        landlock_abi,
        landlock_net,
        seccomp,
        user_namespaces: user,
        mount_namespaces: mount,
        network_namespaces: net,
        pid_namespaces: pid,
        rlimits,
        namespace_pid_max: pid_max,
        pids_cgroup,
        ..probe
    }
}

fn by_env<T>() -> Result<T, ProbeError> {
    Err(ProbeError::Disabled)
}

fn landlock_is_enough(abi: i32) -> Result<(), ProbeError> {
    if abi < landlock::MIN_ABI {
        return Err(ProbeError::LandlockTooOld(abi));
    }
    Ok(())
}

fn tcp_port_rules(abi: Option<i32>) -> Result<(), ProbeError> {
    match abi {
        Some(abi) if abi >= TCP_PORT_ABI => Ok(()),
        Some(abi) => Err(ProbeError::NoNetworkRules(abi)),
        None => Err(ProbeError::Needs("Landlock")),
    }
}

/// Runs `true` in a child that applies `plan` first. `true` is looked for
/// in the system's directories after PATH: a PATH without it says nothing
/// about the kernel, and blaming the kernel would mislead.
pub(crate) fn works(plan: ChildPlan) -> Result<(), ChildError> {
    let path = std::env::var("PATH").unwrap_or_default();
    let program = crate::local::find_in_path("true", &format!("{path}:/usr/bin:/bin"));
    works_with(plan, &program.to_string_lossy(), &[])
}

/// Runs `program args` in a child that applies `plan` first.
pub(crate) fn works_with(plan: ChildPlan, program: &str, args: &[&str]) -> Result<(), ChildError> {
    let plan = Arc::new(plan);
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[allow(unsafe_code)]
    // SAFETY: child::enter only makes raw syscalls on the prepared plan.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || child_enter(&plan));
    }
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(ChildError::Status(status)),
        Err(source) => Err(ChildError::Spawn {
            program: program.to_string(),
            source,
        }),
    }
}

fn child_enter(plan: &ChildPlan) -> std::io::Result<()> {
    crate::child::enter(plan)
}

fn id_maps() -> (Vec<u8>, Vec<u8>) {
    #[allow(unsafe_code)]
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    (
        format!("{uid} {uid} 1\n").into_bytes(),
        format!("{gid} {gid} 1\n").into_bytes(),
    )
}

pub(crate) fn user_ns_plan(flags: libc::c_int) -> ChildPlan {
    ChildPlan {
        unshare_flags: flags,
        id_maps: Some(id_maps()),
        ..ChildPlan::default()
    }
}

fn failed(step: &'static str) -> impl FnOnce(ChildError) -> ProbeError {
    move |source| ProbeError::Failed { step, source }
}

fn try_namespaces(flags: libc::c_int, fork: bool) -> Result<(), ProbeError> {
    let plan = ChildPlan {
        pid_namespace: fork,
        ..user_ns_plan(flags)
    };
    works(plan).map_err(failed("unshare"))
}

fn try_mounts() -> Result<(), ProbeError> {
    let dir = tempfile::tempdir().map_err(ProbeError::Scratch)?;
    let hidden = dir.path().join("hidden");
    std::fs::create_dir(&hidden).map_err(ProbeError::Scratch)?;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| ProbeError::NulByte(p.to_path_buf()))
    };
    let plan = ChildPlan {
        mounts: vec![
            MountStep::MakePrivate,
            MountStep::AllReadOnly,
            MountStep::Writable(c(dir.path())?),
            MountStep::Hide(c(&hidden)?),
        ],
        ..user_ns_plan(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
    };
    works(plan).map_err(failed("mount setup in a user namespace"))?;
    // The read-only overlay that covers /tmp (overlayfs in a user
    // namespace, Linux 5.11+), as every confined command gets it.
    let Some(cover) =
        crate::plan::probe_cover(dir.path()).map_err(|e| ProbeError::Cover(Box::new(e)))?
    else {
        return Ok(());
    };
    let plan = ChildPlan {
        mounts: vec![MountStep::MakePrivate, cover],
        ..user_ns_plan(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
    };
    works(plan).map_err(failed(
        "an overlay of /tmp in a user namespace (overlayfs, Linux 5.11+)",
    ))
}

fn try_pid_max() -> Result<(), ProbeError> {
    let plan = ChildPlan {
        pid_namespace: true,
        pid_max: Some(b"1000".to_vec()),
        ..user_ns_plan(libc::CLONE_NEWUSER | libc::CLONE_NEWPID)
    };
    works(plan).map_err(ProbeError::NoNamespacePidMax)
}

fn try_seccomp() -> Result<(), ProbeError> {
    let filters = seccomp::filters(seccomp::Sockets::UnixOnly, seccomp::SetIdFiles::Refused)
        .map_err(ProbeError::Seccomp)?;
    let plan = ChildPlan {
        seccomp: filters.to_vec(),
        ..ChildPlan::default()
    };
    works(plan).map_err(failed("installing the seccomp filter"))
}

fn try_rlimits() -> Result<(), ProbeError> {
    let plan = ChildPlan {
        rlimits: limits::rlimits(&ResourceLimits::default()),
        ..ChildPlan::default()
    };
    works(plan).map_err(failed("setrlimit"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SandboxError, SandboxProfile, check_profile};

    #[test]
    fn disabling_landlock_makes_confined_profiles_unavailable() {
        let probe = detect("landlock");
        assert_eq!(probe.landlock_abi, None);
        assert_eq!(
            probe.reason("landlock"),
            Some("disabled by TACK_SANDBOX_DISABLE")
        );
        let error = check_profile(SandboxProfile::Strict, &probe).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("Landlock"), "{text}");
        assert!(
            text.contains("unset TACK_SANDBOX_DISABLE: it turns off landlock here"),
            "{text}"
        );
        assert!(text.contains("sandbox = \"off\""), "{text}");
        assert!(text.contains("--profile off"), "{text}");
        assert!(check_profile(SandboxProfile::WorkspaceWrite, &probe).is_err());
        assert!(check_profile(SandboxProfile::Off, &probe).is_ok());
    }

    #[test]
    fn a_mechanism_the_kernel_lacks_is_enabled_by_the_kernel() {
        let mut probe = detect("landlock");
        probe.disabled.clear();
        for missing in &mut probe.missing {
            missing.reason = "landlock is not in the kernel's LSM list".to_string();
        }
        let text = check_profile(SandboxProfile::Strict, &probe)
            .unwrap_err()
            .to_string();
        assert!(text.contains("lsm="), "{text}");
        assert!(!text.contains("TACK_SANDBOX_DISABLE"), "{text}");
    }

    #[test]
    fn disabling_user_namespaces_takes_the_namespaces_with_it() {
        let probe = detect("userns, seccomp");
        assert!(!probe.user_namespaces && !probe.mount_namespaces);
        assert!(!probe.network_namespaces && !probe.pid_namespaces && !probe.seccomp);
        let Err(SandboxError::Unavailable { missing, .. }) =
            check_profile(SandboxProfile::Strict, &probe)
        else {
            panic!("strict should be unavailable");
        };
        assert!(missing.contains(&"seccomp".to_string()));
        assert!(missing.contains(&"network namespaces".to_string()));
    }

    #[test]
    fn network_namespaces_only_matter_for_strict() {
        let probe = detect("netns");
        if !probe.user_namespaces {
            match crate::gate_for("no user namespaces here".into()) {
                crate::TestGate::Fail(why) => panic!("{why}"),
                _ => eprintln!("skipped: no user namespaces here"),
            }
            return;
        }
        assert!(check_profile(SandboxProfile::Strict, &probe).is_err());
        let write = check_profile(SandboxProfile::WorkspaceWrite, &probe);
        assert!(write.is_ok() || probe.landlock_abi.is_none(), "{write:?}");
    }

    #[test]
    fn port_limited_network_fails_without_landlock_network_rules() {
        let dir = std::path::Path::new("/tmp");
        let narrowed = crate::Confinement::workspace_write(dir).allowing_tcp_connect_only([9]);
        let probe = detect("landlock_net");
        assert!(!probe.landlock_net);
        let error = crate::check_confinement(&narrowed, &probe).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("TCP port(s) [9]"), "{text}");
        assert!(text.contains("disabled by TACK_SANDBOX_DISABLE"), "{text}");
        assert!(text.contains("Linux 6.7"), "{text}");
        let off = crate::Confinement::off().allowing_tcp_connect_only([9]);
        let text = crate::check_confinement(&off, &detect(""))
            .unwrap_err()
            .to_string();
        assert!(text.contains("`off` enforces nothing"), "{text}");
        assert!(tcp_port_rules(Some(3)).is_err());
        assert!(tcp_port_rules(Some(4)).is_ok());
    }

    #[test]
    fn this_machine_is_probed_without_panicking() {
        let probe = detect("");
        assert!(probe.disabled.is_empty());
        assert!(probe.rlimits, "{:?}", probe.missing);
    }
}
