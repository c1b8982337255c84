//! The sandbox's findings for people and programs: the probe (`tack
//! doctor`): what this machine's kernel enforces for the agent's commands,
//! which profiles can run here and, for a profile that cannot, what is
//! missing and how to enable it; and what happened to one confined command (`tack sandbox exec`).

use serde_json::{Value, json};
use tack_protocol::SandboxProfile;

use crate::{CommandOutput, Probe, check_profile, denied_calls};

/// The profiles doctor reports on, strictest first.
pub const PROFILES: [SandboxProfile; 3] = [
    SandboxProfile::Strict,
    SandboxProfile::WorkspaceWrite,
    SandboxProfile::Off,
];

/// The probe and the profiles' verdicts as one JSON object (`tack doctor
/// --json`).
pub fn doctor_json(probe: &Probe) -> Value {
    let profiles: serde_json::Map<String, Value> = PROFILES
        .iter()
        .map(|profile| {
            let verdict = check_profile(*profile, probe);
            let value = json!({
                "available": verdict.is_ok(),
                "message": verdict.err().map(|e| e.to_string()),
            });
            (profile.as_str().to_string(), value)
        })
        .collect();
    json!({
        "landlock_abi": probe.landlock_abi,
        "port_limited_network": probe.landlock_net,
        "seccomp": probe.seccomp,
        "user_namespaces": probe.user_namespaces,
        "mount_namespaces": probe.mount_namespaces,
        "network_namespaces": probe.network_namespaces,
        "pid_namespaces": probe.pid_namespaces,
        "rlimits": probe.rlimits,
        "nproc_rlimit": probe.nproc_rlimit,
        "namespace_pid_max": probe.namespace_pid_max,
        "pids_cgroup": probe.pids_cgroup.as_ref().map(|p| p.display().to_string()),
        "process_bounds": probe.process_bounds(),
        "seccomp_denies": denied_calls(false),
        "missing": probe.missing.iter().map(|m| json!({"mechanism": m.mechanism, "reason": m.reason})).collect::<Vec<_>>(),
        "disabled": probe.disabled,
        "profiles": profiles,
    })
}

fn yes_no(ok: bool, probe: &Probe, mechanism: &str) -> String {
    if ok {
        "enforced".to_string()
    } else {
        format!(
            "MISSING — {}",
            probe.reason(mechanism).unwrap_or("not available")
        )
    }
}

/// The probe as text: each mechanism enforced or missing (and why), and
/// each profile's verdict with what to do when it cannot run.
pub fn doctor_text(probe: &Probe) -> String {
    let landlock = match probe.landlock_abi {
        Some(abi) if probe.reason("landlock").is_none() => {
            let scopes = if abi >= 6 {
                ", signal and abstract-socket scoping"
            } else {
                ""
            };
            format!("enforced (ABI {abi}: filesystem rights{scopes})")
        }
        _ => yes_no(false, probe, "landlock"),
    };
    let bounds = probe.process_bounds();
    let bounds = if bounds.is_empty() {
        "NONE beyond the timeout (root is exempt from RLIMIT_NPROC; no pid_max, no pids cgroup)"
            .to_string()
    } else {
        bounds.join(", ")
    };
    let port_limited = if probe.landlock_net {
        "available (TCP connect to given ports only; UDP and other sockets refused)".to_string()
    } else {
        yes_no(false, probe, "landlock network rules")
    };
    // Each of these is reported under the name the probe gives it.
    let enforced = |mechanism: &'static str, ok: bool| (mechanism, yes_no(ok, probe, mechanism));
    let rlimits = yes_no(probe.rlimits, probe, "rlimits");
    let mechanisms = [
        ("landlock", landlock),
        enforced("seccomp", probe.seccomp),
        enforced("user namespaces", probe.user_namespaces),
        enforced("mount namespaces", probe.mount_namespaces),
        enforced("pid namespaces", probe.pid_namespaces),
        enforced("network namespaces", probe.network_namespaces),
        ("rlimits", format!("{rlimits} ({})", rlimit_note(probe))),
        ("process count bound", bounds),
        ("port-limited net", port_limited),
    ];
    let row = |label: &str, value: &str| format!("  {label:<19} {value}");
    let mut lines = vec!["Mechanisms".to_string()];
    lines.extend(mechanisms.iter().map(|(label, value)| row(label, value)));
    if !probe.disabled.is_empty() {
        lines.push(format!(
            "  (TACK_SANDBOX_DISABLE: {})",
            probe.disabled.join(",")
        ));
    }
    let unknown: Vec<&str> = probe
        .disabled
        .iter()
        .map(String::as_str)
        .filter(|name| !crate::probe::DISABLE_NAMES.contains(name))
        .collect();
    if !unknown.is_empty() {
        lines.push(format!(
            "  (TACK_SANDBOX_DISABLE names no mechanism in {}: it takes {})",
            unknown.join(","),
            crate::probe::DISABLE_NAMES.join(",")
        ));
    }
    lines.push("Profiles".to_string());
    for profile in PROFILES {
        lines.push(match (profile, check_profile(profile, probe)) {
            (SandboxProfile::Off, _) => "  off                 runs here, unconfined".to_string(),
            (profile, Ok(())) => format!("  {:<19} runs here", profile.as_str()),
            (profile, Err(error)) => format!(
                "  {:<19} CANNOT run here\n{}",
                profile.as_str(),
                indent(&error.to_string())
            ),
        });
    }
    lines.join("\n")
}

