//! Harbor's agent trajectories (ATIF): `tack export atif` writes one
//! trajectory per recorded trial, as Harbor's own models
//! (`harbor.models.trajectories.Trajectory`) accept it.
//!
//! The conversation becomes the steps: a system or user message a step of
//! that source; an assistant message an `agent` step with its tool calls,
//! the model that answered and that call's tokens and cost (the successful
//! model call recorded just before the message); the tool messages that
//! answered it the step's observation, each result naming its call.
//! Everything ATIF has no field for is kept under `extra`, nothing is
//! dropped: the trial's identity and outcome, its checks, each tool call's
//! exit code and error, the model calls that failed before the one that
//! answered. The root's `notes` say where.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use tack_analysis::{RunTables, SpanRow, TrialTrace};
use tack_protocol::{COMPACTION_SUMMARY_START, ToolCall};
use tack_trace::schema::{col, kind};

use crate::InteropError;

/// The ATIF version written: the fields used are all in it.
pub const SCHEMA_VERSION: &str = "ATIF-v1.6";

/// Trials read and converted at a time: a run's trials are never all in
/// memory at once.
const BATCH: usize = 256;

const NOTES: &str = "Written by tack from its Parquet traces. tack's own fields are under \
`extra.tack` (the trial, its outcome, counts, checks and approvals), each tool call's under its \
observation result's `extra` (exit code, error), each agent step's failed model-call attempts \
under the step's `extra`, and model calls no message came of under \
`extra.tack.unanswered_model_calls`. Messages the harness wrote in the user's role (a \
compaction's instruction and summary) are `system` steps marked `extra.tack.written_by`.";

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Exported {
    pub out_dir: PathBuf,
    /// One file per trial, every attempt: `<trial_id>.json`.
    pub trajectories: usize,
}

/// The run-level facts every trajectory of a run carries.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub run_id: String,
    pub tack_version: String,
    /// Variants whose answers come from a built-in simulated model: their
    /// trajectories say so (`agent.extra.simulated`).
    pub simulated: Vec<String>,
}

/// Writes every trial of the run at `run_dir` (every attempt) as
/// `out_dir/<trial_id>.json`; `progress(done, total)` after each batch.
/// `out_dir` must not exist, or be empty.
pub fn export(
    run_dir: &Path,
    out_dir: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<Exported, InteropError> {
    let tables = RunTables::open(run_dir)?;
    let manifest = tables.manifest();
    let run = RunInfo {
        run_id: manifest.run_id.clone(),
        tack_version: manifest.tack_version.clone(),
        simulated: crate::simulated_variants(manifest),
    };
    let ids = crate::trial_ids(run_dir)?;
    let empty = std::fs::read_dir(out_dir).map_or(true, |mut dir| dir.next().is_none());
    if !empty {
        return Err(InteropError::OutExists {
            path: out_dir.to_path_buf(),
        });
    }
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InteropError::Write { path, source }
    };
    std::fs::create_dir_all(out_dir).map_err(write_error(out_dir))?;
    let mut written = 0;
    for batch in ids.chunks(BATCH) {
        for trace in tack_analysis::load_trials(&tables, batch)? {
            let trajectory = trajectory(&trace, &run)?;
            let text =
                serde_json::to_string_pretty(&trajectory).map_err(|e| InteropError::Encode {
                    trial_id: trace.trial.trial_id.clone(),
                    message: e.to_string(),
                })?;
            // Trial ids are checked to be file names when the trials load.
            let path = out_dir.join(format!("{}.json", trace.trial.trial_id));
            std::fs::write(&path, text).map_err(write_error(&path))?;
            written += 1;
        }
        progress(written, ids.len());
    }
    Ok(Exported {
        out_dir: out_dir.to_path_buf(),
        trajectories: written,
    })
}

