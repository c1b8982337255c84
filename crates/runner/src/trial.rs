use std::path::PathBuf;
use std::time::Instant;

use tack_harness::{Harness, HarnessRun, HarnessSetup, ModelChoice, Models, Verification};
use tack_model::{Model, TaskBrief};
use tack_protocol::BuiltinModel;
use tack_protocol::time::now_ms;
use tack_protocol::{
    Event, EventSink, RunTotals, StopReason, TrialFinished, TrialOutcome, TrialStarted,
};
use tack_suite::{CommandSandbox, Task, TrialWorkspace, Variant, Viewer};
use tack_trace::{RunWriter, TrialRecorder};

use crate::{RunContext, TrialSpec, TrialSummary};

/// Runs one trial start to end. Whatever goes wrong ends up in the summary
/// and the trace as an outcome; nothing here panics the run.
pub(crate) async fn run_trial(
    run: &RunContext,
    spec: &TrialSpec,
    run_id: &str,
    writer: &RunWriter,
) -> TrialSummary {
    let clock = Instant::now();
    let (Some(variant), Some(task)) = (
        run.suite.variant(&spec.variant),
        run.suite.tasks.iter().find(|t| t.id == spec.task),
    ) else {
        let vanished = "variant or task vanished from the suite".to_string();
        return summary(
            spec,
            &failed(clock, TrialOutcome::HarnessError, vanished),
            None,
        );
    };
    // A variant may run every image task in engine mode.
    let task = &*task.for_variant(variant.harness.image_tasks);
    let started = TrialStarted {
        run_id: run_id.to_string(),
        trial_id: spec.trial_id.clone(),
        variant: variant.name.clone(),
        task: task.id.clone(),
        trial_index: spec.trial_index,
        attempt: spec.attempt,
        seed: spec.seed,
        model: variant.model.to_string(),
        started_at_ms: now_ms(),
        environment: Some(task.trial_environment()),
    };
    let mut recorder = match writer.trial(started) {
        Ok(recorder) => recorder,
        Err(error) => {
            let error = failed(clock, TrialOutcome::HarnessError, error.to_string());
            return summary(spec, &error, None);
        }
    };
    let (finished, kept_workspace) = execute(run, variant, task, spec, &mut recorder, clock).await;
    let mut result = summary(spec, &finished, kept_workspace);
    let recorded = match recorder.record(Event::TrialFinished(finished)) {
        Ok(()) => finish_off_runtime(recorder).await,
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = recorded {
        result.outcome = TrialOutcome::HarnessError;
        result.error = Some(format!(
            "the trial ran but its trace could not be written: {error}"
        ));
    }
    result
}

/// Hands the trial's rows to the run's open part on a blocking thread: the
/// part is encoded and compressed under the run's one writer lock, and a
/// runtime worker waiting on that lock while many trials end at once would
/// stall every other trial's model calls and commands.
async fn finish_off_runtime(recorder: TrialRecorder) -> Result<(), String> {
    match tokio::task::spawn_blocking(move || recorder.finish()).await {
        Ok(finished) => finished.map_err(|e| e.to_string()),
        Err(join) => Err(format!("writing the trial's rows stopped: {join}")),
    }
}

fn summary(spec: &TrialSpec, finished: &TrialFinished, kept: Option<PathBuf>) -> TrialSummary {
    TrialSummary {
        trial_id: spec.trial_id.clone(),
        variant: spec.variant.clone(),
        task: spec.task.clone(),
        trial_index: spec.trial_index,
        attempt: spec.attempt,
        outcome: finished.outcome,
        stop_reason: finished.stop_reason,
        totals: finished.totals.clone(),
        duration_ms: finished.duration_ms,
        error: finished.error.clone(),
        kept_workspace: kept,
    }
}

async fn execute(
    run: &RunContext,
    variant: &Variant,
    task: &Task,
    spec: &TrialSpec,
    recorder: &mut TrialRecorder,
    clock: Instant,
) -> (TrialFinished, Option<PathBuf>) {
    let config = task.harness_for(variant);
    let sandbox = CommandSandbox::new(config.sandbox, run.hidden.clone());
    let workspace = match TrialWorkspace::prepare(task, &sandbox).await {
        Ok(workspace) => workspace,
        Err(error) => {
            return (
                failed(clock, TrialOutcome::InfraError, error.to_string()),
                None,
            );
        }
    };
    if let Some(agent) = &variant.agent {
        let trial = crate::external::ExternalTrial {
            variant,
            agent,
            task,
            config: &config,
            sandbox: &sandbox,
        };
        let finished = trial.run(run, workspace.path(), recorder, clock).await;
        let kept = (finished.outcome != TrialOutcome::Passed && spec.keep_failed_workspace)
            .then(|| workspace.keep());
        return (finished, kept);
    }
    // The oracle applies the reference solution through the agent's tools,
    // and the sim does when it is skilful enough (a simulation that knows
    // the fix): built-in models alone see the solution's files, which a
    // solution script (`bash /solution/solve.sh`) needs.
    let viewer = match variant.model.builtin() {
        Some(BuiltinModel::Oracle | BuiltinModel::Sim) => Viewer::Solution,
        None => Viewer::Agent,
    };
    let harness = Harness::assemble(HarnessSetup {
        config,
        workspace: workspace.path().to_path_buf(),
        env: task.env_pairs(),
        hidden: run.hidden.clone(),
        base_dir: run.suite.root.clone(),
        interactive: run.interactive.clone(),
        walls: task.walls(workspace.path(), viewer),
    })
    .await;
    let built = match harness {
        Ok(harness) => trial_model(&run.models, variant, task, spec)
            .map(|model| (harness, model))
            .map_err(|e| e.to_string()),
        Err(error) => Err(error.to_string()),
    };
    let (harness, mut model) = match built {
        Ok(built) => built,
        Err(error) => return (failed(clock, TrialOutcome::HarnessError, error), None),
    };
    let pricer = match spec.replay {
        Some(_) => None,
        None => run.models.pricer(&variant.model),
    };
    let outcome = harness
        .run(
            model.as_mut(),
            pricer,
            &task.instruction,
            &Verification::Task(task),
            recorder,
        )
        .await;
    let result = finished(clock, &outcome, outcome.tampered);
    let kept = (result.outcome != TrialOutcome::Passed && spec.keep_failed_workspace)
        .then(|| workspace.keep());
    (result, kept)
}

/// The variant's model for this trial, or the recorded answers of a replay.
fn trial_model(
    models: &Models,
    variant: &Variant,
    task: &Task,
    spec: &TrialSpec,
) -> Result<Box<dyn Model>, tack_harness::ModelError> {
    if let Some(recorded) = &spec.replay {
        return Ok(Box::new(tack_model::ReplayModel::new(
            &recorded.model,
            recorded.answers.clone(),
        )));
    }
    let brief = TaskBrief {
        instruction: task.instruction.clone(),
        solution: task.solution.clone(),
        test_command: task.test_command.clone(),
    };
    models.build(&ModelChoice::of_variant(variant), brief, spec.seed)
}

fn finished(clock: Instant, run: &HarnessRun, tampered: bool) -> TrialFinished {
    TrialFinished {
        outcome: run.outcome(),
        stop_reason: run.agent.stop_reason,
        totals: run.agent.totals.clone(),
        feedback_rounds: run.feedback_rounds,
        tampered,
        checks_passed: run.checks_passed,
        duration_ms: clock.elapsed().as_millis() as u64,
        finished_at_ms: now_ms(),
        error: run.error(),
    }
}

/// A trial that ended before its agent ran: its environment could not be
/// set up (an infra error), or tack could not assemble its harness.
pub(crate) fn failed(clock: Instant, outcome: TrialOutcome, error: String) -> TrialFinished {
    TrialFinished {
        outcome,
        stop_reason: match outcome {
            TrialOutcome::InfraError => StopReason::EnvironmentError,
            _ => StopReason::HarnessError,
        },
        totals: RunTotals::default(),
        feedback_rounds: 0,
        tampered: false,
        checks_passed: None,
        duration_ms: clock.elapsed().as_millis() as u64,
        finished_at_ms: now_ms(),
        error: Some(error),
    }
}