fn rlimit_note(probe: &Probe) -> &'static str {
    if probe.nproc_rlimit {
        "cpu, address space, file size, processes"
    } else {
        "cpu, address space, file size; RLIMIT_NPROC does not bind root"
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What tack did to a command beyond running it: no confinement, output
/// cut at `limit` bytes, killed after `timeout` seconds, operations the
/// sandbox denied. One note a line.
pub fn command_notes(output: &CommandOutput, timeout: u64, limit: usize) -> Vec<String> {
    let mut notes = Vec::new();
    if output.profile == SandboxProfile::Off {
        notes.push("profile off: the command ran without kernel confinement".to_string());
    }
    if output.truncated() {
        notes.push(format!("output truncated to {limit} bytes per stream"));
    }
    if output.timed_out {
        notes.push(format!(
            "timed out after {timeout}s; its process group was killed"
        ));
    }
    if !output.denials.is_empty() {
        notes.push(format!("denied under profile {}:", output.profile.as_str()));
        notes.extend(output.denials.iter().map(|d| format!("  {d}")));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Missing;

    fn bare() -> Probe {
        Probe {
            missing: vec![Missing {
                mechanism: "seccomp",
                reason: "no seccomp here".into(),
            }],
            ..Probe::default()
        }
    }

    #[test]
    fn a_disabled_name_that_is_no_mechanism_is_said() {
        let probe = Probe {
            disabled: vec!["landlock".into(), "bogus".into()],
            ..bare()
        };
        let text = doctor_text(&probe);
        assert!(
            text.contains("(TACK_SANDBOX_DISABLE names no mechanism in bogus: it takes landlock,"),
            "{text}"
        );
        let known = Probe {
            disabled: vec!["landlock".into()],
            ..bare()
        };
        assert!(!doctor_text(&known).contains("names no mechanism"));
    }

    #[test]
    fn the_text_names_what_is_missing_and_why() {
        let text = doctor_text(&bare());
        assert!(
            text.starts_with("Mechanisms\n  landlock            MISSING"),
            "{text}"
        );
        assert!(
            text.contains("\n  seccomp             MISSING — no seccomp here\n"),
            "{text}"
        );
        assert!(
            text.contains("  process count bound NONE beyond the timeout"),
            "{text}"
        );
        assert!(
            text.contains("  strict              CANNOT run here\n    "),
            "{text}"
        );
        assert!(
            text.ends_with("  off                 runs here, unconfined"),
            "{text}"
        );
    }

    #[test]
    fn the_json_has_every_profile() {
        let json = doctor_json(&bare());
        assert_eq!(json["profiles"]["strict"]["available"], false);
        assert_eq!(json["profiles"]["off"]["available"], true);
        assert_eq!(json["missing"][0]["mechanism"], "seccomp");
    }

    #[test]
    fn notes_say_what_tack_did_to_the_command() {
        let output = CommandOutput {
            exit_code: None,
            signal: Some(9),
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: true,
            stderr_truncated: false,
            timed_out: true,
            duration: std::time::Duration::from_secs(5),
            denials: vec!["write /etc/x".into()],
            profile: SandboxProfile::Strict,
        };
        assert_eq!(
            command_notes(&output, 5, 100),
            [
                "output truncated to 100 bytes per stream",
                "timed out after 5s; its process group was killed",
                "denied under profile strict:",
                "  write /etc/x",
            ]
        );
    }
}