/// One trial as an ATIF trajectory.
pub fn trajectory(trace: &TrialTrace, run: &RunInfo) -> Result<Value, InteropError> {
    let trial = &trace.trial;
    let harness = harness_messages(trace);
    let mut steps = Steps::new(trace);
    for (position, message) in trace.messages.iter().enumerate() {
        match message.role.as_str() {
            "assistant" => {
                let calls = tool_calls(message.tool_calls_json.as_deref()).map_err(|message| {
                    InteropError::Encode {
                        trial_id: trial.trial_id.clone(),
                        message,
                    }
                })?;
                steps.agent(position, &message.content, message.seq, &calls);
            }
            "tool" => steps.tool_result(message.tool_call_id.as_deref(), &message.content),
            // A user's message, or a system message (the prompt, a note
            // the harness added). What the harness wrote in the user's role
            // (a compaction's instruction and summary) is the system's.
            role => {
                let by_harness = harness.contains(message.message_id.as_str())
                    || message.content.starts_with(COMPACTION_SUMMARY_START);
                let mut step = match (role, by_harness) {
                    ("user", false) => json!({"source": "user", "message": message.content}),
                    _ => json!({"source": "system", "message": message.content}),
                };
                if by_harness && role == "user" {
                    step["extra"] = json!({"tack": {"role": "user", "written_by": "harness"}});
                }
                steps.push(step);
            }
        }
    }
    let (mut steps, unanswered) = steps.done();
    if steps.is_empty() {
        // ATIF asks for a step; a trial that failed before its first
        // message has none of its own.
        steps.push(json!({"source": "system", "message": ""}));
    }
    for (index, step) in steps.iter_mut().enumerate() {
        step["step_id"] = json!(index + 1);
    }
    let total_steps = steps.len();
    let mut root = json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": trial.trial_id,
        "agent": {
            "name": "tack",
            "version": run.tack_version,
            "model_name": trial.model,
            "extra": {
                "variant": trial.variant,
                "simulated": run.simulated.contains(&trial.variant),
            },
        },
        "steps": steps,
        "notes": NOTES,
        "final_metrics": {
            "total_prompt_tokens": trial.input_tokens,
            "total_completion_tokens": trial.output_tokens,
            "total_steps": total_steps,
        },
        "extra": {"tack": tack_extra(trace, run)},
    });
    if !unanswered.is_empty() {
        root["extra"]["tack"]["unanswered_model_calls"] = json!(unanswered);
    }
    if let Some(cost) = trial.cost_usd {
        root["final_metrics"]["total_cost_usd"] = json!(cost);
    }
    let cached = trace
        .spans
        .iter()
        .filter(|span| span.kind == kind::MODEL_CALL)
        .filter_map(|span| span.cache_read_tokens)
        .reduce(u64::saturating_add);
    if let Some(cached) = cached {
        root["final_metrics"]["total_cached_tokens"] = json!(cached);
    }
    Ok(root)
}

/// The messages only the harness's own model calls were sent (a
/// compaction's instruction): a call made for a purpose is named for it,
/// not for its model.
fn harness_messages(trace: &TrialTrace) -> HashSet<&str> {
    let calls = trace.spans.iter().filter(|s| s.kind == kind::MODEL_CALL);
    let (mut harness, mut agent) = (HashSet::new(), HashSet::new());
    for call in calls {
        let purposed = call
            .request_model
            .as_deref()
            .is_some_and(|m| m != call.name);
        let ids = call.message_ids.iter().flatten().map(String::as_str);
        if purposed {
            harness.extend(ids);
        } else {
            agent.extend(ids);
        }
    }
    harness.retain(|id| !agent.contains(id));
    harness
}

/// The trial's approvals: each tool call's part that asked, who answered
/// and how, and how long the agent waited.
fn approvals(trace: &TrialTrace) -> Vec<Value> {
    trace
        .spans
        .iter()
        .filter(|span| span.kind == kind::APPROVAL)
        .map(|span| {
            json!({
                "tool_name": span.tool_name,
                "tool_call_id": span.tool_call_id,
                "part": span.permission_part,
                "rule": span.permission_rule,
                "approver": span.approver,
                "approved": span.approved,
                "reason": span.error,
                "waited_ms": span.duration_ms,
                "timestamp": tack_protocol::time::rfc3339_of_ms(span.started_at_ms),
            })
        })
        .collect()
}

