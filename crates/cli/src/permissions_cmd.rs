//! `tack permissions`: try permission rules on a command without running it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use tack_permissions::{DEFAULT_PROFILE, Decision, PermissionEngine, Rules, Verdict};

use crate::argv::command_line;
use crate::exit::{Classify, CommandResult, Failure};
use crate::out::{out, outln};

#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Judge a shell command: allow, ask or deny, the deciding rule and the part it was about.
    #[command(long_about = CHECK_ABOUT)]
    Check(CheckArgs),
    /// Print the built-in default profile, to copy and edit into a rules file.
    Profile,
}

/// Shown by `--help` (a variant's doc comment would otherwise replace the
/// long text with its one line).
const CHECK_ABOUT: &str = "Judge a shell command as the agent's bash tool call would be judged: allow, \
ask or deny, the rule that decided and the part of the command it was about.\n\n\
One word after `--` is a shell script: `-- 'ls | wc -l'`. Several words are a program and its \
arguments, as `tack sandbox exec` would run them: `-- bash -c 'ls; rm x'` is judged as \
`'bash' '-c' 'ls; rm x'`, so the script bash gets is one word, parsed and judged as a script.";

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 allow, 10 ask, 11 deny, 2 usage error (bad flags; a bad rules file — \
the message names the file, the rule index and the field).\n\n\
Examples:\n  tack permissions check -- 'git -C . push && ls'   # one word: a script\n  \
# words: a program and its arguments\n  \
tack permissions check -- bash -c 'echo \"a b\" > out'\n  \
tack permissions check --rules my-rules.toml --json -- 'cat a | grep b'"
)]
pub struct CheckArgs {
    /// Rules file (TOML). Default: the built-in profile (`tack permissions profile` prints it).
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// The workspace the command would run in: writes outside it are judged as such.
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
    /// Print the decision as JSON: {verdict, rule, part, reason, asking} (asking: every part that asks).
    #[arg(long)]
    json: bool,
    /// The command, last (flags after it are its own; `--` before it is optional): one word is a
    /// shell script; several are a program and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub fn run(command: PermissionsCommand) -> CommandResult {
    match command {
        PermissionsCommand::Check(args) => check(args),
        PermissionsCommand::Profile => {
            out!("{DEFAULT_PROFILE}")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn check(args: CheckArgs) -> CommandResult {
    let rules = match &args.rules {
        Some(path) => Rules::load(path).or_fail(Failure::Usage)?,
        None => Rules::default_profile(),
    };
    if !args.workspace.is_dir() {
        return Err(anyhow!(
            "--workspace {}: not a directory",
            args.workspace.display()
        ))
        .or_fail(Failure::Usage);
    }
    let engine = PermissionEngine::new(rules, &args.workspace);
    let decision = match args.command.as_slice() {
        [script] => engine.judge_command(script),
        words => engine.judge_command(&command_line(words)),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&decision).or_fail(Failure::Internal)?
    } else {
        // The command judged may hold anything: shown, not obeyed.
        tack_protocol::printable(&render(&decision)).into_owned()
    };
    // `tack permissions check … | head -1` closes the pipe early; the
    // verdict is in the exit code.
    outln!("{text}")?;
    Ok(exit_code(decision.verdict))
}

/// `deny  rm -rf /  — rules[7] (deny command "rm -rf*")`, then the reason.
fn render(decision: &Decision) -> String {
    let mut text = format!(
        "{:<5} {}  — {}",
        decision.verdict.as_str(),
        decision.part,
        decision.rule
    );
    if !decision.reason.is_empty() {
        text.push_str(&format!("\n      {}", decision.reason));
    }
    // An approver has to approve each of these, not only the one shown.
    if decision.asking.len() > 1 {
        text.push_str("\n      parts that ask:");
        for part in &decision.asking {
            text.push_str(&format!("\n        {part}"));
        }
    }
    text
}

/// Distinct from 1–3 (tack's own failures) so scripts can tell a verdict
/// from an error.
fn exit_code(verdict: Verdict) -> ExitCode {
    ExitCode::from(match verdict {
        Verdict::Allow => 0,
        Verdict::Ask => 10,
        Verdict::Deny => 11,
    })
}
