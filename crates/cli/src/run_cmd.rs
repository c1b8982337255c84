use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use clap::Args;
use tack_protocol::{TrialOutcome, count};
use tack_report::text::{self, SummaryTrial};
use tack_runner::{CancelFlag, Progress, ResumedRun, RunPlan, RunResult};
use tack_store::{Location, RemoteUrl};
use tack_trace::Manifest;

use crate::count_arg::at_least;
use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::out::{err, errln, out, outln};
use crate::suite_cmd::default_jobs;

const AFTER_HELP: &str = "\
Exit codes:
  0    every planned trial ran (whatever the agents scored: see the summary and
       the report)
  2    usage or input error, before any trial: bad flags, or a bad suite (the
       message names the file, the variant or task, and the field), or a variant
       that cannot run on this machine
  3    tack failed: a trial ended in harness_error (stderr lists each one:
       variant, task, trial and the error), or the traces or the report could
       not be written
  130  interrupted (Ctrl-C, or SIGTERM from a CI runner or Kubernetes): the
       trials that ran are recorded and reported; a second signal stops at
       once (the trials cut off run again on --resume)

A run that stopped (Ctrl-C, kill -9, a machine restart) continues with `tack run --resume
traces/<run-id>`: finished trials are kept, trials that were cut off are kept as `cancelled`
attempts and run again, and the manifest records the resume. The suite, variants, tasks, trials,
seed and shard default to the run's own; anything that would change the plan exits 2 and names
the difference. To run finished trials again too — after a provider outage, say — add `--rerun
infra_error,harness_error` (by how their latest attempt ended), `--rerun-task` or
`--rerun-variant`: each runs as a new attempt, every attempt stays in the traces, and reports
count the latest (the manifest's resume records how many were run again).

With --traces s3://BUCKET/PREFIX (or gs://, az://, file://) the run is written to a staging
directory in tack's cache and uploaded to <URL>/<run-id> when it ends (finished, interrupted or
with harness errors), the manifest last; credentials and endpoint come from the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP; GOOGLE_*;
AZURE_STORAGE_*). A run killed before its upload stays in staging: `tack run --resume
<staging dir>` finishes it and uploads it where its --traces said.

