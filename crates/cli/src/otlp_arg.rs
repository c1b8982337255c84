//! `tack run --otlp URL`: the run's trials streamed to an OpenTelemetry
//! collector while it runs. The mapping and the sending are tack-interop's
//! (the same as `tack export otlp`); this holds the flags, feeds the
//! streamer from the runner's progress, and says what was sent.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tack_interop::otlp::{Streamed, Streamer, Target};
use tack_protocol::count;
use tack_runner::{Progress, ProgressFn};

use crate::exit::{Classify, CommandError, Failure};

/// How soon a finished trial's spans leave: its part is closed on a timer
/// this often, and the streamer looks for it as often.
pub const EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Args)]
pub struct OtlpRunArgs {
    /// Stream each trial to this OpenTelemetry collector as it ends (base URL, e.g.
    /// http://127.0.0.1:4318): the spans `tack export otlp` sends, within seconds. A collector
    /// that is down or slow costs spans (counted, printed), never the run.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// With --otlp: `http/protobuf` or `grpc` [default: OTEL_EXPORTER_OTLP_PROTOCOL, else
    /// http/protobuf].
    #[arg(long, value_name = "PROTOCOL", requires = "otlp")]
    otlp_protocol: Option<String>,
    /// With --otlp: a header for every request, `key=value` (repeatable); also
    /// OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(long = "otlp-header", value_name = "KEY=VALUE", requires = "otlp")]
    otlp_headers: Vec<String>,
    /// With --otlp: send message content too (prompts, answers, tool arguments and results).
    #[arg(long, requires = "otlp")]
    otlp_content: bool,
}

impl OtlpRunArgs {
    /// The target, checked before any trial runs; none without --otlp.
    pub fn target(&self) -> Result<Option<Target>, CommandError> {
        let Some(url) = &self.otlp else {
            return Ok(None);
        };
        Target::new(
            Some(url),
            self.otlp_protocol.as_deref(),
            &self.otlp_headers,
            |name| std::env::var(name).ok(),
        )
        .or_fail(Failure::Usage)
        .map(Some)
    }

    pub fn content(&self) -> bool {
        self.otlp_content
    }
}

/// Starts streaming to `target` (on the current runtime).
pub fn start(target: Target, content: bool) -> Arc<Streamer> {
    Arc::new(Streamer::start(target, content, EVERY))
}

/// `progress`, telling `streamer` of the run's directory and of each
/// finished trial as well.
pub fn feeding(progress: ProgressFn, streamer: Arc<Streamer>) -> ProgressFn {
    Arc::new(move |event: Progress| {
        match &event {
            Progress::Started { run_dir, .. } => streamer.run_started(run_dir.clone()),
            Progress::TrialFinished { summary, .. } => {
                streamer.trial_finished(summary.trial_id.clone())
            }
            Progress::Preparing { .. } => {}
        }
        progress(event)
    })
}

/// Sends what is left and returns what was streamed.
pub async fn finish(streamer: Arc<Streamer>) -> Streamed {
    match Arc::try_unwrap(streamer) {
        Ok(streamer) => streamer.finish().await,
        // The runner still holds its progress callback: it cannot, once
        // `run` has returned; said rather than waited for.
        Err(_) => Streamed {
            read_error: Some("the OTLP stream was still in use when the run ended".into()),
            ..Streamed::default()
        },
    }
}

/// One line on stderr: where the spans went, and what was lost and why.
pub fn describe(streamed: &Streamed) -> String {
    let url = streamed.target.as_ref().map_or("", |t| t.url.as_str());
    let sent = &streamed.sent;
    let mut line = format!(
        "otlp: sent {} of {} to {url}; {} dropped",
        count(sent.spans, "span"),
        count(streamed.trials, "trial"),
        sent.dropped_spans
    );
    if let Some(error) = &sent.first_error {
        line.push_str(&format!(" (first error: {error})"));
    }
    if streamed.unread_trials > 0 {
        line.push_str(&format!(
            "; {} not read back from the traces",
            count(streamed.unread_trials, "trial")
        ));
    }
    if let Some(error) = &streamed.read_error {
        line.push_str(&format!(" (reading the traces: {error})"));
    }
    line
}
