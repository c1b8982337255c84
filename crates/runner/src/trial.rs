use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tack_agent::{Dispatcher, Gatekeeper, Pricer, Session, ToolContext, approver_for, now_ms};
use tack_model::{Model, TaskBrief};

use crate::models::{Shared, build_model, pricer};
use tack_protocol::{
    CheckRecord, Event, EventSink, HarnessConfig, StopReason, TrialFinished, TrialOutcome,
    TrialStarted, Usage,
};
use tack_sandbox::Confinement;
use tack_suite::{Protected, Suite, Task, TrialWorkspace, Variant, run_checks};
use tack_trace::{RunWriter, TrialRecorder};

use crate::{TrialSpec, TrialSummary};

/// Runs one trial start to end. Whatever goes wrong ends up in the summary
/// and the trace as an outcome; nothing here panics the run.
pub(crate) async fn run_trial(
    suite: &Suite,
    shared: &Shared,
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
    let (finished, kept_workspace) = execute(
        &suite.root,
        shared,
        variant,
        task,
        spec,
        &mut recorder,
        clock,
    )
    .await;
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

/// What the agent's commands must not read: the suite's tasks (hidden checks
/// and reference solutions) and the traces and reports of earlier runs,
/// which hold the same.
fn hidden_paths(suite_root: &Path) -> Vec<PathBuf> {
    let root = suite_root
        .canonicalize()
        .unwrap_or_else(|_| suite_root.to_path_buf());
    let mut hidden = vec![root.join("tasks")];
    if let Ok(cwd) = std::env::current_dir() {
        hidden.extend(
            ["traces", "reports"]
                .map(|dir| cwd.join(dir))
                .into_iter()
                .filter(|p| p.is_dir()),
        );
    }
    hidden
}

/// Everything a trial's agent needs, built from the variant and the task.
struct Harness {
    config: HarnessConfig,
    dispatcher: Dispatcher,
    gatekeeper: Gatekeeper,
    model: Box<dyn Model>,
    pricer: Option<Pricer>,
}

fn build_harness(
    suite_root: &Path,
    shared: &Shared,
    variant: &Variant,
    task: &Task,
    spec: &TrialSpec,
    workspace: &Path,
) -> Result<Harness, String> {
    let config = task.harness_for(variant);
    let ctx = ToolContext {
        workspace: workspace.to_path_buf(),
        env: task.env_pairs(),
        command_timeout: Duration::from_secs(config.command_timeout_secs),
        output_limit: config.output_limit_bytes,
        confinement: Arc::new(
            Confinement::for_profile(config.sandbox, workspace).hiding(hidden_paths(suite_root)),
        ),
    };
    let dispatcher = Dispatcher::builtin(&config.tools, ctx).map_err(|e| e.to_string())?;
    let gate = crate::permissions::gate_for(&config, suite_root, workspace)?;
    let approver = approver_for(&config.approver, suite_root.to_path_buf())?;
    let gatekeeper = Gatekeeper::new(gate, config.requires_approval.clone(), approver);
    let brief = TaskBrief {
        instruction: task.instruction.clone(),
        solution: task.solution.clone(),
        test_command: task.test_command.clone(),
    };
    let model = build_model(shared, variant, brief, spec)?;
    Ok(Harness {
        config,
        dispatcher,
        gatekeeper,
        model,
        pricer: pricer(shared, variant),
    })
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    suite_root: &Path,
    shared: &Shared,
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
    let mut harness = match build_harness(suite_root, shared, variant, task, spec, workspace.path())
    {
        Ok(harness) => harness,
        Err(error) => return (harness_failure(clock, error), None),
    };
    let protected = Protected::new(&task.protected).ok();
    let before = protected.as_ref().map(|p| p.fingerprint(workspace.path()));

    let mut session = Session::new(
        &harness.config,
        &harness.dispatcher,
        &harness.gatekeeper,
        recorder,
    )
    .with_pricer(harness.pricer.take());
    let mut stop = session.run(harness.model.as_mut(), &task.instruction).await;
    let mut rounds = 0;
    let checks = loop {
        let verdict = verify(task, &workspace, &mut session).await;
        let Ok((false, feedback)) = &verdict else {
            break verdict.map(|(passed, _)| passed);
        };
        if stop != StopReason::Completed || rounds >= harness.config.feedback_rounds {
            break Ok(false);
        }
        rounds += 1;
        stop = session.run(harness.model.as_mut(), feedback).await;
    };
    let run = session.totals();

    let tampered = match (&protected, &before) {
        (Some(protected), Some(before)) => !protected
            .fingerprint(workspace.path())
            .changed_since(before)
            .is_empty(),
        _ => false,
    };
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
    result.cost_usd = run.cost_usd;
    result.tool_errors = run.tool_errors;
    result.sandbox_denials = run.sandbox_denials;
    result.retries = run.retries;
    result.interventions = run.interventions;
    result.feedback_rounds = rounds;
    result.tampered = tampered;
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

/// Runs the hidden checks and records each. `Ok((all passed, feedback))`,
/// where the feedback is what the model is told when they failed.
async fn verify(
    task: &Task,
    workspace: &TrialWorkspace,
    session: &mut Session<'_>,
) -> Result<(bool, String), String> {
    let results = run_checks(task, workspace.path())
        .await
        .map_err(|e| e.to_string())?;
    let mut feedback = String::from("The task's checks failed after you finished:\n");
    for result in &results {
        session
            .record(|span_id| {
                Event::Check(CheckRecord {
                    span_id,
                    name: result.name.clone(),
                    command: result.command.clone(),
                    exit_code: result.exit_code,
                    passed: result.passed,
                    output: result.output.clone(),
                    started_at_ms: result.started_at_ms,
                    duration_ms: result.duration_ms,
                })
            })
            .map_err(|e| e.to_string())?;
        if !result.passed {
            let output: String = result.output.chars().take(FEEDBACK_OUTPUT_CHARS).collect();
            let code = result
                .exit_code
                .map_or("none".to_string(), |c| c.to_string());
            feedback.push_str(&format!(
                "\n## {} FAILED (exit code {code})\n{output}\n",
                result.name
            ));
        }
    }
    feedback.push_str("\nFix the remaining problems, then answer without a tool call.");
    Ok((results.iter().all(|r| r.passed), feedback))
}

/// Check output sent back to the model per failing check.
const FEEDBACK_OUTPUT_CHARS: usize = 4000;

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
        feedback_rounds: 0,
        tampered: false,
        tool_errors: 0,
        sandbox_denials: 0,
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