With --json, stdout carries the run's JSON object whenever trials ran, with exit 3 or 130 too
(not after a second signal, which stops at once).";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct RunArgs {
    /// The suite directory (holding suite.toml) [default with --resume: the run's suite].
    #[arg(required_unless_present = "resume")]
    suite: Option<PathBuf>,
    /// Run only these variants (repeat or separate with commas).
    #[arg(long = "variant", short = 'v', value_delimiter = ',')]
    variants: Vec<String>,
    /// Run only these tasks (repeat or separate with commas).
    #[arg(long = "task", short = 't', value_delimiter = ',')]
    tasks: Vec<String>,
    /// Trials per variant and task [default: the suite's `trials`].
    #[arg(long)]
    trials: Option<u32>,
    /// Trials run at once.
    #[arg(long, short = 'j', default_value_t = default_jobs(), value_parser = at_least::<1, usize>)]
    jobs: usize,
    /// Seed of the run; each trial's seed derives from it [default: the suite's `seed`].
    #[arg(long)]
    seed: Option<u64>,
    /// Where traces go: <DIR>/<run-id>/, or a URL: s3://BUCKET/PREFIX (gs://, az://, file://
    /// too), where the run is uploaded to <URL>/<run-id> when it ends, after being written to
    /// a staging directory in tack's cache ($XDG_CACHE_HOME/tack/staging).
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// Where reports go: <DIR>/<run-id>/index.html.
    #[arg(long, default_value = "reports", value_parser = crate::dir_arg::out_dir)]
    reports: PathBuf,
    /// Record traces only; build the report later with `tack report`.
    #[arg(long)]
    no_report: bool,
    /// Keep the workspaces of trials that did not pass, to inspect what the agent left; their paths are printed.
    #[arg(long)]
    keep_workspaces: bool,
    /// Print one JSON object with every trial's result instead of text.
    #[arg(long)]
    json: bool,
    /// Run only slice INDEX of COUNT (1-based, e.g. 2/3) of the trials; combine the slices with
    /// `tack merge`. Without it, the slice comes from JOB_COMPLETION_INDEX (Kubernetes Indexed
    /// Job, with --shards or TACK_SHARDS) or SLURM_ARRAY_TASK_ID (Slurm job array), if set.
    #[arg(long, value_name = "INDEX/COUNT", conflicts_with = "shards")]
    shard: Option<String>,
    /// The shard count for JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID [default: TACK_SHARDS or
    /// SLURM_ARRAY_TASK_COUNT].
    #[arg(long, value_name = "COUNT")]
    shards: Option<u32>,
    /// Continue the stopped run in this directory (traces/<run-id>), or at this URL
    /// (s3://BUCKET/PREFIX/<run-id>, uploaded back there): keep its finished trials, run the rest.
    #[arg(long, value_name = "RUN")]
    resume: Option<PathBuf>,
    /// With --resume: also run again, as new attempts, the finished trials whose latest attempt
    /// ended so (e.g. infra_error,harness_error,cancelled); every attempt stays in the traces and
    /// reports count the latest.
    #[arg(long, value_name = "OUTCOMES", value_delimiter = ',', requires = "resume", value_parser = parse_outcome)]
    rerun: Vec<TrialOutcome>,
    /// With --resume: run these tasks' finished trials again (with --rerun, only those it names).
    #[arg(long, value_name = "TASKS", value_delimiter = ',', requires = "resume")]
    rerun_task: Vec<String>,
    /// With --resume: run these variants' finished trials again (with --rerun, only those it names).
    #[arg(
        long,
        value_name = "VARIANTS",
        value_delimiter = ',',
        requires = "resume"
    )]
    rerun_variant: Vec<String>,
    /// Run a trial again when it ends in infra_error (sandbox setup, workspace I/O, a provider
    /// down through every call retry), up to N times; every attempt is recorded, reports count
    /// the last.
    #[arg(long, value_name = "N", default_value_t = 0)]
    infra_retries: u32,
    /// The container engine that builds the images of tasks that run in one (`[environment]
    /// image` or `dockerfile`) and starts engine mode's containers [default: $TACK_ENGINE, else
    /// podman if it answers, else docker].
    #[arg(long, value_name = "ENGINE", value_parser = parse_engine)]
    engine: Option<tack_image::EngineKind>,
    #[command(flatten)]
    otlp: crate::otlp_arg::OtlpRunArgs,
}

/// `podman` or `docker`.
pub(crate) fn parse_engine(name: &str) -> Result<tack_image::EngineKind, String> {
    tack_image::EngineKind::parse(name)
        .ok_or_else(|| format!("`{name}` is not an engine tack drives: use podman or docker"))
}

fn shard_of(args: &RunArgs) -> Result<Option<tack_runner::ShardSpec>, tack_runner::ShardError> {
    match &args.shard {
        Some(text) => tack_runner::parse_shard(text).map(Some),
        None => tack_runner::shard_from_env(args.shards, |name| std::env::var(name).ok()),
    }
}

