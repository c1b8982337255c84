//! Runs a suite: every selected variant × task × trial, `jobs` at a time, each
//! trial in a fresh workspace, checks after the agent stops, everything
//! recorded to a trace directory.
//!
//! It must not depend on `tack-analysis`, `tack-report` or Polars: it writes
//! traces; reading them is the analysis's job.

mod clock;
mod external;
mod fingerprint;
mod plan;
mod replay;
mod resume;
mod scheduler;
mod trial;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use tack_harness::{ModelError, Models};
use tack_protocol::{RunTotals, SandboxProfile, StopReason, TrialOutcome};
use tack_suite::Suite;
use tack_trace::{Manifest, RunStatus, RunWriter, Shard, SuiteInfo, TraceError, VariantInfo};
use tokio::sync::Semaphore;

pub use clock::{new_run_id, rfc3339_now};
pub use plan::{PlanError, RunPlan, ShardSpec, TrialSpec, plan_identity};
pub use replay::replay_plan;
pub use resume::{Rerun, ResumedRun, new_run_id_for};
pub use scheduler::{ShardError, parse_shard, shard_from_env};

/// What the runner reports as it goes.
#[derive(Debug, Clone)]
pub enum Progress {
    Started {
        run_id: String,
        run_dir: PathBuf,
        total: usize,
    },
    TrialFinished {
        summary: TrialSummary,
        done: usize,
        total: usize,
    },
    /// A step before the first trial: provisioning the tasks' tools, or
    /// leaving out a task this machine cannot run.
    Preparing { message: String },
}

/// One trial's result, as the runner saw it.
#[derive(Debug, Clone, Serialize)]
pub struct TrialSummary {
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    /// 0 for the first attempt; more after `--infra-retries` or a resume.
    pub attempt: u32,
    pub outcome: TrialOutcome,
    pub stop_reason: StopReason,
    #[serde(flatten)]
    pub totals: RunTotals,
    pub duration_ms: u64,
    pub error: Option<String>,
    /// Where the trial's workspace was kept (`--keep-workspaces`, failed trials).
    pub kept_workspace: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub trials: Vec<TrialSummary>,
    /// Cancelled before every planned trial ran.
    pub interrupted: bool,
    /// On `--resume`: the trials that had finished before and were kept
    /// (not in `trials`).
    pub kept: u32,
    /// On `--resume --rerun`: finished trials run again as new attempts
    /// (in `trials`).
    pub rerun: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Reading or writing a run's traces (a replayed or resumed run's are
    /// read, a new one's written).
    /// Its message names the file.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Loading or hashing the suite; its message names the file.
    #[error(transparent)]
    Suite(#[from] tack_suite::SuiteError),
    #[error(transparent)]
    Models(#[from] ModelError),
    #[error(transparent)]
    Provision(#[from] tack_suite::ProvisionError),
    #[error(transparent)]
    Images(#[from] tack_suite::ImagesError),
    #[error(
        "cannot resume {run_dir}: {difference}; resume with the suite and flags the run started with (see command_line in its manifest.json), or start a new run"
    )]
    PlanMismatch {
        run_dir: PathBuf,
        difference: String,
    },
    #[error("cannot resume {run_dir}: {reason}")]
    NotResumable { run_dir: PathBuf, reason: String },
}

impl RunError {
    /// Whether the error is in what the user asked for (exit 2) rather than
    /// in running it.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RunError::Plan(_)
                | RunError::PlanMismatch { .. }
                | RunError::NotResumable { .. }
                | RunError::Provision(_)
                | RunError::Images(_)
        )
    }
}

pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// What every trial of a run shares.
pub(crate) struct RunContext {
    pub suite: Suite,
    /// Paths no command of any trial may see.
    pub hidden: Vec<PathBuf>,
    pub models: Models,
    pub interactive: Option<Arc<dyn tack_agent::Approver>>,
}