/// The trial's own fields, and its checks.
fn tack_extra(trace: &TrialTrace, run: &RunInfo) -> Value {
    let trial = &trace.trial;
    let checks: Vec<Value> = trace
        .spans
        .iter()
        .filter(|span| span.kind == kind::CHECK)
        .map(|span| {
            json!({
                "name": span.name,
                "command": span.check_command,
                "passed": span.check_passed,
                "exit_code": span.exit_code,
                "output": span.check_output,
            })
        })
        .collect();
    json!({
        "run_id": run.run_id,
        "trial_id": trial.trial_id,
        "variant": trial.variant,
        "task": trial.task,
        "trial_index": trial.trial_index,
        "attempt": trial.trial_attempt,
        "environment": trial.environment,
        "outcome": trial.outcome,
        "stop_reason": trial.stop_reason,
        "checks_passed": trial.checks_passed,
        "steps": trial.counts.get(col::STEPS),
        "tool_calls": trial.counts.get(col::TOOL_CALLS),
        "tool_errors": trial.counts.get(col::TOOL_ERRORS),
        "retries": trial.counts.get(col::RETRIES),
        "interventions": trial.counts.get(col::INTERVENTIONS),
        "feedback_rounds": trial.counts.get(col::FEEDBACK_ROUNDS),
        "denied_calls": trial.denied_calls,
        "tampered": trial.tampered,
        "duration_ms": trial.duration_ms,
        "error": trial.error,
        "checks": checks,
        "approvals": approvals(trace),
    })
}

/// An assistant message's tool calls, as ATIF's `{tool_call_id,
/// function_name, arguments}`; arguments that are not a JSON object (a
/// model's malformed call) are kept as written under `extra`.
fn tool_calls(json: Option<&str>) -> Result<Vec<Value>, String> {
    let Some(json) = json else {
        return Ok(Vec::new());
    };
    let calls: Vec<ToolCall> =
        serde_json::from_str(json).map_err(|e| format!("a message's tool calls: {e}"))?;
    Ok(calls
        .into_iter()
        .map(|call| {
            let mut out = json!({"tool_call_id": call.id, "function_name": call.name});
            match serde_json::from_str::<Value>(&call.arguments) {
                Ok(Value::Object(arguments)) => out["arguments"] = Value::Object(arguments),
                _ => {
                    out["arguments"] = json!({});
                    out["extra"] = json!({"arguments_as_written": call.arguments});
                }
            }
            out
        })
        .collect())
}

/// A model call that did not answer, for an `extra`.
fn failed_call(span: &SpanRow) -> Value {
    json!({
        "attempt": span.attempt,
        "status": span.status,
        "error_kind": span.error_kind,
        "error": span.error,
        "timestamp": tack_protocol::time::rfc3339_of_ms(span.started_at_ms),
    })
}

/// The steps as they are built: the model calls (which answered each
/// assistant message, and the attempts that failed before), the tool calls
/// to annotate results with, and where the last agent step is (its tool
/// calls' results join its observation).
struct Steps<'a> {
    steps: Vec<Value>,
    /// Every model call in `seq` order.
    model_calls: Vec<&'a SpanRow>,
    /// The call that produced each assistant message, by its position.
    answered: HashMap<usize, &'a SpanRow>,
    /// Calls up to this `seq` are accounted for.
    seen_seq: u64,
    tool_spans: HashMap<&'a str, &'a SpanRow>,
    last_agent: Option<usize>,
}

