//! `tack exec`: one unattended agent run on a directory, outside any suite.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use tack_agent::Pricer;
use tack_harness::Model;
use tack_harness::{
    Harness, HarnessRun, HarnessSetup, ModelError, NamedModel, Restored, Verification,
};
use tack_protocol::{
    ApproverConfig, ApproverPolicy, BuiltinModel, Event, EventSink, HarnessConfig, ModelSpec,
    ResultView, SinkError, TrialOutcome,
};
use tack_suite::Check;

use crate::count_arg::at_least;
use crate::exit::{Classify, CommandError, CommandResult, Failure, usage};
use crate::out::{self, errln, outln};
use crate::profile_arg::ProfileArg;
use tack_agent::session_log::{self, LogLine, SessionLog, SessionSettings};

const AFTER_HELP: &str = "\
Exit codes:
  0    the agent completed and every --check passed; without --check, the agent
       completed and nothing verified it (outcome `unverified`:
       \"completed, not verified\")
  1    the agent completed but a --check failed (verification failed)
  2    usage error (bad flags, missing workspace, bad rules file)
  3    harness error (tack failed, e.g. could not write the event stream)
  4    a limit stopped the agent (--max-steps, --max-wall-secs, --max-tokens)
  5    the model failed, or its provider stayed unavailable (after retries)
  130  cancelled (Ctrl-C)

Without --json, stdout carries the agent's last message (its answer) and stderr the account of the
run; with --json, stdout carries one JSON object per event, in order: {\"seq\": N, \"event\": {\"type\": …}}
(trial_started is not sent; message, model_call, approval_requested, approval, tool_call, check; a
final `exec_finished`, or `exec_interrupted` after Ctrl-C, which leaves the session to --resume).

Sessions: with --session DIR the events also go to DIR/events.jsonl, each synced to disk before the
run goes on. After a crash, kill -9 or a closed terminal, `tack exec --resume DIR` carries on: the
conversation is restored, a tool call that ran is not run again, and one that was waiting for
approval is asked again. `tack events DIR --after-seq N --follow` streams the log.

The run works in place on --workspace: files the agent writes stay written.";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ExecArgs {
    /// What to ask the agent.
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    instruction: Option<String>,
    /// The directory the agent works in (in place).
    #[arg(long, short = 'w', required_unless_present = "resume", conflicts_with = "resume", value_parser = crate::dir_arg::workspace)]
    workspace: Option<PathBuf>,
    /// Keep a durable event log in DIR (created), so the run can be resumed and followed.
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    session: Option<PathBuf>,
    /// Carry on the session in DIR (started with --session) where it stopped; its instruction,
    /// workspace, model and limits are the session's (giving them is an error); the approver and
    /// --base-url (a model server that moved) may be given anew.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    #[command(flatten)]
    model: ModelFlags,
    #[command(flatten)]
    mcp: crate::mcp_arg::McpFlags,
    /// A command run in the workspace after the agent stops; exit 0 = pass. Repeatable.
    #[arg(long = "check", value_parser = not_blank, conflicts_with = "resume")]
    checks: Vec<String>,
    /// Rounds in which failing check output goes back to the agent.
    #[arg(long, default_value_t = 0, conflicts_with = "resume")]
    feedback_rounds: u32,
    /// Stop the agent after this many model calls (exit 4).
    #[arg(long, default_value_t = 30, value_parser = at_least::<1, u32>, conflicts_with = "resume")]
    max_steps: u32,
    /// Stop the agent after this many seconds (exit 4); a command running then is stopped too.
    #[arg(long, value_parser = at_least::<1, u64>, conflicts_with = "resume")]
    max_wall_secs: Option<u64>,
    /// Stop the agent once its model calls have used this many tokens, input and output (exit 4).
    #[arg(long, value_parser = at_least::<1, u64>, conflicts_with = "resume")]
    max_tokens: Option<u64>,
    /// How command results are shown to the model.
    #[arg(long, value_enum, default_value = "full", conflicts_with = "resume")]
    tool_results: ResultViewArg,
    /// Permission rules: `default` (the built-in profile) or a rules file. Without it every call is allowed.
    #[arg(long, conflicts_with = "resume")]
    permissions: Option<String>,
    /// How the agent's commands are confined (see `tack doctor`).
    #[arg(long, value_enum, default_value = "strict", conflicts_with = "resume")]
    sandbox: ProfileArg,
    /// Who answers when a call needs approval [default: interactive on a terminal, deny_all otherwise].
    #[arg(long, value_enum, conflicts_with = "approve_with")]
    approver: Option<ApproverArg>,
    /// A command that decides approvals: it gets the request as JSON on stdin (and tack's environment);
    /// exit 0 approves, the first line it prints is its reason.
    #[arg(long, value_name = "COMMAND")]
    approve_with: Option<String>,
    /// Seed of the simulated agent.
    #[arg(long, default_value_t = 0, conflicts_with = "resume")]
    seed: u64,
    /// Print the event stream as JSON lines on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ResultViewArg {
    Full,
    // Also spelled as suite.toml spells it, as --sandbox's values are.
    #[value(alias = "stdout_only")]
    StdoutOnly,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ApproverArg {
    #[value(alias = "approve_all")]
    ApproveAll,
    #[value(alias = "deny_all")]
    DenyAll,
    Interactive,
}

impl ExecArgs {
    /// The approver the flags name, if they name one.
    fn approver_given(&self) -> Option<ApproverConfig> {
        if let Some(command) = &self.approve_with {
            return Some(ApproverConfig {
                policy: ApproverPolicy::Script,
                script: Some(command.clone()),
                ..ApproverConfig::default()
            });
        }
        let policy = match self.approver? {
            ApproverArg::ApproveAll => ApproverPolicy::ApproveAll,
            ApproverArg::DenyAll => ApproverPolicy::DenyAll,
            ApproverArg::Interactive => ApproverPolicy::Interactive,
        };
        Some(ApproverConfig {
            policy,
            ..ApproverConfig::default()
        })
    }

    fn config(&self) -> HarnessConfig {
        let approver = self.approver_given().unwrap_or_else(|| ApproverConfig {
            policy: if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                ApproverPolicy::Interactive
            } else {
                ApproverPolicy::DenyAll
            },
            ..ApproverConfig::default()
        });
        HarnessConfig {
            tool_results: match self.tool_results {
                ResultViewArg::Full => ResultView::Full,
                ResultViewArg::StdoutOnly => ResultView::StdoutOnly,
            },
            max_steps: self.max_steps,
            max_wall_secs: self.max_wall_secs,
            max_tokens: self.max_tokens,
            feedback_rounds: self.feedback_rounds,
            sandbox: self.sandbox.into(),
            permissions: self.permissions.clone(),
            approver,
            ..HarnessConfig::default()
        }
    }
}

/// Runs the agent; Ctrl-C cancels it: the run stops where it is (files the
/// agent wrote stay written), and the exit code is 130. Once the agent runs,
/// a final `exec_interrupted` event says so, numbered and in the session's
/// log (which `--resume` carries on); before, a bare `exec_finished`.
pub async fn run(args: ExecArgs) -> CommandResult {
    let json = args.json;
    let run = run_to_end(args);
    tokio::pin!(run);
    tokio::select! {
        // Polled first: a Ctrl-C the run sees is answered by it.
        biased;
        result = &mut run => result,
        _ = tokio::signal::ctrl_c() => {
            // The run may see the same Ctrl-C a poll later: its answer (the
            // session's last event) is the one to give.
            let grace = std::time::Duration::from_millis(500);
            if let Ok(result) = tokio::time::timeout(grace, &mut run).await {
                return result;
            }
            let finished = serde_json::json!({ "type": "exec_finished", "outcome": TrialOutcome::Cancelled });
            if json {
                outln!("{}", serde_json::json!({ "event": finished }))?;
            } else {
                errln!("cancelled");
            }
            Ok(exit_code(TrialOutcome::Cancelled))
        }
    }
}

async fn run_to_end(args: ExecArgs) -> CommandResult {
    let (settings, restored, log) = match &args.resume {
        Some(dir) => {
            let (settings, restored, log) = resumed(dir, &args)?;
            outside_workspace(dir, &settings.workspace)?;
            (settings, Some(restored), Some(log))
        }
        None => {
            let settings = new_settings(&args)?;
            let log = match &args.session {
                Some(dir) => {
                    outside_workspace(dir, &settings.workspace)?;
                    Some(SessionLog::create(dir, &settings).or_fail(Failure::Usage)?)
                }
                None => None,
            };
            (settings, None, log)
        }
    };
    let setup = HarnessSetup::for_directory(
        settings.config.clone(),
        settings.workspace.clone(),
        Some(crate::terminal_approver::shared()),
    )
    .or_fail(Failure::Internal)?;
    let harness = Harness::assemble(setup).await.map_err(flag_error)?;
    let named = NamedModel {
        model: settings.model.clone(),
        base_url: settings.base_url.clone(),
    };
    let (mut model, pricer) = build_model(&named, &settings.instruction, settings.seed)?;
    let checks: Vec<Check> = settings
        .checks
        .iter()
        .enumerate()
        .map(|(i, run)| Check::command(format!("check {}", i + 1), run.clone(), 600))
        .collect();
    let mut sink = ExecSink::new(args.json, log);
    let verification = Verification::Commands(&checks);
    if let Some(restored) = &restored {
        errln!(
            "resuming at event {}: {} step(s) done, {} call(s) to settle",
            sink.seq,
            restored.steps(),
            restored.calls_to_run()
        );
    }
    let ran = tokio::select! {
        run = async {
            match restored {
                Some(restored) => {
                    harness
                        .resume(model.as_mut(), pricer, restored, &verification, &mut sink)
                        .await
                }
                None => {
                    let instruction = &settings.instruction;
                    harness
                        .run(model.as_mut(), pricer, instruction, &verification, &mut sink)
                        .await
                }
            }
        } => Some(run),
        _ = tokio::signal::ctrl_c() => None,
    };
    let Some(run) = ran else {
        sink.interrupted(args.resume.as_ref().or(args.session.as_ref()));
        return Ok(exit_code(TrialOutcome::Cancelled));
    };
    let outcome = run.outcome();
    sink.finish(outcome, &run);
    // An outage is an infra_error in a benchmark (it says nothing about the
    // agent); to someone running one task it is still "the model failed".
    if run.agent.stop_reason == tack_protocol::StopReason::ProviderUnavailable {
        return Ok(ExitCode::from(5));
    }
    Ok(exit_code(outcome))
}

/// A session directory inside the workspace is the agent's to rewrite: its
/// settings (the sandbox, the checks, the base URL) would be the agent's
/// on the next --resume. Refused, for a new session and a resumed one.
fn outside_workspace(dir: &Path, workspace: &Path) -> Result<(), CommandError> {
    let real = |path: &Path| {
        path.canonicalize()
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    if real(dir).starts_with(real(workspace)) {
        return Err(usage(format!(
            "the session directory {} is inside the workspace {}, where the agent could rewrite \
             its settings (its sandbox among them); keep sessions outside the workspace",
            dir.display(),
            workspace.display()
        )));
    }
    Ok(())
}

/// The session in `dir`, to carry on: its settings (the approver and the
/// base URL given anew), where it stopped, and its log. An outage (or a
/// setup that failed) ended the run, not the work: such a session is
/// carried on, on --base-url if the server moved; a finished one is not.
fn resumed(
    dir: &Path,
    args: &ExecArgs,
) -> Result<(SessionSettings, Restored, SessionLog), CommandError> {
    let (mut settings, lines, log) = SessionLog::reopen(dir).or_fail(Failure::Usage)?;
    if let Some(last) = lines.last().filter(|l| l.is_finished()) {
        let outcome = last.event["outcome"].as_str().unwrap_or("done");
        if outcome != TrialOutcome::InfraError.as_str() {
            return Err(usage(format!(
                "the session in {} has finished ({outcome}); start a new one with --session",
                dir.display(),
            )));
        }
    }
    if let Some(approver) = args.approver_given() {
        settings.config.approver = approver;
    }
    // The session's model is its own; where it is served may move
    // (a local server restarted on another port).
    if args.model.model.is_some() {
        return Err(usage(format!(
            "--model: the session in {} keeps its model ({}); only --base-url may be given anew",
            dir.display(),
            settings.model
        )));
    }
    if let Some(base_url) = &args.model.base_url {
        settings.base_url = Some(base_url.clone());
    }
    if args.mcp.given() {
        let servers: Vec<&str> = (settings.config.mcp_servers.iter())
            .map(|server| server.name.as_str())
            .collect();
        let servers = match servers.is_empty() {
            true => "none".to_string(),
            false => servers.join(", "),
        };
        return Err(usage(format!(
            "--mcp-config: the session in {} keeps its MCP servers ({servers}); carry it on \
             without --mcp-config",
            dir.display(),
        )));
    }
    let restored = Restored::from_events(&session_log::events(&lines));
    Ok((settings, restored, log))
}

/// A `--check` that says something: an empty one (an unset `$TEST_CMD`)
/// would pass whatever the agent did.
fn not_blank(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("an empty check passes whatever the agent did; give a command, e.g. --check 'python3 -m pytest -q'".to_string());
    }
    Ok(text.to_string())
}

/// What a new run (and its session, if any) starts with.
fn new_settings(args: &ExecArgs) -> Result<SessionSettings, CommandError> {
    let (Some(instruction), Some(workspace)) = (&args.instruction, &args.workspace) else {
        return Err(usage(
            "give the instruction and --workspace, or --resume DIR to carry on a session",
        ));
    };
    if !workspace.is_dir() {
        return Err(usage(format!(
            "--workspace {} is not a directory; point it at the project the agent should work on",
            workspace.display()
        )));
    }
    let NamedModel { model, base_url } = args.model.resolve();
    Ok(SessionSettings {
        instruction: instruction.clone(),
        workspace: workspace.canonicalize().or_fail(Failure::Usage)?,
        model,
        base_url,
        seed: args.seed,
        checks: args.checks.clone(),
        config: HarnessConfig {
            mcp_servers: args.mcp.servers()?,
            ..args.config()
        },
    })
}

/// The model flags `exec` and `chat` share.
#[derive(Debug, Args)]
pub struct ModelFlags {
    /// The model: `sim` (the built-in simulated agent), or `openai:<model>` / `anthropic:<model>`
    /// [default: $MODEL (environment or ~/.config/tack/env), else sim].
    #[arg(long)]
    model: Option<String>,
    /// The provider's API base URL, e.g. http://127.0.0.1:11434/v1 for Ollama [default: $BASE_URL, else the provider's].
    #[arg(long)]
    base_url: Option<String>,
}

impl ModelFlags {
    /// The model named (the flag, else `MODEL`, else `sim`) and its base URL.
    pub fn resolve(&self) -> NamedModel {
        NamedModel::or_from_env(self.model.clone(), self.base_url.clone())
    }

    /// The model, built for `instruction` (which the built-in models read).
    pub fn build(
        &self,
        instruction: &str,
        seed: u64,
    ) -> Result<(Box<dyn Model>, Option<Pricer>), CommandError> {
        build_model(&self.resolve(), instruction, seed)
    }
}

/// The model and its pricer; a model that cannot be built is a usage
/// error, and one that is no model spec is blamed on the flag. The oracle
/// applies a suite task's reference solution: outside a suite there is
/// none, and it would stop at once having done nothing.
fn build_model(
    named: &NamedModel,
    instruction: &str,
    seed: u64,
) -> Result<(Box<dyn Model>, Option<Pricer>), CommandError> {
    if let Ok(ModelSpec::Builtin(BuiltinModel::Oracle)) = ModelSpec::parse(&named.model) {
        return Err(usage(
            "--model oracle applies a suite task's reference solution, and here there is none: \
             use sim (the simulated agent) or a provider's model, or run the task in a suite \
             (tack run SUITE --variant oracle)",
        ));
    }
    named.build(instruction, seed).map_err(|error| match error {
        ModelError::Spec(error) => usage(format!("--model: {error}")),
        other => CommandError {
            kind: Failure::Usage,
            error: other.into(),
        },
    })
}

/// A harness that cannot be assembled from `exec`'s or `chat`'s flags: the
/// error names the flag, not the suite field it shares a check with.
pub fn flag_error(error: tack_harness::HarnessError) -> CommandError {
    match error {
        tack_harness::HarnessError::Permissions(rules) => usage(format!("--permissions: {rules}")),
        other => CommandError {
            kind: Failure::Usage,
            error: other.into(),
        },
    }
}

/// The documented exit code of each outcome.
pub fn exit_code(outcome: TrialOutcome) -> ExitCode {
    ExitCode::from(match outcome {
        TrialOutcome::Passed | TrialOutcome::Unverified => 0,
        TrialOutcome::VerificationFailed => 1,
        TrialOutcome::HarnessError | TrialOutcome::InfraError => 3,
        TrialOutcome::Limit => 4,
        TrialOutcome::ModelError => 5,
        TrialOutcome::Cancelled => 130,
    })
}

/// Streams events: JSON lines on stdout, or a short account on stderr;
/// with a session, into its log first.
struct ExecSink {
    json: bool,
    seq: u64,
    log: Option<SessionLog>,
    /// What the agent said last: without --json, its answer on stdout.
    answer: Option<String>,
}

impl ExecSink {
    fn new(json: bool, log: Option<SessionLog>) -> ExecSink {
        let seq = log.as_ref().map_or(0, SessionLog::next_seq);
        ExecSink {
            json,
            seq,
            log,
            answer: None,
        }
    }

    /// Writes one event to the session log (when there is one) and, with
    /// --json, to stdout, under the next sequence number.
    fn emit(&mut self, event: serde_json::Value) -> Result<(), SinkError> {
        let seq = match &mut self.log {
            Some(log) => log.append(&event).map_err(SinkError::store)?,
            None => self.seq,
        };
        self.seq = seq + 1;
        if self.json {
            outln!("{}", LogLine { seq, event }.to_json())?;
            // With --json the events are what the run is for: a stream
            // nobody reads ends the run as a harness error (exit 3).
            if out::closed() {
                return Err(SinkError::Closed(
                    "stdout was closed: nobody reads the events",
                ));
            }
        }
        Ok(())
    }

    /// The run was cut off by Ctrl-C: said, numbered, in the log (the
    /// session stays resumable) and on stdout with --json.
    fn interrupted(&mut self, session: Option<&PathBuf>) {
        let line = serde_json::json!({
            "type": session_log::INTERRUPTED,
            "outcome": TrialOutcome::Cancelled,
        });
        if let Err(error) = self.emit(line) {
            errln!("error: {error}");
        }
        match session {
            Some(dir) => errln!(
                "cancelled; carry the session on with `tack exec --resume {}`",
                dir.display()
            ),
            None => errln!("cancelled"),
        }
    }

    fn finish(&mut self, outcome: TrialOutcome, run: &HarnessRun) {
        let totals = &run.agent.totals;
        let summary = serde_json::json!({
            "type": "exec_finished",
            "outcome": outcome,
            "stop_reason": run.agent.stop_reason,
            "steps": totals.steps,
            "tool_calls": totals.tool_calls,
            "tool_errors": totals.tool_errors,
            "retries": totals.retries,
            "interventions": totals.interventions,
            "sandbox_denials": totals.sandbox_denials,
            "input_tokens": totals.usage.input_tokens,
            "output_tokens": totals.usage.output_tokens,
            // No check judged: nothing passed (an outage, or no --check).
            "checks_passed": run.checks_passed.filter(|_| run.verified),
            "verified": run.verified,
            "feedback_rounds": run.feedback_rounds,
            "error": run.error(),
        });
        if let Err(error) = self.emit(summary) {
            errln!("error: {error}");
        }
        if !self.json {
            // The answer is the run's product (`tack exec … > answer.txt`);
            // the account of how it went stays on stderr.
            if let Some(answer) = &self.answer {
                let _ = outln!("{}", tack_protocol::printable(answer.trim_end()));
            }
            let (stop, totals) = (run.agent.stop_reason, &run.agent.totals);
            errln!("{}", tack_report::text::exec_outcome(outcome, stop, totals));
            if let Some(error) = run.error() {
                errln!("error: {error}");
            }
        }
    }
}

impl EventSink for ExecSink {
    fn record(&mut self, event: Event) -> Result<(), SinkError> {
        // Serialized only for a reader: the log, or stdout with --json.
        if self.json || self.log.is_some() {
            let value = serde_json::to_value(&event)?;
            self.emit(value)?;
        } else {
            self.seq += 1;
        }
        if self.json {
            return Ok(());
        }
        if let Event::Message { message, .. } = &event
            && message.role == tack_protocol::Role::Assistant
            && !message.content.trim().is_empty()
        {
            self.answer = Some(message.content.clone());
        }
        if let Some(line) = tack_report::text::exec_event(&event) {
            errln!("{line}");
        }
        Ok(())
    }
}
