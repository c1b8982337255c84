//! A Harbor job directory as a tack run, so `tack report`, `compare` and
//! `gate` put a Harbor run next to a tack run of the same tasks.
//!
//! A job directory holds `result.json` (Harbor's `JobResult`) and one
//! directory per trial with its `result.json` (`TrialResult`: the agent, the
//! model, tokens and cost, the verifier's rewards, an exception, timing),
//! and, for agents that write one, `agent/trajectory.json` (ATIF). Each
//! trial becomes a tack trial: variant `<agent>-<model>`, task the task's
//! name, trial index by start time within (variant, task). Rewards become
//! checks (a reward of 1 or more passes), the trajectory the conversation,
//! model calls and tool calls ([`atif`]). What has no tack counterpart is
//! counted by kind in the import's `not_carried`, never dropped silently.

mod atif;
mod read;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tack_protocol::time::parse_rfc3339_ms;
use tack_protocol::{
    CheckRecord, Event, ModelCallRecord, RunTotals, SpanStatus, StopReason, TrialFinished,
    TrialOutcome, TrialStarted, Usage, trial_id,
};
use tack_trace::{Manifest, RunStatus, RunWriter, SuiteInfo, VariantInfo};

use crate::ImportError;
use crate::inspect::safe_name;
use read::{HarborTrial, JSON_LIMIT, read_job_file, read_json, read_trials};

/// What an import did, for the summary and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct JobImport {
    pub job_dir: PathBuf,
    pub run_id: String,
    /// `None` when no trial could be imported.
    pub run_dir: Option<PathBuf>,
    pub trials: Vec<ImportedJobTrial>,
    pub skipped: Vec<SkippedTrial>,
    /// What Harbor recorded that a tack run has no place for, by kind, with
    /// how many times: counted, not silently lost.
    pub not_carried: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportedJobTrial {
    pub trial_id: String,
    /// Harbor's name for the trial (its directory).
    pub trial_name: String,
    pub variant: String,
    pub task: String,
    pub outcome: String,
    pub rewards: BTreeMap<String, f64>,
    pub model_calls: u32,
    pub tool_calls: u32,
    pub usage: Usage,
    /// Whether its `agent/trajectory.json` was read.
    pub trajectory: bool,
}

/// A trial directory that could not become a trial, and why.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedTrial {
    pub path: PathBuf,
    pub reason: String,
}

/// Imports the job at `job_dir` as the run `out/<run-id>`.
pub fn import_job(
    job_dir: &Path,
    out: &Path,
    command_line: &[String],
) -> Result<JobImport, ImportError> {
    let job_file = job_dir.join("result.json");
    let job = read_json(job_dir, "result.json").map_err(|reason| ImportError::NotAHarborJob {
        path: job_file.clone(),
        reason,
    })?;
    if job.get("n_total_trials").is_none() || job.get("id").is_none() {
        return Err(ImportError::NotAHarborJob {
            path: job_file,
            reason: "it has no `id` or `n_total_trials`: not a Harbor JobResult".into(),
        });
    }
    let run_id = run_id(job_dir, &job);
    let run_dir = out.join(&run_id);
    if run_dir.exists() {
        return Err(ImportError::AlreadyImported {
            log: job_dir.to_path_buf(),
            run_dir,
        });
    }
    let mut import = JobImport {
        job_dir: job_dir.to_path_buf(),
        run_id: run_id.clone(),
        run_dir: None,
        trials: Vec::new(),
        skipped: Vec::new(),
        not_carried: BTreeMap::new(),
    };
    let mut trials = read_trials(job_dir, &mut import.skipped)?;
    // Trial indices by start within (variant, task), as tack numbers them.
    trials.sort_by(|a, b| {
        (&a.variant, &a.task, a.started_at_ms, &a.dir).cmp(&(
            &b.variant,
            &b.task,
            b.started_at_ms,
            &b.dir,
        ))
    });
    let mut indices: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut converted = Vec::new();
    for trial in &trials {
        let index = indices
            .entry((trial.variant.clone(), trial.task.clone()))
            .or_default();
        let (events, summary) = convert(trial, *index, &run_id, &mut import.not_carried);
        *index += 1;
        import.trials.push(summary);
        converted.push(events);
    }
    if converted.is_empty() {
        return Ok(import);
    }
    let mut manifest = manifest(job_dir, &job, &trials, &import, command_line);
    let trace = |source| ImportError::Trace {
        log: job_dir.to_path_buf(),
        source,
    };
    let writer = RunWriter::create(out, &manifest).map_err(trace)?;
    for events in converted {
        writer.record_trial(events).map_err(trace)?;
    }
    manifest.status = RunStatus::Finished;
    writer.close(&manifest).map_err(trace)?;
    import.run_dir = Some(writer.dir().to_path_buf());
    Ok(import)
}