pub async fn run(args: RunArgs) -> CommandResult {
    // A wrong collector URL is found now, before the trials are paid for.
    let otlp = args.otlp.target()?;
    let (resumed, upload) = resumed_and_upload(&args).await?;
    let shard = match (shard_of(&args).or_fail(Failure::Usage)?, &resumed) {
        (None, Some(resumed)) => resumed.shard,
        (shard, _) => shard,
    };
    let suite_dir = match (&args.suite, &resumed) {
        (Some(dir), _) => dir.clone(),
        (None, Some(resumed)) => (resumed.manifest)
            .suite_dir(&resumed.traces_root.join(&resumed.manifest.run_id))
            .or_fail(Failure::Usage)?,
        (None, None) => unreachable_suite()?,
    };
    let suite = tack_suite::load_suite(&suite_dir).or_fail(Failure::Usage)?;
    let recorded = resumed.as_ref().map(|r| &r.manifest);
    let run_id = match &resumed {
        Some(resumed) => resumed.manifest.run_id.clone(),
        None => tack_runner::new_run_id_for(&suite.name, shard),
    };
    let plan = RunPlan {
        run_id,
        trials_per_task: args
            .trials
            .or(recorded.map(|m| m.trials_per_task))
            .unwrap_or(suite.trials),
        seed: args.seed.or(recorded.map(|m| m.seed)).unwrap_or(suite.seed),
        variants: ResumedRun::or_recorded(resumed.as_ref(), &args.variants, |m| {
            m.variants.iter().map(|v| v.name.clone()).collect()
        }),
        tasks: ResumedRun::or_recorded(resumed.as_ref(), &args.tasks, |m| m.tasks.clone()),
        jobs: args.jobs,
        traces_root: match (&resumed, &upload) {
            (Some(resumed), _) => resumed.traces_root.clone(),
            (None, Some(_)) => crate::store_arg::cache()?.staging(),
            (None, None) => args.traces.clone(),
        },
        command_line: std::env::args().collect(),
        keep_failed_workspaces: args.keep_workspaces,
        replay: None,
        hidden: vec![args.reports.clone()],
        interactive: Some(crate::terminal_approver::shared()),
        shard,
        infra_retries: args.infra_retries,
        resume: resumed.is_some(),
        rerun: tack_runner::Rerun {
            outcomes: args.rerun.clone(),
            tasks: args.rerun_task.clone(),
            variants: args.rerun_variant.clone(),
        },
        images: tack_suite::ImageOptions {
            engine: args.engine,
            cache: None,
        },
        visible_within: otlp.is_some().then_some(crate::otlp_arg::EVERY),
        suite,
    };
    // Check the selection before anything is written.
    plan.validate().or_fail(Failure::Usage)?;
    let output = Output {
        reports: args.reports.clone(),
        no_report: args.no_report,
        json: args.json,
        upload,
        otlp: otlp.map(|target| (target, args.otlp.content())),
        replay_of: None,
    };
    execute(plan, &output).await
}

/// The run `--resume` names (fetched first when it is a URL), and the URL
/// prefix the run is uploaded under when it ends: the one it was fetched
/// from, else `--traces` when that is a URL.
async fn resumed_and_upload(
    args: &RunArgs,
) -> Result<(Option<ResumedRun>, Option<RemoteUrl>), crate::exit::CommandError> {
    let traces = match crate::store_arg::location(&args.traces)? {
        Location::Remote(prefix) => Some(prefix),
        Location::Local(_) => None,
    };
    let (resumed, upload) = match &args.resume {
        None => (None, traces),
        Some(resume) => {
            let (dir, upload) = match crate::store_arg::location(resume)? {
                Location::Local(dir) => (dir, traces),
                Location::Remote(url) => (crate::store_arg::fetch(&url).await?, url.parent()),
            };
            let resumed = ResumedRun::read(&dir)
                .with_context(|| format!("--resume {}", dir.display()))
                .or_fail(Failure::Usage)?;
            let upload = match upload {
                Some(upload) => Some(upload),
                None => staged_upload(&dir, &resumed.manifest)?,
            };
            (Some(resumed), upload)
        }
    };
    // A missing bucket or a wrong endpoint is found now, before the trials
    // are paid for, not by the upload after them.
    if let Some(prefix) = &upload {
        crate::store_arg::check(prefix).await?;
    }
    Ok((resumed, upload))
}

