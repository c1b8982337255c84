//! `tack doctor`: what this machine's kernel enforces for the agent's
//! commands, which sandbox profiles can run here, and which container
//! engine builds the images of tasks that run in one.

use std::process::ExitCode;

use clap::Args;
use tack_protocol::SandboxProfile;
use tack_sandbox::{check_profile, render};

use crate::exit::{Classify, CommandResult, Failure};
use crate::out::outln;

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
It also says which container engine builds the images of tasks that run in one (`[environment] \
image` or `dockerfile`; `tack import harbor` writes them): podman if it answers, else docker, or \
the one `--engine` names on `tack run` and `tack suite check`. Their trials run in the image's \
filesystem under the sandbox above; without an engine they cannot run here (import Harbor tasks \
with --approximate to run them on the host).\n\n\
It counts the system tmp's entries ($TMPDIR, else /tmp): confined commands may read it, granted \
entry by entry, so each entry is a rule made at every command's start; from 1000 on it says how to \
keep them out of the way, and it says when TMPDIR is below /dev/shm, which every confined command \
is given fresh (`tack run` then refuses a confined run).\n\n\
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
    let engine = tack_image::Engine::detect(None);
    let init = tack_sandbox::init_program();
    let text = if args.json {
        let mut json = render::doctor_json(probe);
        json["image_engine"] = match &engine {
            Ok(engine) => serde_json::json!({
                "name": engine.kind.as_str(), "version": engine.version,
            }),
            Err(error) => serde_json::json!({ "name": null, "error": error.to_string() }),
        };
        json["session_init"] = serde_json::json!(init.as_ref().map(|p| p.display().to_string()));
        json["system_tmp"] = tmp_json(tack_sandbox::SystemTmp::here());
        json["spawner"] = serde_json::json!({
            "enabled": tack_sandbox::spawner::enabled(),
            "program": tack_sandbox::spawner::program().map(|p| p.display().to_string()),
        });
        serde_json::to_string_pretty(&json).or_fail(Failure::Internal)?
    } else {
        format!(
            "{}\n{}\n{}",
            render::doctor_text(probe),
            init_text(init.as_deref()),
            engine_text(&engine)
        )
    };
    outln!("{text}")?;
    Ok(match check_profile(SandboxProfile::Strict, probe) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    })
}

/// The "Trial sandboxes" section: which program is each trial's init, and
/// which process forks the confined commands.
fn init_text(init: Option<&std::path::Path>) -> String {
    let init = match init {
        Some(path) => format!(
            "  init                {} (built once per trial; forks its commands)",
            path.display()
        ),
        None => "  init                NONE — each command builds its own walls".to_string(),
    };
    let spawner = match (
        tack_sandbox::spawner::enabled(),
        tack_sandbox::spawner::program(),
    ) {
        (false, _) => format!(
            "  spawner             off ({}=off): tack forks confined commands itself",
            tack_sandbox::spawner::SPAWNER_ENV
        ),
        (true, Some(path)) => format!(
            "  spawner             {} (forks the trials' sandboxes and commands)",
            path.display()
        ),
        (true, None) => "  spawner             a copy of tack (no tack-sandbox-init of this build \
                         beside it; each fork copies more)"
            .to_string(),
    };
    format!("Trial sandboxes\n{init}\n{spawner}\n{}", tmp_text())
}

/// The system tmp's line: where it is, and whether confined commands can
/// work there.
fn tmp_text() -> String {
    let tmp = tack_sandbox::SystemTmp::here();
    match tmp.usable() {
        Ok(()) => format!("  system tmp          {}", tmp.summary()),
        Err(error) => format!("  system tmp          UNUSABLE — {error}"),
    }
}

/// The system tmp in `tack doctor --json`.
fn tmp_json(tmp: tack_sandbox::SystemTmp) -> serde_json::Value {
    serde_json::json!({
        "path": tmp.path.display().to_string(),
        "unusable": tmp.usable().err().map(|error| error.to_string()),
    })
}

/// The "Image tasks" section: the engine that builds task images, or why
/// none can.
fn engine_text(engine: &Result<tack_image::Engine, tack_image::ImageError>) -> String {
    match engine {
        Ok(engine) => format!(
            "Image tasks\n  engine              {} (builds and extracts the images of tasks \
             that run in one; --engine or TACK_ENGINE chooses)",
            engine.version
        ),
        Err(error) => format!(
            "Image tasks\n  engine              NONE — {error}\n    so tasks with \
             [environment] image or dockerfile cannot run here (`tack import harbor \
             --approximate` imports Harbor tasks to run on the host)"
        ),
    }
}
