use std::path::PathBuf;
use std::time::{Duration, Instant};

use tack_agent::{AgentRun, Dispatcher, ToolContext, now_ms, run_agent};
use tack_model::{TaskBrief, builtin_model};
use tack_protocol::{
    CheckRecord, Event, EventSink, StopReason, TrialFinished, TrialOutcome, TrialStarted, Usage,
};
use tack_suite::{Suite, Task, TrialWorkspace, Variant, run_checks};
use tack_trace::{RunWriter, TrialRecorder};

use crate::{TrialSpec, TrialSummary};

/// Runs one trial start to end. Whatever goes wrong ends up in the summary
/// and the trace as an outcome; nothing here panics the run.
pub(crate) async fn run_trial(
    suite: &Suite,
    spec: &TrialSpec,
    run_id: &str,
    writer: &RunWriter,
) -> TrialSummary {
    let clock = Instant::now();
    let (Some(variant), Some(task)) = (
        suite.variant(&spec.variant),
        suite.tasks.iter().find(|t| t.id == spec.task),
    ) else {
        return failed_summary(
            spec,
            clock,
            "variant or task vanished from the suite".to_string(),
        );
    };
    let started = TrialStarted {
        run_id: run_id.to_string(),
        trial_id: spec.trial_id.clone(),
        variant: variant.name.clone(),
        task: task.id.clone(),
        trial_index: spec.trial_index,
        seed: spec.seed,
        model: variant.model.clone(),
        started_at_ms: now_ms(),
    };
    let mut recorder = match writer.trial(started) {
        Ok(recorder) => recorder,
        Err(error) => return failed_summary(spec, clock, error.to_string()),
    };
    let (finished, kept_workspace) = execute(variant, task, spec, &mut recorder, clock).await;
    let mut summary = TrialSummary {
        trial_id: spec.trial_id.clone(),
        variant: spec.variant.clone(),
        task: spec.task.clone(),
        trial_index: spec.trial_index,
        outcome: finished.outcome,
        stop_reason: finished.stop_reason,
        steps: finished.steps,
        total_tokens: finished.usage.total(),
        duration_ms: finished.duration_ms,
        error: finished.error.clone(),
        kept_workspace,
    };
    let recorded = recorder
        .record(Event::TrialFinished(finished))
        .map_err(|e| e.to_string())
        .and_then(|()| recorder.finish().map_err(|e| e.to_string()));
    if let Err(error) = recorded {
        summary.outcome = TrialOutcome::HarnessError;
        summary.error = Some(format!(
            "the trial ran but its trace could not be written: {error}"
        ));
    }
    summary
}

async fn execute(
    variant: &Variant,
    task: &Task,
    spec: &TrialSpec,
    recorder: &mut TrialRecorder,
    clock: Instant,
) -> (TrialFinished, Option<PathBuf>) {
    let workspace = match TrialWorkspace::prepare(task).await {
        Ok(workspace) => workspace,
        Err(error) => {
            let result = finished(
                clock,
                TrialOutcome::InfraError,
                StopReason::HarnessError,
                None,
                Some(error.to_string()),
            );
            return (result, None);
        }
    };
    let config = task.harness_for(variant);
    let ctx = ToolContext {
        workspace: workspace.path().to_path_buf(),
        env: task.env_pairs(),
        command_timeout: Duration::from_secs(config.command_timeout_secs),
        output_limit: config.output_limit_bytes,
    };
    let dispatcher = match Dispatcher::builtin(&config.tools, ctx) {
        Ok(dispatcher) => dispatcher,
        Err(error) => return (harness_failure(clock, error.to_string()), None),
    };
    let brief = TaskBrief {
        instruction: task.instruction.clone(),
        solution: task.solution.clone(),
        test_command: task.test_command.clone(),
    };
    let mut model = match builtin_model(&variant.model, brief, variant.sim, spec.seed) {
        Ok(model) => model,
        Err(error) => return (harness_failure(clock, error.to_string()), None),
    };
    let run = run_agent(
        &config,
        model.as_mut(),
        &dispatcher,
        &task.instruction,
        recorder,
    )
    .await;
    let checks = verify(task, &workspace, &run, recorder).await;
    let (checks_passed, check_error) = match checks {
        Ok(passed) => (Some(passed), None),
        Err(error) => (None, Some(error)),
    };
    let outcome = TrialOutcome::decide(run.stop_reason, checks_passed);
    let kept =
        (outcome != TrialOutcome::Passed && spec.keep_failed_workspace).then(|| workspace.keep());
    let mut result = finished(
        clock,
        outcome,
        run.stop_reason,
        checks_passed,
        run.error.clone().or(check_error),
    );
    result.steps = run.steps;
    result.usage = run.usage;
    result.tool_errors = run.tool_errors;
    (result, kept)
}

fn harness_failure(clock: Instant, error: String) -> TrialFinished {
    finished(
        clock,
        TrialOutcome::HarnessError,
        StopReason::HarnessError,
        None,
        Some(error),
    )
}

/// Runs the hidden checks and records each; `Ok(all passed)`.
async fn verify(
    task: &Task,
    workspace: &TrialWorkspace,
    run: &AgentRun,
    recorder: &mut TrialRecorder,
) -> Result<bool, String> {
    let results = run_checks(task, workspace.path())
        .await
        .map_err(|e| e.to_string())?;
    for (span_id, result) in (run.spans_used + 1..).zip(&results) {
        let record = CheckRecord {
            span_id,
            name: result.name.clone(),
            command: result.command.clone(),
            exit_code: result.exit_code,
            passed: result.passed,
            output: result.output.clone(),
            started_at_ms: result.started_at_ms,
            duration_ms: result.duration_ms,
        };
        recorder
            .record(Event::Check(record))
            .map_err(|e| e.to_string())?;
    }
    Ok(results.iter().all(|r| r.passed))
}

fn finished(
    clock: Instant,
    outcome: TrialOutcome,
    stop_reason: StopReason,
    checks_passed: Option<bool>,
    error: Option<String>,
) -> TrialFinished {
    TrialFinished {
        outcome,
        stop_reason,
        steps: 0,
        usage: Usage::default(),
        cost_usd: None,
        retries: 0,
        interventions: 0,
        tool_errors: 0,
        checks_passed,
        duration_ms: clock.elapsed().as_millis() as u64,
        finished_at_ms: now_ms(),
        error,
    }
}

fn failed_summary(spec: &TrialSpec, clock: Instant, error: String) -> TrialSummary {
    TrialSummary {
        trial_id: spec.trial_id.clone(),
        variant: spec.variant.clone(),
        task: spec.task.clone(),
        trial_index: spec.trial_index,
        outcome: TrialOutcome::HarnessError,
        stop_reason: StopReason::HarnessError,
        steps: 0,
        total_tokens: 0,
        duration_ms: clock.elapsed().as_millis() as u64,
        error: Some(error),
        kept_workspace: None,
    }
}