/// Where a run resumed from tack's staging area goes: it was written there
/// to be uploaded, so it is uploaded where its first invocation said
/// (`--traces URL` on its recorded command line). Without one, the resume
/// is refused: finished in staging, the run would reach no one.
fn staged_upload(dir: &Path, manifest: &Manifest) -> Result<Option<RemoteUrl>, CommandError> {
    // No cache directory here: nothing can have been staged in it.
    let Ok(cache) = crate::store_arg::cache() else {
        return Ok(None);
    };
    let staging = cache.staging();
    let staged = std::fs::canonicalize(dir)
        .ok()
        .zip(std::fs::canonicalize(&staging).ok())
        .is_some_and(|(dir, staging)| dir.starts_with(staging));
    if !staged {
        return Ok(None);
    }
    let line = &manifest.command_line;
    let named = line
        .iter()
        .enumerate()
        .find_map(|(i, word)| match word.strip_prefix("--traces") {
            Some("") => line.get(i + 1).cloned(),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        });
    match named.map(|url| crate::store_arg::location(Path::new(&url))) {
        Some(Ok(Location::Remote(url))) => {
            errln!(
                "{} is in tack's staging area: it is uploaded to {url} when it ends, as its run asked",
                dir.display()
            );
            Ok(Some(url))
        }
        _ => Err(anyhow::anyhow!(
            "{} is in tack's staging area, where runs bound for object storage are written, and \
             its command line names no --traces URL: add --traces s3://BUCKET/PREFIX (or gs://, \
             az://, file://) to upload it when it ends",
            dir.display()
        ))
        .or_fail(Failure::Usage),
    }
}

/// clap requires SUITE unless --resume is given.
fn unreachable_suite() -> Result<PathBuf, crate::exit::CommandError> {
    Err(anyhow::anyhow!(
        "name the suite directory, or a run to --resume"
    ))
    .or_fail(Failure::Usage)
}

/// Where and how a run's results are shown.
pub struct Output {
    pub reports: PathBuf,
    pub no_report: bool,
    pub json: bool,
    /// The URL prefix the run is uploaded under (`<prefix>/<run-id>`) when
    /// it ends, interrupted or not.
    pub upload: Option<RemoteUrl>,
    /// Stream the trials to this OpenTelemetry collector as they end
    /// (`--otlp`), with message content or not.
    pub otlp: Option<(tack_interop::otlp::Target, bool)>,
    /// The recorded trial a replay re-runs, to say how the replay differs.
    pub replay_of: Option<crate::replay_cmd::ReplayOf>,
}

/// Runs a checked plan, writes its report and prints the outcome.
pub async fn execute(plan: RunPlan, args: &Output) -> CommandResult {
    check_system_tmp(&plan).or_fail(Failure::Usage)?;
    let (mut result, streamed) = run_with_progress(plan, args).await?;
    let traces = match &args.upload {
        Some(prefix) => {
            let url = prefix.join(&result.run_id);
            result.run_dir = crate::store_arg::publish(&result.run_dir, &url).await?.dir;
            url.to_string()
        }
        None => result.run_dir.display().to_string(),
    };
    let report = if args.no_report {
        None
    } else {
        Some(write_run_report(&result, &args.reports)?)
    };
    let trials: Vec<SummaryTrial> = result
        .trials
        .iter()
        .map(|t| SummaryTrial {
            variant: &t.variant,
            task: &t.task,
            trial_index: t.trial_index,
            outcome: t.outcome,
            tokens: t.totals.usage.total(),
            error: t.error.as_deref(),
        })
        .collect();
    let shown = Shown {
        result: &result,
        trials: &trials,
        traces: &traces,
        report: report.as_deref(),
    };
    shown.print(args, streamed.as_ref())?;
    Ok(shown.exit_code())
}

