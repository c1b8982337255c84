//! Which mechanisms each sandbox profile needs, and the error that says
//! what is missing, how to enable it, and how to opt out.

use tack_protocol::SandboxProfile;

use crate::probe::{DISABLE_ENV, Missing, Probe, ProbeError};
use crate::{Confinement, SandboxError};

/// The Landlock ABI that brings TCP port rules (Linux 6.7).
pub(crate) const TCP_PORT_ABI: i32 = 4;

/// The mechanisms a profile cannot run without.
fn required(profile: SandboxProfile) -> &'static [&'static str] {
    match profile {
        SandboxProfile::Off => &[],
        SandboxProfile::WorkspaceWrite => &[
            "landlock",
            "seccomp",
            "user namespaces",
            "mount namespaces",
            "pid namespaces",
            "rlimits",
        ],
        SandboxProfile::Strict => &[
            "landlock",
            "seccomp",
            "user namespaces",
            "mount namespaces",
            "pid namespaces",
            "network namespaces",
            "rlimits",
        ],
    }
}

/// Whether `profile` can be enforced here; if not, an error naming what is
/// missing, how to enable it, and how to opt out. Never a silent fallback.
pub fn check_profile(profile: SandboxProfile, probe: &Probe) -> Result<(), SandboxError> {
    let missing: Vec<&Missing> = required(profile)
        .iter()
        .filter_map(|name| probe.missing.iter().find(|m| m.mechanism == *name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut message = format!(
        "the `{}` sandbox profile cannot be enforced on this machine:",
        profile.as_str()
    );
    let disabled = ProbeError::Disabled.to_string();
    for m in &missing {
        // Turned off on purpose, the kernel's fix would mislead.
        let fix = if m.reason == disabled {
            format!(
                "unset {DISABLE_ENV}: it turns off {} here, to test what happens without them",
                probe.disabled.join(",")
            )
        } else {
            how_to_enable(m.mechanism).to_string()
        };
        message.push_str(&format!(
            "\n  - {}: {}.\n    To enable: {fix}",
            display_name(m.mechanism),
            m.reason,
        ));
    }
    message.push_str(
        "\nTo run commands unconfined instead, opt out explicitly: set `sandbox = \"off\"` in the \
         variant's harness config, or pass `--profile off` to `tack sandbox exec`. \
         `tack doctor` shows what this machine enforces.",
    );
    Err(SandboxError::Unavailable {
        profile,
        missing: missing.iter().map(|m| m.mechanism.to_string()).collect(),
        message,
    })
}

/// Whether `confinement` as a whole can be enforced here: its profile
/// ([`check_profile`]) and, when its network is narrowed to TCP ports,
/// Landlock's network rules. Never runs a narrowed command with the full
/// network instead.
pub fn check_confinement(confinement: &Confinement, probe: &Probe) -> Result<(), SandboxError> {
    check_profile(confinement.profile, probe)?;
    if !confinement.is_confined() && !confinement.placed.is_empty() {
        let places: Vec<String> = confinement
            .placed
            .iter()
            .map(|p| p.at.display().to_string())
            .collect();
        return Err(SandboxError::Unavailable {
            profile: confinement.profile,
            missing: vec!["mount namespaces".to_string()],
            message: format!(
                "directories cannot be placed at {} under the `off` profile: it runs commands \
                 in the host's own filesystem, where those paths would have to be created.\n    \
                 To enable: use the `strict` or `workspace_write` profile",
                places.join(", ")
            ),
        });
    }
    let Some(ports) = &confinement.tcp_connect else {
        return Ok(());
    };
    let profile = confinement.profile;
    let unavailable = |reason: String, fix: &str| SandboxError::Unavailable {
        profile,
        missing: vec!["landlock network rules".to_string()],
        message: format!(
            "the network cannot be limited to TCP port(s) {ports:?} under the `{}` profile:              {reason}.\n    To enable: {fix}",
            profile.as_str()
        ),
    };
    if !confinement.is_confined() {
        return Err(unavailable(
            "`off` enforces nothing".into(),
            "use the `strict` or `workspace_write` profile",
        ));
    }
    match probe.landlock_abi {
        Some(abi) if abi >= TCP_PORT_ABI && probe.landlock_net => Ok(()),
        abi => Err(unavailable(
            probe.reason("landlock network rules").map_or_else(
                || format!("Landlock ABI {abi:?} has no TCP port rules"),
                str::to_string,
            ),
            "use Linux 6.7 or later (Landlock ABI 4); `tack doctor` shows the ABI",
        )),
    }
}

fn display_name(mechanism: &str) -> &str {
    match mechanism {
        "landlock" => "Landlock",
        other => other,
    }
}

fn how_to_enable(mechanism: &str) -> &'static str {
    match mechanism {
        "landlock" => {
            "use Linux 6.2 or later built with CONFIG_SECURITY_LANDLOCK and boot with landlock in \
             the LSM list (e.g. lsm=landlock,lockdown,yama,integrity,apparmor); check \
             /sys/kernel/security/lsm"
        }
        "seccomp" => "use a kernel with CONFIG_SECCOMP_FILTER on x86_64, aarch64 or riscv64",
        "user namespaces" | "network namespaces" | "pid namespaces" => {
            "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 \
             (Debian/Ubuntu), user.max_user_namespaces > 0, and on Ubuntu 24.04+ \
             kernel.apparmor_restrict_unprivileged_userns=0; in a container, allow unshare(2) \
             (e.g. docker --security-opt seccomp=unconfined)"
        }
        "mount namespaces" => {
            "allow unprivileged user namespaces (as above) on Linux 5.12 or later (mount_setattr)"
        }
        _ => "check that setrlimit(2) is permitted",
    }
}