impl<'a> Steps<'a> {
    fn new(trace: &'a TrialTrace) -> Steps<'a> {
        let spans = &trace.spans;
        let mut model_calls: Vec<&SpanRow> = spans
            .iter()
            .filter(|span| span.kind == kind::MODEL_CALL)
            .collect();
        model_calls.sort_by_key(|span| span.seq);
        let tool_spans = spans
            .iter()
            .filter(|span| span.kind == kind::TOOL_CALL)
            .filter_map(|span| Some((span.tool_call_id.as_deref()?, span)))
            .collect();
        Steps {
            steps: Vec::new(),
            model_calls,
            answered: crate::answers::answered_by(spans, &trace.messages),
            seen_seq: 0,
            tool_spans,
            last_agent: None,
        }
    }

    fn push(&mut self, step: Value) {
        self.steps.push(step);
        self.last_agent = None;
    }

    /// The assistant message at `position` in the conversation, added at
    /// `seq`, with the model call that produced it; the attempts that failed
    /// since the previous answer go under the step's `extra`.
    fn agent(&mut self, position: usize, content: &str, seq: u64, calls: &[Value]) {
        let answered = self.answered.get(&position).copied();
        let failed: Vec<Value> = self
            .model_calls
            .iter()
            .filter(|span| span.status != "ok" && span.seq > self.seen_seq && span.seq < seq)
            .map(|span| failed_call(span))
            .collect();
        self.seen_seq = seq;
        let mut step = json!({"source": "agent", "message": content});
        if let Some(call) = answered {
            step["timestamp"] = json!(tack_protocol::time::rfc3339_of_ms(call.started_at_ms));
            if let Some(model) = call.response_model.as_ref().or(call.request_model.as_ref()) {
                step["model_name"] = json!(model);
            }
            let mut metrics = Map::new();
            let mut put = |name: &str, value: Option<Value>| {
                if let Some(value) = value {
                    metrics.insert(name.to_string(), value);
                }
            };
            put("prompt_tokens", call.input_tokens.map(Value::from));
            put("completion_tokens", call.output_tokens.map(Value::from));
            put("cached_tokens", call.cache_read_tokens.map(Value::from));
            put("cost_usd", call.cost_usd.map(Value::from));
            if !metrics.is_empty() {
                step["metrics"] = Value::Object(metrics);
            }
        }
        if !failed.is_empty() {
            step["extra"] = json!({"failed_model_calls": failed});
        }
        if !calls.is_empty() {
            step["tool_calls"] = json!(calls);
        }
        self.steps.push(step);
        self.last_agent = Some(self.steps.len() - 1);
    }

    /// A tool message: a result in the observation of the agent step that
    /// made the call, or a system step of its own when no step did.
    fn tool_result(&mut self, call_id: Option<&str>, content: &str) {
        let mut result = json!({"content": content});
        if let Some(span) = call_id.and_then(|id| self.tool_spans.get(id)) {
            let mut extra = Map::new();
            for (name, value) in [
                ("exit_code", span.exit_code.map(Value::from)),
                ("error_kind", span.error_kind.clone().map(Value::from)),
                ("error", span.error.clone().map(Value::from)),
                ("truncated", span.truncated.map(Value::from)),
                ("mcp_server", span.mcp_server.clone().map(Value::from)),
            ] {
                if let Some(value) = value {
                    extra.insert(name.to_string(), value);
                }
            }
            if !extra.is_empty() {
                result["extra"] = Value::Object(extra);
            }
        }
        let owner = self.last_agent.filter(|&at| {
            let calls = self.steps[at]["tool_calls"].as_array();
            calls.is_some_and(|calls| {
                calls
                    .iter()
                    .any(|call| call_id.is_some_and(|id| call["tool_call_id"] == id))
            })
        });
        match owner {
            Some(at) => {
                result["source_call_id"] = json!(call_id);
                let step = &mut self.steps[at];
                if step.get("observation").is_none() {
                    step["observation"] = json!({"results": []});
                }
                if let Some(results) = step["observation"]["results"].as_array_mut() {
                    results.push(result);
                }
            }
            None => {
                // ATIF ties a result to a call of its own step only.
                if let Some(id) = call_id {
                    result["extra"]["tool_call_id"] = json!(id);
                }
                let last_agent = self.last_agent;
                self.push(json!({
                    "source": "system",
                    "message": "",
                    "observation": {"results": [result]},
                }));
                self.last_agent = last_agent;
            }
        }
    }

    /// The steps, and the model calls no message came of: those that
    /// failed after the last answer (a call that failed last ends a trial in
    /// `model_error`); the failures before an answer are in its step.
    fn done(self) -> (Vec<Value>, Vec<Value>) {
        let unanswered = self
            .model_calls
            .iter()
            .filter(|span| span.status != "ok" && span.seq > self.seen_seq)
            .map(|span| failed_call(span))
            .collect();
        (self.steps, unanswered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_are_not_an_object_are_kept_as_written() {
        let calls = r#"[{"id":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"},
                        {"id":"c2","name":"bash","arguments":"{\"command\": \"ls"}]"#;
        let calls = tool_calls(Some(calls)).unwrap();
        assert_eq!(calls[0]["arguments"], json!({"command": "ls"}));
        assert!(calls[0].get("extra").is_none());
        assert_eq!(calls[1]["arguments"], json!({}));
        assert_eq!(
            calls[1]["extra"]["arguments_as_written"],
            "{\"command\": \"ls"
        );
        assert!(tool_calls(Some("not json")).is_err());
        assert!(tool_calls(None).unwrap().is_empty());
    }
}