/// Runs the plan with its progress shown, its trials streamed to a
/// collector under `--otlp`, and Ctrl-C or SIGTERM stopping it.
async fn run_with_progress(
    plan: RunPlan,
    args: &Output,
) -> Result<(RunResult, Option<tack_interop::otlp::Streamed>), CommandError> {
    let progress = crate::progress::progress_reporter(args.json);
    let cancel = CancelFlag::default();
    let run_dir: Arc<OnceLock<PathBuf>> = Arc::default();
    stop_on_signal(cancel.clone(), run_dir.clone());
    let streamer = args
        .otlp
        .as_ref()
        .map(|(target, content)| crate::otlp_arg::start(target.clone(), *content));
    let callback = match &streamer {
        Some(streamer) => crate::otlp_arg::feeding(progress.callback(), streamer.clone()),
        None => progress.callback(),
    };
    let callback: tack_runner::ProgressFn = Arc::new(move |event| {
        if let Progress::Started { run_dir: dir, .. } = &event {
            let _ = run_dir.set(dir.clone());
        }
        callback(event)
    });
    let result = tack_runner::run(plan, callback, cancel).await;
    progress.finish();
    let streamed = match streamer {
        Some(streamer) => Some(crate::otlp_arg::finish(streamer).await),
        None => None,
    };
    let result = match result {
        Err(error) if error.is_usage() => return Err(error).or_fail(Failure::Usage),
        result => result.or_fail(Failure::Internal)?,
    };
    Ok((result, streamed))
}

/// A finished run as the command shows it: where its traces and report
/// are, and its trials as the summary table lists them.
struct Shown<'a> {
    result: &'a RunResult,
    trials: &'a [SummaryTrial<'a>],
    traces: &'a str,
    report: Option<&'a Path>,
}

