//! Which mechanisms each sandbox profile needs, and the error that says
//! what is missing, how to enable it, and how to opt out.

use tack_protocol::SandboxProfile;

use crate::SandboxError;
use crate::probe::{Missing, Probe};

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
    for m in &missing {
        message.push_str(&format!(
            "\n  - {}: {}.\n    To enable: {}",
            display_name(m.mechanism),
            m.reason,
            how_to_enable(m.mechanism)
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