/// Asks a run to stop: trials already running finish and are recorded, the
/// rest are not started, and the manifest says the run was interrupted.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Runs the plan and returns the summary of every trial that ran, in plan
/// order (the last attempt of each).
pub async fn run(
    plan: RunPlan,
    progress: ProgressFn,
    cancel: CancelFlag,
) -> Result<RunResult, RunError> {
    let models = Models::new()?;
    let all = plan.trials(&models)?;
    let shard = plan.shard.map(|s| Shard {
        index: s.index,
        count: s.count,
        plan: plan_identity(&all),
    });
    let planned = plan.shard_trials(&models)?;
    if plan.resume {
        // A resume that would change the plan fails now, not after the
        // tools are provisioned and the images built.
        let mut light = planned_manifest(&plan, &plan.suite, models.price_version())?;
        light.shard = shard.clone();
        resume::check(&plan, &light)?;
    }
    let mut suite = plan.suite.clone();
    let note = |message: String| progress(Progress::Preparing { message });
    for task in plan.left_out_for_container() {
        note(format!(
            "left out task `{}`: it runs only in its container image ({})",
            task.id,
            task.environment.container_reasons.join("; ")
        ));
    }
    tack_suite::provision_suite(&mut suite, installs_confined(&plan), &note).await?;
    let planned_tasks: Vec<String> = planned.iter().map(|t| t.task.clone()).collect();
    tack_suite::prepare_images(&mut suite, Some(&planned_tasks), &plan.images, &note).await?;
    let mut manifest = manifest_for(&plan, &suite, models.price_version()).await?;
    manifest.shard = shard;
    let (writer, manifest, trials) = if plan.resume {
        let resumed = resume::prepare(&plan, manifest, planned)?;
        (resumed.writer, resumed.manifest, resumed.to_run)
    } else {
        let writer = RunWriter::create(&plan.traces_root, &manifest)?;
        (writer, manifest, planned)
    };
    let kept = manifest.resumes.last().map_or(0, |r| r.trials_kept);
    let rerun = manifest.resumes.last().map_or(0, |r| r.trials_rerun);
    let total = trials.len();
    progress(Progress::Started {
        run_id: manifest.run_id.clone(),
        run_dir: writer.dir().to_path_buf(),
        total,
    });
    let publisher = plan
        .visible_within
        .map(|every| close_parts_every(writer.clone(), every));
    let context = Arc::new(RunContext {
        hidden: plan.hidden_paths(),
        suite,
        models,
        interactive: plan.interactive.clone(),
    });
    let summaries = run_trials(
        &context,
        trials,
        &plan,
        &manifest.run_id,
        &writer,
        progress,
        cancel,
    )
    .await;
    if let Some(publisher) = publisher {
        publisher.abort();
    }
    let summaries = summaries?;
    let interrupted = summaries.len() < total;
    let run_id = manifest.run_id.clone();
    close(&writer, manifest, interrupted)?;
    Ok(RunResult {
        run_id,
        run_dir: writer.dir().to_path_buf(),
        trials: summaries,
        interrupted,
        kept,
        rerun,
    })
}

/// Closes the run's open part on a timer, so a finished trial is readable
/// within about `every` even when no later trial finishes to close it.
fn close_parts_every(writer: RunWriter, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval((every / 2).max(Duration::from_millis(50)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // A part that cannot be written fails the next trial's append or
            // the run's close, which report it; a timer has no one to tell.
            // Off the runtime: closing a part writes and renames files.
            let writer = writer.clone();
            let _ = tokio::task::spawn_blocking(move || writer.flush_older_than(every)).await;
        }
    })
}

/// Installs run confined unless every variant runs unconfined (a host
/// without the sandbox).
fn installs_confined(plan: &RunPlan) -> bool {
    plan.suite
        .variants
        .iter()
        .any(|v| v.harness.sandbox != SandboxProfile::Off)
}