impl Shown<'_> {
    /// The run's JSON object or its table on stdout; what went wrong, the
    /// collector's shortfall and an interruption on stderr.
    fn print(
        &self,
        args: &Output,
        streamed: Option<&tack_interop::otlp::Streamed>,
    ) -> Result<(), CommandError> {
        let replay =
            (args.replay_of.as_ref()).and_then(|of| crate::replay_cmd::difference(of, self.result));
        if args.json {
            let mut out = serde_json::json!({
                "run": self.result,
                "traces": self.traces,
                "report": self.report,
            });
            if let Some(replay) = &replay {
                out["replay"] = serde_json::to_value(replay).or_fail(Failure::Internal)?;
            }
            if let Some(streamed) = streamed {
                out["otlp"] = serde_json::to_value(streamed).or_fail(Failure::Internal)?;
            }
            outln!(
                "{}",
                serde_json::to_string_pretty(&out).or_fail(Failure::Internal)?
            )?;
        } else {
            print_outcome(self.result, self.trials, self.traces, self.report)?;
            if let Some(replay) = &replay {
                outln!("{}", crate::replay_cmd::describe(replay))?;
            }
        }
        // Spans a collector did not take cost the export, not the run.
        if let Some(streamed) = streamed {
            errln!("{}", crate::otlp_arg::describe(streamed));
        }
        // A trial in harness_error says nothing about the model: not a success.
        if let Some(errors) = text::harness_errors(self.trials) {
            err!("{errors}");
        }
        if let Some(errors) = text::infra_errors(self.trials, self.traces) {
            err!("{errors}");
        }
        if self.result.interrupted {
            let covered = if self.report.is_some() {
                "the report covers those".to_string()
            } else {
                format!("`tack report {}` writes their report", self.traces)
            };
            errln!(
                "interrupted: {} ran; {covered}; `tack run --resume {}` runs the rest",
                count(self.result.trials.len(), "trial"),
                self.traces
            );
        }
        Ok(())
    }

    /// 130 when interrupted, 3 when a trial ended in harness_error, else 0
    /// (the exit codes `tack run --help` lists).
    fn exit_code(&self) -> ExitCode {
        if self.result.interrupted {
            ExitCode::from(130)
        } else if (self.trials.iter()).any(|t| t.outcome == TrialOutcome::HarnessError) {
            Failure::Internal.into()
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// The run's report, written under `reports/<run-id>`: its index page.
fn write_run_report(result: &RunResult, reports: &Path) -> Result<PathBuf, CommandError> {
    let out = reports.join(&result.run_id);
    let files = tack_report::write_report_with_prices(
        &result.run_dir,
        &out,
        &tack_report::ReportOptions::default(),
        crate::report_cmd::set_prices,
    )
    .or_fail(Failure::Internal)?;
    Ok(files.index)
}

/// The run's table of trials, what a resume kept or ran again, and where
/// its traces and report are.
fn print_outcome(
    result: &RunResult,
    trials: &[SummaryTrial],
    traces: &str,
    report: Option<&Path>,
) -> Result<(), CommandError> {
    if trials.is_empty() && result.kept > 0 {
        outln!(
            "nothing to run: all {} planned trials had finished (--rerun OUTCOMES runs chosen ones again)",
            result.kept
        )?;
    } else if trials.is_empty() {
        outln!(
            "nothing to run: no trial of the plan falls to this run (a shard is empty when there \
             are more shards than trials)"
        )?;
    } else {
        out!("{}", text::run_summary(trials.iter().copied()))?;
    }
    if result.kept > 0 && !trials.is_empty() {
        outln!(
            "resumed: the table covers the {} run now; {} finished before {} kept (the report covers all)",
            count(result.trials.len(), "trial"),
            result.kept,
            if result.kept == 1 { "was" } else { "were" }
        )?;
    }
    if result.rerun > 0 {
        outln!(
            "rerun: {} finished trials ran again as new attempts; their earlier attempts stay in the traces, reports count the latest",
            result.rerun
        )?;
    }
    outln!("traces: {traces}")?;
    match report {
        Some(index) => outln!("report: {}", index.display()),
        None => outln!("report: run `tack report {traces}`"),
    }?;
    Ok(())
}

/// A confined run cannot work with its trials below `/dev/shm`, which each
/// command is given fresh: refused before any trial starts.
fn check_system_tmp(plan: &RunPlan) -> Result<(), tack_sandbox::SetupError> {
    let confined = plan.selected_variants().is_ok_and(|variants| {
        (variants.iter()).any(|v| v.harness.sandbox != tack_protocol::SandboxProfile::Off)
    });
    // An unconfined run lists nothing: its commands have no walls.
    if !confined {
        return Ok(());
    }
    tack_sandbox::SystemTmp::here().usable()
}

/// The first Ctrl-C or SIGTERM (what a cancelled CI job or an evicted pod
/// gets before SIGKILL) lets the running trials finish and records them,
/// starting no more; a second stops now, saying how to carry the run on
/// (its stored trials are kept; those cut off run again on `--resume`, and
/// `tack report` recovers the finished ones from their journals).
fn stop_on_signal(cancel: CancelFlag, run_dir: Arc<OnceLock<PathBuf>>) {
    tokio::spawn(async move {
        crate::stop::stop_signal().await;
        errln!(
            "\ninterrupting: finishing the trials that are running (Ctrl-C or SIGTERM again to \
             stop now)"
        );
        cancel.cancel();
        crate::stop::stop_signal().await;
        match run_dir.get() {
            Some(dir) => errln!(
                "stopped: the trials cut off run again with `tack run --resume {}`; \
                 the finished ones are recorded (`tack report {}` reports them); what the \
                 cut-off trials left (their workspaces, an image task's containers) is removed \
                 by that resume, or by the next run",
                dir.display(),
                dir.display()
            ),
            None => errln!("stopped before the run started"),
        }
        std::process::exit(130);
    });
}

/// An outcome `--rerun` names.
fn parse_outcome(text: &str) -> Result<TrialOutcome, String> {
    TrialOutcome::parse(text.trim()).ok_or_else(|| {
        let known: Vec<&str> = TrialOutcome::ALL.iter().map(|o| o.as_str()).collect();
        format!(
            "`{text}` is not an outcome; use one of {}",
            known.join(", ")
        )
    })
}
