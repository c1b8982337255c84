//! `tack proxy`: record the model calls of an agent tack does not drive
//! (Claude Code, Codex CLI, mini-swe-agent, …) into a run that `tack show`,
//! `tack report` and `tack query` read like any other. The session is one
//! trial (variant `proxy`, task `proxy`), journalled call by call and
//! written as Parquet when the proxy is stopped.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use clap::Args;
use tack_protocol::time::now_ms;
use tack_protocol::{
    Event, EventSink, StopReason, TrialFinished, TrialOutcome, TrialStarted, trial_id,
};
use tack_proxy::{Proxy, ProxyConfig};
use tack_trace::{Manifest, RunStatus, RunWriter, SuiteInfo, TrialRecorder, VariantInfo};

use crate::exit::{Classify, CommandResult, Failure};
use crate::out::{errln, outln};

const AFTER_HELP: &str = "\
Point the agent's base URL at the proxy, with its usual key; the proxy forwards every request to
--upstream (same path and query) and streams the answers back as they come. Calls to
  POST …/chat/completions   OpenAI Chat Completions
  POST …/responses          OpenAI Responses
  POST …/messages           Anthropic Messages
are recorded, streamed or not: the messages sent, the answer, tokens, cost, timing, retries and
errors. Other paths are forwarded unrecorded. Keys are passed on and never written anywhere.

Examples:
  tack proxy --listen 127.0.0.1:8080 --upstream https://api.anthropic.com
  ANTHROPIC_BASE_URL=http://127.0.0.1:8080 claude -p 'fix the failing test'

  # port 0: a free port, printed
  tack proxy --upstream https://api.openai.com --json
  OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 codex exec 'fix the failing test'

Stop it with Ctrl-C (or SIGTERM): calls in flight finish, the run is written, and tack prints
where it is. Then: tack show DIR/<run-id> proxy--proxy--0, tack report DIR/<run-id>.

On stderr, once listening: `tack proxy: listening on http://ADDR`; with --json, stdout gets
{\"type\":\"proxy_listening\",\"url\":…,\"run\":…} then, when stopped, {\"type\":\"proxy_finished\",…}.

Exit codes:
  0  stopped by a signal, run written
  2  bad flags (the upstream is not an http(s) origin, the address
     cannot be bound)
  3  the run could not be written";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ProxyArgs {
    /// Where to listen; port 0 picks a free port (printed once bound).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The API's origin, without the /v1 the agent sends: https://api.openai.com,
    /// https://api.anthropic.com, http://localhost:11434 (Ollama), …
    #[arg(long)]
    upstream: url::Url,
    /// The traces directory: the run goes into DIR/<run-id>/.
    #[arg(
        long,
        visible_alias = "traces",
        value_name = "DIR",
        default_value = "traces"
    )]
    run: PathBuf,
    /// Print JSON lines on stdout: where it listens, then what it recorded.
    #[arg(long)]
    json: bool,
}

/// The upstream as recorded in the manifest: no credentials, no query.
fn shown_upstream(upstream: &url::Url) -> String {
    let mut shown = upstream.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.as_str().trim_end_matches('/').to_string()
}

fn manifest(run_id: &str, upstream: &str) -> Manifest {
    let suite = SuiteInfo {
        name: "proxy".to_string(),
        path: "(tack proxy)".to_string(),
        content_hash: String::new(),
    };
    let variant = VariantInfo {
        name: "proxy".to_string(),
        model: format!("proxy:{upstream}"),
        simulated: false,
        description: format!("model calls an external agent made through {upstream}"),
        config: serde_json::json!({ "upstream": upstream }),
    };
    let tasks = vec!["proxy".to_string()];
    Manifest {
        price_table: Some(tack_harness::PriceTable::builtin().version().to_string()),
        ..Manifest::start(run_id.to_string(), suite, vec![variant], tasks)
    }
}