/// One trial's events and what the import says of it.
fn convert(
    trial: &HarborTrial,
    index: u32,
    run_id: &str,
    not_carried: &mut BTreeMap<String, u64>,
) -> (Vec<Event>, ImportedJobTrial) {
    let result = &trial.result;
    let finished_at_ms = result
        .get("finished_at")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339_ms)
        .unwrap_or(trial.started_at_ms);
    let id = trial_id(&trial.variant, &trial.task, index, 0);
    let mut events = vec![Event::TrialStarted(TrialStarted {
        run_id: run_id.to_string(),
        trial_id: id.clone(),
        variant: trial.variant.clone(),
        task: trial.task.clone(),
        trial_index: index,
        attempt: 0,
        seed: 0,
        model: trial.model.clone(),
        started_at_ms: trial.started_at_ms,
        environment: None,
    })];
    let mut count = |kind: &str| *not_carried.entry(kind.to_string()).or_default() += 1;
    let (next_span, trajectory) = agent_events(trial, &mut events, &mut count);
    let rewards = rewards(result);
    events.extend(checks(trial, &rewards, next_span, finished_at_ms));
    if result.get("step_results").is_some_and(|v| !v.is_null()) {
        count("multi-step results (step_results)");
    }
    // A simulated user is set in the trial's config (TrialConfig.user_agent).
    if result
        .get("config")
        .and_then(|c| c.get("user_agent"))
        .is_some_and(|v| !v.is_null())
    {
        count("simulated-user agent");
    }
    if trial.dir.join("artifacts").is_dir() {
        count("collected artifacts (artifacts/)");
    }
    let (outcome, stop_reason, error) = outcome(result, &rewards);
    let checks_passed = (!rewards.is_empty()).then(|| rewards.values().all(|v| *v >= 1.0));
    let totals = RunTotals::of(&events);
    let duration_ms = (finished_at_ms - trial.started_at_ms).max(0) as u64;
    let summary = ImportedJobTrial {
        trial_id: id,
        trial_name: trial
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        variant: trial.variant.clone(),
        task: trial.task.clone(),
        outcome: outcome.as_str().to_string(),
        rewards,
        model_calls: events
            .iter()
            .filter(|e| matches!(e, Event::ModelCall(_)))
            .count() as u32,
        tool_calls: totals.tool_calls,
        usage: totals.usage,
        trajectory,
    };
    events.push(Event::TrialFinished(TrialFinished {
        outcome,
        stop_reason,
        totals,
        feedback_rounds: 0,
        tampered: false,
        checks_passed,
        duration_ms,
        finished_at_ms,
        error,
    }));
    (events, summary)
}

/// The agent's part of the trial: its trajectory's events when it wrote
/// one, else its totals as one model call. The next free span id, and
/// whether a trajectory was read.
fn agent_events(
    trial: &HarborTrial,
    events: &mut Vec<Event>,
    count: &mut dyn FnMut(&str),
) -> (u32, bool) {
    if let Ok(trajectory) = read_json(&trial.dir, "agent/trajectory.json") {
        return (atif::events(&trajectory, &trial.model, events, count), true);
    }
    match totals_span(&trial.result, &trial.model, trial.started_at_ms) {
        Some(span) => {
            // No per-call record: one span carries the trial's totals, so
            // tokens and cost are not lost.
            count("per-call detail (no agent/trajectory.json; totals kept as one model call)");
            events.push(Event::ModelCall(span));
            (2, false)
        }
        None => (1, false),
    }
}

/// One check per verifier reward, from span id `first` on.
fn checks(trial: &HarborTrial, rewards: &BTreeMap<String, f64>, first: u32, at: i64) -> Vec<Event> {
    rewards
        .iter()
        .zip(first..)
        .map(|((name, value), span_id)| {
            Event::Check(CheckRecord {
                span_id,
                name: name.clone(),
                command: "harbor verifier (tests/test.sh)".into(),
                exit_code: None,
                passed: *value >= 1.0,
                output: verifier_output(&trial.dir, name, *value),
                started_at_ms: at,
                duration_ms: 0,
            })
        })
        .collect()
}

