//! `tack sandbox exec`: run one command exactly as the agent's `bash` tool
//! would, under a chosen sandbox profile, to see what it may and may not do.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use tack_protocol::HarnessConfig;
use tack_sandbox::{CommandOutput, CommandSpec, SandboxError};

use crate::argv::command_line;
use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::out::{errln, out, outln};
use crate::profile_arg::ProfileArg;

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Run one command confined as the agent's bash tool would run it.
    #[command(long_about = EXEC_ABOUT)]
    Exec(ExecArgs),
}

/// Shown by `--help` (a variant's doc comment would otherwise replace the
/// long text with its one line).
const EXEC_ABOUT: &str = "Run one command with `bash -c` in the workspace, exactly as the agent's bash \
tool does: scrubbed environment (no API keys), its own process group killed when it returns, a \
timeout, output capped per stream — and, unless the profile is `off`, kernel confinement: user, \
mount and pid namespaces (plus an empty network namespace for `strict`), everything read-only \
but the workspace and a private $TMPDIR, .git read-only, --hide directories empty, Landlock, a \
seccomp deny list, rlimits and a process-count bound. `tack doctor` shows what this machine \
enforces. A profile that cannot be enforced here is an error (exit 2), never a silent fallback.\n\n\
One word after `--` is a shell script, run as the agent's `bash` tool runs its command. Several \
words are a program and its arguments, run exactly as given (as `exec 'w1' 'w2' …`): the \
shell that split them is not asked to split them again, so `-- bash -c 'sleep 1; touch x'` \
hands bash one script.\n\n\
The command's stdout and stderr are passed through; afterwards, lines reporting denied \
operations are listed on stderr after a `[tack sandbox]` prefix. With --json, stdout carries one \
JSON object instead: {\"profile\", \"exit_code\", \"signal\", \"timed_out\", \"exit_status\" (tack's \
own, below), \"duration_ms\", \"stdout\", \"stderr\", \"stdout_truncated\", \"stderr_truncated\", \
\"denials\": [lines]}.";

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: the command's own status; 124 timed out; 128+N killed by signal N; \
2 usage error or the profile cannot be enforced here (the message says what is missing, how to \
enable it, and how to opt out); 3 the sandbox could not be set up.\n\n\
Examples:\n  tack sandbox exec --workspace . -- touch /etc/x           # fails: read-only\n  \
tack sandbox exec --workspace . -- 'python3 -m unittest'  # one word: a script\n  \
# words: an argv\n  \
tack sandbox exec --workspace . -- bash -c 'echo \"a b\"; touch x'\n  \
tack sandbox exec --profile off --workspace . -- \\\n      \
'curl -sI https://example.com'\n  \
tack sandbox exec --workspace ws --hide suites/demo/tasks -- \\\n      \
'ls suites/demo/tasks'"
)]
pub struct ExecArgs {
    /// Sandbox profile.
    #[arg(long, value_enum, default_value = "strict")]
    profile: ProfileArg,
    /// The workspace: the command's working directory and its only writable tree.
    #[arg(long, value_name = "DIR", default_value = ".", value_parser = crate::dir_arg::workspace)]
    workspace: PathBuf,
    /// Seconds before the command's whole process group is killed (exit 124).
    #[arg(long, value_name = "SECS", value_parser = crate::count_arg::at_least::<1, u64>)]
    timeout: Option<u64>,
    /// A directory the command must not see (covered by an empty one). Repeatable.
    #[arg(long = "hide", value_name = "PATH")]
    hide: Vec<PathBuf>,
    /// A path bound read-only, even inside the workspace (.git always is). Repeatable.
    #[arg(long = "read-only", value_name = "PATH")]
    read_only: Vec<PathBuf>,
    /// Bytes kept of each of stdout and stderr (the agent's default).
    #[arg(long, value_name = "BYTES")]
    output_limit: Option<usize>,
    /// Print one JSON object (the command's output, how it ended, its
    /// denials) instead of passing its output through.
    #[arg(long)]
    json: bool,
    /// The command, last (flags after it are its own; `--` before it is optional): one word is a
    /// shell script (`'make && ./run'`); several are a program and its arguments, run as given
    /// (`bash -c 'echo "a b"'`).
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub async fn run(command: SandboxCommand) -> CommandResult {
    match command {
        SandboxCommand::Exec(args) => exec(args).await,
    }
}

async fn exec(args: ExecArgs) -> CommandResult {
    let workspace = std::fs::canonicalize(&args.workspace)
        .map_err(|e| anyhow!("--workspace {}: {e}", args.workspace.display()))
        .or_fail(Failure::Usage)?;
    if !workspace.is_dir() {
        return Err(anyhow!(
            "--workspace {}: not a directory",
            workspace.display()
        ))
        .or_fail(Failure::Usage);
    }
    let defaults = HarnessConfig::default();
    // The agent's walls, trials' roots included: other trials' workspaces
    // sealed and their hidden checks covered, as for a trial's own command.
    let mut confinement = tack_suite::CommandSandbox::new(args.profile.into(), Vec::new())
        .agent_confinement(&workspace);
    if confinement.is_confined() {
        confinement.hidden.extend(args.hide.iter().cloned());
        confinement.read_only.extend(args.read_only.iter().cloned());
    }
    let script = match args.command.as_slice() {
        [script] => script.clone(),
        // `exec`: the program replaces the shell, so its exit status and
        // signals are the program's own, as they would be for the argv.
        words => format!("exec {}", command_line(words)),
    };
    let timeout = args.timeout.unwrap_or(defaults.command_timeout_secs);
    let spec = CommandSpec {
        script: &script,
        cwd: &workspace,
        env: &[],
        timeout: Duration::from_secs(timeout),
        output_limit: args.output_limit.unwrap_or(defaults.output_limit_bytes),
        confinement: &confinement,
    };
    let output = tack_sandbox::run(&spec).await.map_err(classify)?;
    let status = exit_status(&output);
    if args.json {
        outln!("{}", json(&output, status))?;
    } else {
        report(&output, timeout, spec.output_limit)?;
    }
    Ok(ExitCode::from(status))
}

fn classify(error: SandboxError) -> CommandError {
    let kind = match error {
        SandboxError::Unavailable { .. }
        | SandboxError::Spawn { .. }
        | SandboxError::Setup(
            tack_sandbox::SetupError::RootWritable(_)
            | tack_sandbox::SetupError::WritableHoldsOthers { .. },
        ) => Failure::Usage,
        _ => Failure::Internal,
    };
    CommandError {
        kind,
        error: error.into(),
    }
}

/// Passes the output through as the command wrote it (the user's own
/// command, as if run directly), then says what tack did on stderr, where
/// the denials it quotes are shown, not obeyed.
fn report(output: &CommandOutput, timeout: u64, limit: usize) -> Result<(), CommandError> {
    out!("{}", output.stdout)?;
    let _ = std::io::stderr().write_all(output.stderr.as_bytes());
    for note in tack_sandbox::render::command_notes(output, timeout, limit) {
        errln!("[tack sandbox] {note}");
    }
    Ok(())
}

/// The `--json` object: what the command printed (kept as it was, escaped
/// by JSON), how it ended, and what was denied.
fn json(output: &CommandOutput, status: u8) -> serde_json::Value {
    serde_json::json!({
        "profile": output.profile.as_str(),
        "exit_code": output.exit_code,
        "signal": output.signal,
        "timed_out": output.timed_out,
        "exit_status": status,
        "duration_ms": u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
        "stdout": output.stdout,
        "stderr": output.stderr,
        "stdout_truncated": output.stdout_truncated,
        "stderr_truncated": output.stderr_truncated,
        "denials": output.denials,
    })
}

fn exit_status(output: &CommandOutput) -> u8 {
    if output.timed_out {
        return 124;
    }
    match (output.exit_code, output.signal) {
        (Some(code), _) => u8::try_from(code).unwrap_or(255),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 255,
    }
}
