//! `tack export`: a recorded run in another tool's format. One subcommand
//! per format.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use tack_interop::InteropError;
use tack_protocol::count;

use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::out::{err_over, errln, outln};

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Harbor's agent trajectories (ATIF): one JSON file per trial, as Harbor's own models read them.
    Atif(AtifArgs),
    /// OpenTelemetry traces to a collector (OTLP over HTTP or gRPC): Phoenix, Langfuse, Jaeger, Honeycomb.
    Otlp(OtlpArgs),
}

const OTLP_HELP: &str = "\
Sends every trial of each run (every attempt) as one trace, named and attributed by the
OpenTelemetry GenAI semantic conventions:
  invoke_agent tack    the trial: gen_ai.agent.name, gen_ai.conversation.id (the
                       trial id), gen_ai.provider.name, gen_ai.request.model,
                       gen_ai.usage.*_tokens;
                       tack.run_id, tack.variant, tack.task, tack.trial_index,
                       tack.attempt, tack.outcome, tack.stop_reason,
                       tack.cost_usd, tack.simulated
  chat <model>         each model call: gen_ai.operation.name,
                       gen_ai.provider.name, gen_ai.request.model,
                       gen_ai.response.model, gen_ai.response.finish_reasons,
                       gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
                       cache tokens, error.type (`_OTHER` when unknown)
  execute_tool <tool>  each tool call, under the model call that asked for it:
                       gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.type;
                       tack.exit_code
  approval <tool>      each approval wait; check <name>: each check, its verdict
                       a gen_ai.evaluation.result event (score 1 pass, 0 fail,
                       label, explanation)
Message content (gen_ai.input.messages, gen_ai.output.messages, tool arguments and results) is
sent only with --content. Phoenix's OpenInference span kinds and token counts ride along.
Ids are derived from the run and trial ids: exporting a run again gives the same trace ids (a
collector that keeps the first copy of a span, as Phoenix does, ignores a second export, --content
or not). The resource is service.name=tack, or OTEL_SERVICE_NAME, with OTEL_RESOURCE_ATTRIBUTES
(key=value,…; Phoenix files spans under the project openinference.project.name names).

Where to: --endpoint (a base URL; http/protobuf posts to <endpoint>/v1/traces), else
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as written) or OTEL_EXPORTER_OTLP_ENDPOINT; --protocol or
OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (http/protobuf, grpc); --header and
OTEL_EXPORTER_OTLP_(TRACES_)HEADERS (key=value,…); OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT (ms, 10000).
A collector that is down or does not answer in time costs the spans of that request, counted
and reported; the export goes on with the next.

Examples:
  tack export otlp traces/<run-id> --endpoint http://127.0.0.1:6006   # Phoenix
  tack export otlp traces/<a> traces/<b> --endpoint http://127.0.0.1:4317 \\
      --protocol grpc
  OTEL_EXPORTER_OTLP_ENDPOINT=https://api.honeycomb.io \\
      OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team=KEY \\
      tack export otlp traces/<run-id>

Exit codes: 0 every span accepted, 1 some spans dropped (the first error is printed),
2 bad flags, no endpoint or no such run, 3 the traces could not be read.";

#[derive(Debug, Args)]
#[command(after_help = OTLP_HELP)]
pub struct OtlpArgs {
    /// The runs: traces/<run-id>, run ids (looked up under --traces), or runs' URLs.
    #[arg(required = true, value_name = "RUN")]
    runs: Vec<String>,
    /// Where run ids are looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// The collector's base URL, e.g. http://127.0.0.1:4318 [default: OTEL_EXPORTER_OTLP_ENDPOINT].
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// `http/protobuf` or `grpc` [default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf].
    #[arg(long)]
    protocol: Option<String>,
    /// A header for every request, `key=value` (repeatable), e.g. an API key.
    #[arg(long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// Send message content too: prompts, answers, tool arguments and results.
    #[arg(long)]
    content: bool,
    /// Print one JSON object when done: {"type": "otlp_exported", "target", "trials", "sent"}.
    #[arg(long)]
    json: bool,
}