/// The agent's totals (`agent_result`: tokens including cache, cache, output,
/// cost) as one model call, when there are any.
fn totals_span(result: &Value, model: &str, started_at_ms: i64) -> Option<ModelCallRecord> {
    let context = result.get("agent_result").filter(|c| !c.is_null())?;
    let number = |field: &str| context.get(field).and_then(Value::as_u64);
    let input = number("n_input_tokens");
    let output = number("n_output_tokens");
    let cost_usd = context.get("cost_usd").and_then(Value::as_f64);
    if input.is_none() && output.is_none() && cost_usd.is_none() {
        return None;
    }
    Some(ModelCallRecord {
        span_id: 1,
        step: 1,
        provider: String::new(),
        request_model: model.to_string(),
        response_model: model.to_string(),
        started_at_ms,
        duration_ms: 0,
        finish_reason: None,
        usage: Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            cache_read_tokens: number("n_cache_tokens").unwrap_or(0),
            ..Usage::default()
        },
        cost_usd,
        messages: Vec::new(),
        attempt: 1,
        retry_wait_ms: 0,
        rate_limit_wait_ms: 0,
        fault: None,
        purpose: Some("harbor agent totals".into()),
        parent_span_id: None,
        status: SpanStatus::Ok,
        error: None,
    })
}