pub async fn run(args: ProxyArgs) -> CommandResult {
    let upstream = shown_upstream(&args.upstream);
    let run_id = tack_runner::new_run_id("proxy");
    let mut manifest = manifest(&run_id, &upstream);
    let config = ProxyConfig::new(args.listen, args.upstream.clone());
    let writer = RunWriter::create(&args.run, &manifest)
        .with_context(|| format!("creating a run under {}", args.run.display()))
        .or_fail(Failure::Internal)?;
    let started_at_ms = now_ms();
    let trial = trial_id("proxy", "proxy", 0, 0);
    let recorder = writer
        .trial(TrialStarted {
            run_id: run_id.clone(),
            trial_id: trial.clone(),
            variant: "proxy".to_string(),
            task: "proxy".to_string(),
            trial_index: 0,
            attempt: 0,
            seed: 0,
            model: manifest.variants[0].model.clone(),
            started_at_ms,
            // The agent behind the proxy runs wherever its user started it.
            environment: None,
        })
        .or_fail(Failure::Internal)?;
    let proxy = match Proxy::start(config, recorder).await {
        Ok(proxy) => proxy,
        Err(error) => {
            // Nothing was recorded: leave no half-made run behind.
            let _ = std::fs::remove_dir_all(writer.dir());
            return Err(error).or_fail(Failure::Usage);
        }
    };
    let url = format!("http://{}", proxy.addr());
    let run_dir = writer.dir().display().to_string();
    if !proxy.addr().ip().is_loopback() {
        errln!(
            "tack proxy: warning: listening on {}, reachable from other machines; anyone who \
             reaches it can spend the upstream key it forwards with, and what they send is recorded",
            proxy.addr()
        );
    }
    errln!("tack proxy: listening on {url}");
    errln!("tack proxy: forwarding to {upstream}, recording into {run_dir} (Ctrl-C to stop)");
    if args.json {
        let line = serde_json::json!({ "type": "proxy_listening", "url": url, "run": run_dir });
        outln!("{line}")?;
    }
    crate::stop::stop_signal().await;
    let stopped = proxy.shutdown().await.or_fail(Failure::Internal)?;
    let finished = TrialFinished {
        // The session ended because it was stopped; no checks ran.
        outcome: TrialOutcome::Cancelled,
        stop_reason: StopReason::Cancelled,
        totals: stopped.totals.clone(),
        feedback_rounds: 0,
        tampered: false,
        checks_passed: None,
        duration_ms: (now_ms() - started_at_ms).max(0) as u64,
        finished_at_ms: now_ms(),
        error: None,
    };
    finish_run(&writer, &mut manifest, stopped.sink, finished)?;
    if let Some(error) = stopped.sink_error {
        return Err(anyhow!("some calls could not be journalled: {error}"))
            .or_fail(Failure::Internal);
    }
    errln!(
        "tack proxy: recorded {} ({} failed) into {run_dir}",
        tack_protocol::count(stopped.calls, "call"),
        stopped.failed_calls
    );
    errln!("  tack show {run_dir} {trial}    tack report {run_dir}");
    if args.json {
        let line = serde_json::json!({
            "type": "proxy_finished", "run": run_dir, "trial": trial,
            "calls": stopped.calls, "failed_calls": stopped.failed_calls,
        });
        outln!("{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn finish_run(
    writer: &RunWriter,
    manifest: &mut Manifest,
    mut recorder: TrialRecorder,
    finished: TrialFinished,
) -> Result<(), crate::exit::CommandError> {
    recorder
        .record(Event::TrialFinished(finished))
        .map_err(|e| anyhow!("{e}"))
        .or_fail(Failure::Internal)?;
    recorder.finish().or_fail(Failure::Internal)?;
    manifest.status = RunStatus::Finished;
    manifest.finished_at = Some(tack_runner::rfc3339_now());
    writer
        .close(manifest)
        .with_context(|| format!("writing the run {}", writer.dir().display()))
        .or_fail(Failure::Internal)
}