const ATIF_HELP: &str = "\
Writes OUT/<trial_id>.json for every trial of the run, every attempt, in the Agent Trajectory
Interchange Format (ATIF-v1.6) that Harbor's models (harbor.models.trajectories.Trajectory)
validate:
  session_id       the trial id
  agent            name `tack`, tack's version, the variant's model
                   (variant under extra)
  steps            the conversation in order: system and user messages as steps
                   of that source (what the harness wrote as the user, a
                   compaction's instruction and summary, as `system`); each
                   assistant message an `agent` step with its tool calls, the
                   model that answered and that call's tokens and cost; the
                   tool results as its observation. A subagent's turns are
                   inlined where they happened, as recorded (not yet
                   ATIF-v1.7's subagent_trajectories)
  final_metrics    the trial's tokens, cached tokens, cost, and the number
                   of steps
  extra.tack       what ATIF has no field for: run, variant, task, trial index,
                   attempt, outcome, stop reason, counts (tool errors,
                   retries, interventions, feedback rounds, denied calls),
                   every check (command, passed, output), every approval
                   (part, rule, approver, verdict, wait), duration, error
Each tool result's extra holds the call's exit code and error; an agent step's extra the model
calls that failed before the one that answered.

Examples:
  tack export atif traces/<run-id>
  tack export atif <run-id> --out trajectories/ --json

Exit codes: 0 written, 2 no such run or OUT is not empty, 3 the traces could not be read or the
files not written.";

#[derive(Debug, Args)]
#[command(after_help = ATIF_HELP)]
pub struct AtifArgs {
    /// The run: traces/<run-id>, the run id (looked up under --traces), or its URL.
    run: String,
    /// Where run ids are looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// The directory to write the trajectories to; it must not exist or be empty
    /// [default: exports/<run-id>/atif].
    #[arg(long, value_name = "DIR", value_parser = crate::dir_arg::out_dir)]
    out: Option<PathBuf>,
    /// Print one JSON object when done: {"type": "atif_exported", "out_dir", "trajectories"}.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: ExportCommand) -> CommandResult {
    match command {
        ExportCommand::Atif(args) => atif(args).await,
        ExportCommand::Otlp(args) => otlp(args).await,
    }
}

async fn otlp(args: OtlpArgs) -> CommandResult {
    let mut runs = Vec::with_capacity(args.runs.len());
    for run in &args.runs {
        runs.push(crate::run_arg::resolve(Path::new(run), &args.traces).await?);
    }
    let target = tack_interop::otlp::Target::new(
        args.endpoint.as_deref(),
        args.protocol.as_deref(),
        &args.headers,
        |name| std::env::var(name).ok(),
    )
    .or_fail(Failure::Usage)?;
    let exporter = tack_interop::otlp::Exporter::new(target).or_fail(Failure::Internal)?;
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    let progress = |done: u64, total: u64| {
        if show_progress {
            err_over!("tack export otlp: {done}/{total} trials");
        }
    };
    let exported = tack_interop::otlp::export(&runs, &exporter, args.content, progress)
        .await
        .or_fail(Failure::Internal)?;
    if show_progress {
        errln!();
    }
    let sent = &exported.sent;
    if args.json {
        let mut value = serde_json::to_value(&exported).or_fail(Failure::Internal)?;
        value["type"] = "otlp_exported".into();
        outln!("{value}")?;
    } else {
        outln!(
            "sent {} of {} to {} in {}; {} dropped",
            count(sent.spans, "span"),
            count(exported.trials, "trial"),
            exported.target.url,
            count(sent.requests, "request"),
            sent.dropped_spans
        )?;
    }
    if let Some(error) = &sent.first_error {
        errln!(
            "tack export otlp: {} spans dropped; first error: {error}",
            sent.dropped_spans
        );
    }
    Ok(if sent.dropped_spans > 0 {
        Failure::Found.into()
    } else {
        ExitCode::SUCCESS
    })
}

async fn atif(args: AtifArgs) -> CommandResult {
    let run_dir = crate::run_arg::resolve(Path::new(&args.run), &args.traces).await?;
    let run_id = run_dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("exports").join(run_id).join("atif"));
    // Progress on long exports, for a person watching.
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    let progress = |done: usize, total: usize| {
        if show_progress {
            err_over!("tack export atif: {done}/{total} trials");
        }
    };
    let exported = tack_interop::atif::export(&run_dir, &out, progress).map_err(|error| {
        let kind = match error {
            InteropError::OutExists { .. } => Failure::Usage,
            _ => Failure::Internal,
        };
        CommandError {
            kind,
            error: error.into(),
        }
    })?;
    if show_progress {
        errln!();
    }
    if args.json {
        let mut value = serde_json::to_value(&exported).or_fail(Failure::Internal)?;
        value["type"] = "atif_exported".into();
        outln!("{value}")?;
    } else {
        outln!(
            "wrote {} ATIF trajectories to {}",
            exported.trajectories,
            exported.out_dir.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
