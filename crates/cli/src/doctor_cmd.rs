//! `tack doctor`: what this machine's kernel enforces for the agent's
//! commands, which sandbox profiles can run here, and which container
//! engines are installed.

use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};
use tack_protocol::SandboxProfile;
use tack_sandbox::{Probe, check_profile, denied_calls};

use crate::exit::{Classify, CommandResult, Failure};

const PROFILES: [SandboxProfile; 3] = [
    SandboxProfile::Strict,
    SandboxProfile::WorkspaceWrite,
    SandboxProfile::Off,
];

#[derive(Debug, Args)]
#[command(
    long_about = "Probe the kernel mechanisms tack confines the agent's commands with — Landlock \
(and its ABI version), seccomp, user, mount, pid and network namespaces, rlimits and the bounds on \
the process count — by trying each in a throw-away child, and say which sandbox profiles can run \
here. For a profile that cannot, it prints what is missing, how to enable it, and how to opt out.\n\n\
Profiles:\n  strict           writes only to the workspace and a private tmp, .git read-only, hidden \
dirs empty, no network (default)\n  workspace_write  the same with the host's network\n  off              \
no kernel confinement (recorded as such in traces and reports)\n\n\
A confined profile's network can also be narrowed to TCP connections to given ports (an external \
agent reaching tack's recording proxy on loopback); that needs Landlock network rules (ABI 4, Linux \
6.7), shown as `port-limited net`.\n\n\
It also lists the container engines on PATH (docker, podman). tack has no container backend \
yet: tasks marked `requires = \"container\"` (which `tack import harbor` writes for Harbor tasks \
it cannot reproduce without their image) are left out of runs and not checked by `tack suite \
check`, whatever engine is installed.\n\n\
TACK_SANDBOX_DISABLE=landlock,seccomp,userns (also netns, pidns, cgroup, landlock_net) pretends a mechanism is \
missing, to see the messages.",
    after_help = "Exit codes: 0 the strict profile can run here, 1 it cannot (the output says why)."
)]
pub struct DoctorArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: DoctorArgs) -> CommandResult {
    let probe = tack_sandbox::probe();
    let text = if args.json {
        serde_json::to_string_pretty(&to_json(probe)).or_fail(Failure::Internal)?
    } else {
        render(probe)
    };
    println!("{text}");
    Ok(match check_profile(SandboxProfile::Strict, probe) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    })
}

fn to_json(probe: &Probe) -> Value {
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
        "container_engines": container_engines()
            .iter()
            .map(|(name, version)| json!({"name": name, "version": version}))
            .collect::<Vec<_>>(),
        "container_backend": false,
    })
}

/// The container engines on PATH (docker, podman) with the version each
/// reports. tack has no container backend yet: tasks marked `requires =
/// "container"` are left out of runs whatever this finds, and doctor says
/// so, so that no one takes an engine's presence for support.
fn container_engines() -> Vec<(&'static str, String)> {
    ["docker", "podman"]
        .into_iter()
        .filter_map(|name| {
            let output = std::process::Command::new(name)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
            Some((name, version))
        })
        .collect()
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

fn render(probe: &Probe) -> String {
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
    let mut lines = vec![
        "Mechanisms".to_string(),
        format!("  landlock            {landlock}"),
        format!(
            "  seccomp             {}",
            yes_no(probe.seccomp, probe, "seccomp")
        ),
        format!(
            "  user namespaces     {}",
            yes_no(probe.user_namespaces, probe, "user namespaces")
        ),
        format!(
            "  mount namespaces    {}",
            yes_no(probe.mount_namespaces, probe, "mount namespaces")
        ),
        format!(
            "  pid namespaces      {}",
            yes_no(probe.pid_namespaces, probe, "pid namespaces")
        ),
        format!(
            "  network namespaces  {}",
            yes_no(probe.network_namespaces, probe, "network namespaces")
        ),
        format!(
            "  rlimits             {} ({})",
            yes_no(probe.rlimits, probe, "rlimits"),
            rlimit_note(probe)
        ),
        format!("  process count bound {bounds}"),
        format!(
            "  port-limited net    {}",
            if probe.landlock_net {
                "available (TCP connect to given ports only; UDP and other sockets refused)"
                    .to_string()
            } else {
                yes_no(false, probe, "landlock network rules")
            }
        ),
    ];
    if !probe.disabled.is_empty() {
        lines.push(format!(
            "  (TACK_SANDBOX_DISABLE: {})",
            probe.disabled.join(",")
        ));
    }
    lines.push("Container tasks".to_string());
    let engines = container_engines();
    let found = match engines.is_empty() {
        true => "no docker or podman on PATH".to_string(),
        false => engines
            .iter()
            .map(|(_, version)| version.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    };
    lines.push(format!("  engines             {found}"));
    lines.push(
        "  backend             none: tasks with requires = \"container\" (tack import harbor \
         marks them) are left out of runs and not checked by suite check"
            .to_string(),
    );
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