fn rewards(result: &Value) -> BTreeMap<String, f64> {
    result
        .get("verifier_result")
        .and_then(|v| v.get("rewards"))
        .and_then(Value::as_object)
        .map(|rewards| {
            rewards
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The reward and the tail of the verifier's output, when it was kept.
fn verifier_output(dir: &Path, name: &str, value: f64) -> String {
    let mut output = format!("{name} = {value}\n");
    if let Ok(stdout) = read_job_file(dir, "verifier/test-stdout.txt", JSON_LIMIT) {
        let tail: String = stdout
            .chars()
            .rev()
            .take(4000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        output.push_str(&tail);
    }
    output
}

/// Harbor's rewards and exception as tack's outcome: rewards decide when the
/// verifier ran (a timed-out agent is still graded, as Harbor grades it);
/// without them, the exception does.
fn outcome(
    result: &Value,
    rewards: &BTreeMap<String, f64>,
) -> (TrialOutcome, StopReason, Option<String>) {
    let exception = result.get("exception_info").filter(|e| !e.is_null());
    let kind = exception
        .and_then(|e| e.get("exception_type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let error = exception.map(|e| {
        let message = e
            .get("exception_message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        format!("{kind}: {message}")
    });
    let timed_out = kind.contains("Timeout") && kind.contains("Agent");
    let stop_reason = if timed_out {
        StopReason::TimeLimit
    } else if exception.is_some() {
        StopReason::HarnessError
    } else {
        StopReason::Completed
    };
    if !rewards.is_empty() {
        let passed = rewards.values().all(|v| *v >= 1.0);
        let outcome = if passed {
            TrialOutcome::Passed
        } else {
            TrialOutcome::VerificationFailed
        };
        return (outcome, stop_reason, error);
    }
    let infra = [
        "Environment",
        "Docker",
        "Build",
        "Daytona",
        "Modal",
        "Sandbox",
    ]
    .iter()
    .any(|word| kind.contains(word));
    match exception {
        _ if timed_out => (TrialOutcome::Limit, StopReason::TimeLimit, error),
        Some(_) if infra => (TrialOutcome::InfraError, StopReason::HarnessError, error),
        Some(_) => (TrialOutcome::HarnessError, StopReason::HarnessError, error),
        None => (
            TrialOutcome::HarnessError,
            StopReason::HarnessError,
            Some("Harbor recorded no reward and no exception for this trial".into()),
        ),
    }
}

/// `<started>-harbor-<job directory>-<job id>`: sorts with tack's run ids
/// and is the same on every import of the job.
fn run_id(job_dir: &Path, job: &Value) -> String {
    let started: String = job
        .get("started_at")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .take(14)
        .collect();
    let stamp = match started.len() {
        14 => format!("{}-{}", &started[..8], &started[8..]),
        _ => "undated".to_string(),
    };
    let name = job_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "job".into());
    let id: String = job
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("job")
        .chars()
        .take(8)
        .collect();
    safe_name(&format!("{stamp}-harbor-{name}-{id}"))
}

fn manifest(
    job_dir: &Path,
    job: &Value,
    trials: &[HarborTrial],
    import: &JobImport,
    command_line: &[String],
) -> Manifest {
    let mut tasks: Vec<String> = Vec::new();
    let mut variants: Vec<VariantInfo> = Vec::new();
    for trial in trials {
        if !tasks.contains(&trial.task) {
            tasks.push(trial.task.clone());
        }
        if !variants.iter().any(|v| v.name == trial.variant) {
            let agent = trial
                .result
                .get("agent_info")
                .cloned()
                .unwrap_or(Value::Null);
            variants.push(VariantInfo {
                name: trial.variant.clone(),
                model: trial.model.clone(),
                // Harbor's oracle runs the reference solution: no model.
                simulated: agent.get("name").and_then(Value::as_str) == Some("oracle"),
                description: format!(
                    "Harbor agent {} on {}, imported from {}",
                    agent.get("name").and_then(Value::as_str).unwrap_or("?"),
                    trial.model,
                    job_dir.display()
                ),
                config: serde_json::json!({"harbor": {"agent_info": agent}}),
            });
        }
    }
    let trials_per_task = import
        .trials
        .iter()
        .fold(BTreeMap::<(&str, &str), u32>::new(), |mut counts, t| {
            *counts.entry((&t.variant, &t.task)).or_default() += 1;
            counts
        })
        .into_values()
        .max()
        .unwrap_or(1);
    let text = |field: &str| job.get(field).and_then(Value::as_str).map(str::to_string);
    let manifest = Manifest::start(
        import.run_id.clone(),
        SuiteInfo {
            name: job_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: job_dir.display().to_string(),
            content_hash: String::new(),
        },
        variants,
        tasks,
    );
    Manifest {
        trials_per_task,
        command_line: command_line.to_vec(),
        started_at: text("started_at").unwrap_or_default(),
        finished_at: text("finished_at"),
        ..manifest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn judged(result: Value) -> (TrialOutcome, StopReason) {
        let (outcome, stop, _) = outcome(&result, &rewards(&result));
        (outcome, stop)
    }

    #[test]
    fn rewards_decide_when_the_verifier_ran_else_the_exception_does() {
        let reward = |r: f64| json!({"verifier_result": {"rewards": {"reward": r}}});
        assert_eq!(
            judged(reward(1.0)),
            (TrialOutcome::Passed, StopReason::Completed)
        );
        assert_eq!(
            judged(reward(0.5)),
            (TrialOutcome::VerificationFailed, StopReason::Completed)
        );
        let timed_out = json!({"verifier_result": {"rewards": {"reward": 1}},
            "exception_info": {"exception_type": "AgentTimeoutError", "exception_message": "x"}});
        assert_eq!(
            judged(timed_out),
            (TrialOutcome::Passed, StopReason::TimeLimit)
        );
        let exception = |kind: &str| json!({"exception_info": {"exception_type": kind}});
        assert_eq!(
            judged(exception("AgentTimeoutError")),
            (TrialOutcome::Limit, StopReason::TimeLimit)
        );
        assert_eq!(
            judged(exception("EnvironmentStartTimeoutError")).0,
            TrialOutcome::InfraError
        );
        assert_eq!(
            judged(exception("ValueError")).0,
            TrialOutcome::HarnessError
        );
        assert_eq!(judged(json!({})).0, TrialOutcome::HarnessError);
    }

    /// The job directory came from elsewhere: a link in it (to a key, or a
    /// directory holding one) is not followed into the imported trace, nor
    /// a FIFO waited on.
    #[test]
    fn a_jobs_files_are_read_only_as_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("id_rsa");
        std::fs::write(&secret, "PRIVATE KEY").unwrap();
        let keys = dir.path().join("keys");
        std::fs::create_dir_all(&keys).unwrap();
        std::fs::write(keys.join("trajectory.json"), "{\"secret\": 1}").unwrap();
        let trial = dir.path().join("t1");
        std::fs::create_dir_all(trial.join("verifier")).unwrap();
        std::os::unix::fs::symlink(&secret, trial.join("verifier/test-stdout.txt")).unwrap();
        assert_eq!(verifier_output(&trial, "reward", 1.0), "reward = 1\n");
        std::os::unix::fs::symlink(&secret, trial.join("result.json")).unwrap();
        let error = read_json(&trial, "result.json").unwrap_err();
        assert!(error.contains("link leading out of"), "{error}");
        // A link above the file's own name is refused too.
        std::os::unix::fs::symlink(&keys, trial.join("agent")).unwrap();
        let error = read_json(&trial, "agent/trajectory.json").unwrap_err();
        assert!(error.contains("link leading out of"), "{error}");
        let made = std::process::Command::new("mkfifo")
            .arg(trial.join("fifo.json"))
            .status()
            .unwrap();
        assert!(made.success());
        let error = read_json(&trial, "fifo.json").unwrap_err();
        assert!(error.contains("cannot be read"), "{error}");
        std::fs::write(trial.join("big.txt"), "x".repeat(2048)).unwrap();
        let error = read_job_file(&trial, "big.txt", 1024).unwrap_err();
        assert!(error.contains("larger than"), "{error}");
    }
}