/// Runs every trial, `plan.jobs` at a time, each again after an infra error
/// up to `plan.infra_retries` times.
async fn run_trials(
    context: &Arc<RunContext>,
    trials: Vec<TrialSpec>,
    plan: &RunPlan,
    run_id: &str,
    writer: &RunWriter,
    progress: ProgressFn,
    cancel: CancelFlag,
) -> Result<Vec<TrialSummary>, RunError> {
    let total = trials.len();
    let semaphore = Arc::new(Semaphore::new(plan.jobs.max(1)));
    let done = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(total);
    for spec in trials {
        let (semaphore, done, context, writer, progress, cancel) = (
            semaphore.clone(),
            done.clone(),
            context.clone(),
            writer.clone(),
            progress.clone(),
            cancel.clone(),
        );
        let run_id = run_id.to_string();
        let last_attempt = spec.attempt + plan.infra_retries;
        handles.push(tokio::spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            let mut spec = spec;
            let summary = loop {
                if cancel.is_cancelled() {
                    return None;
                }
                let summary = trial::run_trial(&context, &spec, &run_id, &writer).await;
                if summary.outcome != TrialOutcome::InfraError || spec.attempt >= last_attempt {
                    break summary;
                }
                spec = spec.next_attempt();
            };
            let done = done.fetch_add(1, Ordering::SeqCst) + 1;
            progress(Progress::TrialFinished {
                summary: summary.clone(),
                done,
                total,
            });
            Some(summary)
        }));
    }
    let mut summaries = Vec::with_capacity(total);
    for handle in handles {
        match handle.await {
            Ok(summary) => summaries.extend(summary),
            Err(join) => {
                return Err(RunError::Trace(TraceError::Format {
                    path: writer.dir().to_path_buf(),
                    message: format!("a trial task crashed: {join}"),
                }));
            }
        }
    }
    Ok(summaries)
}

/// Writes the last parts and the final manifest.
fn close(writer: &RunWriter, manifest: Manifest, interrupted: bool) -> Result<(), RunError> {
    let mut finished = manifest;
    finished.finished_at = Some(rfc3339_now());
    finished.status = if interrupted {
        RunStatus::Interrupted
    } else {
        RunStatus::Finished
    };
    // Read back from the spans just written; should that fail, the manifest
    // is still closed, and the error then reported.
    let answered = writer
        .flush()
        .and_then(|()| tack_trace::answered_models(writer.dir()));
    if let (Ok(answered), Some(print)) = (&answered, finished.fingerprint.as_mut()) {
        print.record_models_answered(answered);
    }
    writer.close(&finished)?;
    answered?;
    Ok(())
}

/// `prepared` is the plan's suite with its tools and images made, whose
/// image ids go into the fingerprint.
async fn manifest_for(
    plan: &RunPlan,
    prepared: &Suite,
    price_table: &str,
) -> Result<Manifest, RunError> {
    let mut manifest = planned_manifest(plan, prepared, price_table)?;
    let tasks = selected_tasks(plan, prepared)?;
    let fingerprint = fingerprint::take(plan, &tasks, &manifest.variants).await?;
    manifest.fingerprint = Some(fingerprint);
    Ok(manifest)
}

/// The plan's tasks, as `prepared` has them.
fn selected_tasks<'a>(
    plan: &'a RunPlan,
    prepared: &'a Suite,
) -> Result<Vec<&'a tack_suite::Task>, RunError> {
    Ok(plan
        .selected_tasks()?
        .into_iter()
        .map(|task| {
            prepared
                .tasks
                .iter()
                .find(|p| p.id == task.id)
                .unwrap_or(task)
        })
        .collect())
}

/// The manifest of the plan without its fingerprint: what a resume
/// compares.
fn planned_manifest(
    plan: &RunPlan,
    prepared: &Suite,
    price_table: &str,
) -> Result<Manifest, RunError> {
    let suite: &Suite = &plan.suite;
    let variants: Vec<VariantInfo> = plan
        .selected_variants()?
        .into_iter()
        .map(|v| VariantInfo {
            name: v.name.clone(),
            model: v.model.to_string(),
            simulated: v.model.is_simulated(),
            description: v.description.clone(),
            config: serde_json::to_value(v).unwrap_or_default(),
        })
        .collect();
    let tasks = selected_tasks(plan, prepared)?;
    let suite = SuiteInfo {
        name: suite.name.clone(),
        path: suite.root.display().to_string(),
        content_hash: tack_suite::content_hash(&suite.root)?,
    };
    let tasks = tasks.iter().map(|t| t.id.clone()).collect();
    Ok(Manifest {
        trials_per_task: plan.trials_per_task,
        seed: plan.seed,
        jobs: plan.jobs as u32,
        command_line: plan.command_line.clone(),
        started_at: rfc3339_now(),
        price_table: Some(price_table.to_string()),
        ..Manifest::start(plan.run_id.clone(), suite, variants, tasks)
    })
}
