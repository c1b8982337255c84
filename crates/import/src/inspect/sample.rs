//! One Inspect sample (one epoch of one dataset sample) as one tack trial:
//! model events become model-call spans, tool events tool-call spans, scores
//! checks, and every message of the conversation is recorded once, model
//! calls referring to the messages they sent by index.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};
use tack_protocol::time::parse_rfc3339_ms;
use tack_protocol::{
    CheckRecord, Event, ModelCallRecord, RunTotals, SpanStatus, StopReason, ToolCallRecord,
    ToolErrorKind, TrialFinished, TrialOutcome, TrialStarted, Usage, trial_id,
};

use super::score;
use super::values::{
    content_text, message, resolve_attachments, seconds_ms, str_field, text_of, u64_field,
};

/// What every trial of one log shares.
#[derive(Debug, Clone)]
pub struct TrialContext {
    pub run_id: String,
    pub variant: String,
    /// The model as Inspect names it, e.g. `openai/gpt-4o`.
    pub model: String,
}

/// A converted sample: its events (first `TrialStarted`, last
/// `TrialFinished`), and what the import reports about it.
#[derive(Debug, Clone)]
pub struct ConvertedSample {
    pub events: Vec<Event>,
    pub sample_id: String,
    pub epoch: u32,
    /// Inspect's own token count for the sample (`model_usage`), to set
    /// beside the sum of the model events.
    pub inspect_usage: Usage,
    /// Event kinds that have no tack counterpart (spans, state changes,
    /// logging), by kind: left out, not lost data about the agent.
    pub ignored_events: BTreeMap<String, u64>,
}

/// Task names become parts of trial ids and file names: sample ids may be
/// numbers or hold spaces and slashes.
pub fn safe_name(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "_".to_string()
    } else {
        name
    }
}

/// Why one sample of a log does not become a trial; the others go on.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("no such sample")]
    Missing,
    #[error("entry vanished")]
    Vanished,
    #[error(transparent)]
    Entry(#[from] super::LogError),
    #[error("it has no `id`")]
    NoId,
    #[error("it has no `epoch` (1 or more)")]
    NoEpoch,
}

/// Converts one sample, or says why it cannot be.
pub fn convert(mut sample: Value, context: &TrialContext) -> Result<ConvertedSample, SampleError> {
    let sample_id = sample
        .get("id")
        .map(text_of)
        .filter(|id| !id.is_empty())
        .ok_or(SampleError::NoId)?;
    let epoch = sample
        .get("epoch")
        .and_then(Value::as_u64)
        .filter(|epoch| *epoch >= 1)
        .ok_or(SampleError::NoEpoch)? as u32;
    let attachments = match sample.get_mut("attachments").map(Value::take) {
        Some(Value::Object(attachments)) => attachments,
        _ => Map::new(),
    };
    resolve_attachments(&mut sample, &attachments);
    let task = safe_name(&sample_id);
    let first_event_ms = sample
        .get("events")
        .and_then(|events| events.get(0))
        .and_then(|event| str_field(event, "timestamp"))
        .and_then(parse_rfc3339_ms);
    let started_at_ms = str_field(&sample, "started_at")
        .and_then(parse_rfc3339_ms)
        .or(first_event_ms)
        .unwrap_or(0);
    let started = TrialStarted {
        run_id: context.run_id.clone(),
        trial_id: trial_id(&context.variant, &task, epoch - 1, 0),
        variant: context.variant.clone(),
        task,
        trial_index: epoch - 1,
        attempt: 0,
        seed: 0,
        model: context.model.clone(),
        started_at_ms,
        // Inspect's log says nothing tack would call one.
        environment: None,
    };
    let mut builder = Builder::new(&sample);
    builder.events.push(Event::TrialStarted(started));
    if let Some(Value::Array(events)) = sample.get("events") {
        for event in events {
            builder.event(event);
        }
    }
    // Messages no model call sent (the final answer, a scorer's note) still
    // belong to the conversation.
    if let Some(Value::Array(messages)) = sample.get("messages") {
        for value in messages {
            builder.intern(value);
        }
    }
    let inspect_usage = usage_sum(sample.get("model_usage"));
    let finished = builder.finish(&sample, started_at_ms);
    let mut events = builder.events;
    events.push(Event::TrialFinished(finished));
    Ok(ConvertedSample {
        events,
        sample_id,
        epoch,
        inspect_usage,
        ignored_events: builder.ignored,
    })
}

/// Inspect's usage object (`ModelUsage`) as tack's.
fn usage(value: Option<&Value>) -> Usage {
    let Some(value) = value else {
        return Usage::default();
    };
    Usage {
        input_tokens: u64_field(value, "input_tokens"),
        output_tokens: u64_field(value, "output_tokens"),
        cache_read_tokens: u64_field(value, "input_tokens_cache_read"),
        cache_write_tokens: u64_field(value, "input_tokens_cache_write"),
        reasoning_tokens: u64_field(value, "reasoning_tokens"),
    }
}

/// The sum of a `model_usage` map (model name → usage).
fn usage_sum(value: Option<&Value>) -> Usage {
    let mut total = Usage::default();
    if let Some(Value::Object(models)) = value {
        for model in models.values() {
            total += usage(Some(model));
        }
    }
    total
}

struct Builder<'s> {
    events: Vec<Event>,
    /// The message pool newer logs refer to by `input_refs` ranges.
    pool: Vec<&'s Value>,
    /// Recorded messages by Inspect's message id (or their JSON when they
    /// have none), so each is recorded once.
    recorded: HashMap<String, u32>,
    /// The model-call span and step that asked for each tool call id.
    callers: HashMap<String, (u32, u32)>,
    next_span: u32,
    /// The agent's model turns so far (a grader's calls take none).
    step: u32,
    /// Inspect's own retry counts: it logs one event per call, not one
    /// per failed attempt, so the events alone would undercount them.
    retries: u32,
    ignored: BTreeMap<String, u64>,
}

impl<'s> Builder<'s> {
    fn new(sample: &'s Value) -> Builder<'s> {
        let pool = sample
            .get("events_data")
            .and_then(|data| data.get("messages"))
            .and_then(Value::as_array)
            .map(|messages| messages.iter().collect())
            .unwrap_or_default();
        Builder {
            events: Vec::new(),
            pool,
            recorded: HashMap::new(),
            callers: HashMap::new(),
            next_span: 1,
            step: 0,
            retries: 0,
            ignored: BTreeMap::new(),
        }
    }

    fn event(&mut self, event: &'s Value) {
        match str_field(event, "event") {
            Some("model") => self.model_event(event),
            Some("tool") => self.tool_event(event),
            other => {
                *self
                    .ignored
                    .entry(other.unwrap_or("(no kind)").to_string())
                    .or_default() += 1;
            }
        }
    }

    /// Records a message unless it already was; its index either way.
    fn intern(&mut self, value: &Value) -> u32 {
        let key = str_field(value, "id")
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string());
        if let Some(index) = self.recorded.get(&key) {
            return *index;
        }
        let index = self.recorded.len() as u32;
        self.recorded.insert(key, index);
        self.events.push(Event::Message {
            index,
            message: message(value),
        });
        index
    }

    /// The messages a model event sent: `input_refs` ranges (end exclusive)
    /// into the pool in newer logs, the `input` list itself in older ones.
    fn inputs(&self, event: &'s Value) -> Vec<&'s Value> {
        if let Some(Value::Array(ranges)) = event.get("input_refs") {
            let mut inputs = Vec::new();
            for range in ranges {
                let bound = |i| range.get(i).and_then(Value::as_u64).map(|n| n as usize);
                if let (Some(start), Some(end)) = (bound(0), bound(1)) {
                    inputs.extend(self.pool.iter().take(end).skip(start).copied());
                }
            }
            return inputs;
        }
        event
            .get("input")
            .and_then(Value::as_array)
            .map(|input| input.iter().collect())
            .unwrap_or_default()
    }

    fn model_event(&mut self, event: &'s Value) {
        let messages: Vec<u32> = self
            .inputs(event)
            .into_iter()
            .map(|input| self.intern(input))
            .collect();
        let output = event.get("output").unwrap_or(&Value::Null);
        let choice = output.get("choices").and_then(|choices| choices.get(0));
        let model = str_field(event, "model").unwrap_or_default();
        let (provider, request_model) = model.split_once('/').unwrap_or(("", model));
        let error = str_field(event, "error")
            .or_else(|| str_field(output, "error"))
            .map(str::to_string);
        let call_usage = usage(output.get("usage"));
        let cost_usd = output
            .get("usage")
            .and_then(|u| u.get("total_cost"))
            .and_then(Value::as_f64);
        let span_id = self.take_span();
        // Inspect's model roles (a grader, a red team) are not the agent.
        let purpose = str_field(event, "role").map(str::to_string);
        if purpose.is_none() {
            self.step += 1;
        }
        let step = self.step;
        let retries = u64_field(event, "retries") as u32;
        self.retries += retries;
        self.events.push(Event::ModelCall(ModelCallRecord {
            span_id,
            step,
            provider: provider.to_string(),
            request_model: request_model.to_string(),
            response_model: str_field(output, "model").unwrap_or(model).to_string(),
            started_at_ms: event_start(event),
            duration_ms: event_duration(event),
            finish_reason: choice
                .and_then(|c| str_field(c, "stop_reason"))
                .map(str::to_string),
            usage: call_usage,
            cost_usd,
            messages,
            attempt: retries + 1,
            retry_wait_ms: 0,
            rate_limit_wait_ms: 0,
            fault: None,
            purpose,
            parent_span_id: None,
            status: if error.is_some() {
                SpanStatus::Error
            } else {
                SpanStatus::Ok
            },
            error,
        }));
        if let Some(answer) = choice.and_then(|c| c.get("message")) {
            self.intern(answer);
            for call in answer
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(id) = call.get("id").map(text_of) {
                    self.callers.insert(id, (span_id, step));
                }
            }
        }
    }

    fn tool_event(&mut self, event: &Value) {
        let call_id = event.get("id").map(text_of).unwrap_or_default();
        let (parent_span_id, step) = self
            .callers
            .get(&call_id)
            .copied()
            .unwrap_or((self.next_span.saturating_sub(1), self.step));
        let error = event.get("error").filter(|e| !e.is_null());
        let error_message =
            error.map(|e| str_field(e, "message").map_or_else(|| text_of(e), str::to_string));
        let mut result = event.get("result").map(content_text).unwrap_or_default();
        if result.is_empty()
            && let Some(message) = &error_message
        {
            result = message.clone();
        }
        let span_id = self.take_span();
        self.events.push(Event::ToolCall(ToolCallRecord {
            span_id,
            parent_span_id,
            step,
            call_id,
            tool_name: str_field(event, "function").unwrap_or_default().to_string(),
            arguments: event
                .get("arguments")
                .map(|a| a.to_string())
                .unwrap_or_else(|| "{}".to_string()),
            result,
            exit_code: None,
            stdout: None,
            stderr: None,
            truncated: event.get("truncated").is_some_and(|t| !t.is_null()),
            started_at_ms: event_start(event),
            duration_ms: event_duration(event),
            status: if error.is_some() {
                SpanStatus::Error
            } else {
                SpanStatus::Ok
            },
            error_kind: error.map(|e| tool_error_kind(str_field(e, "type").unwrap_or_default())),
            permission: None,
            permission_rule: None,
            permission_part: None,
            sandbox_profile: None,
            sandbox_denials: Vec::new(),
            mcp_server: None,
        }));
    }

    fn take_span(&mut self) -> u32 {
        let span = self.next_span;
        self.next_span += 1;
        span
    }

    /// The checks (one per scorer) and the trial's totals and outcome.
    fn finish(&mut self, sample: &Value, started_at_ms: i64) -> TrialFinished {
        let finished_at_ms = str_field(sample, "completed_at")
            .and_then(parse_rfc3339_ms)
            .unwrap_or(started_at_ms);
        let scores = sample.get("scores").and_then(Value::as_object);
        let mut all_passed = None;
        for (scorer, score) in scores.into_iter().flatten() {
            let passed = score.get("value").is_some_and(score::passes);
            all_passed = Some(all_passed.unwrap_or(true) && passed);
            let span_id = self.take_span();
            self.events.push(Event::Check(CheckRecord {
                span_id,
                name: scorer.clone(),
                command: format!("inspect scorer {scorer}"),
                exit_code: None,
                passed,
                output: score::check_output(score),
                started_at_ms: finished_at_ms,
                duration_ms: 0,
            }));
        }
        let error = sample
            .get("error")
            .filter(|e| !e.is_null())
            .map(|e| str_field(e, "message").map_or_else(|| text_of(e), str::to_string));
        let limit = sample.get("limit").filter(|l| !l.is_null());
        let (outcome, stop_reason) = match (&error, limit, all_passed) {
            // Inspect is the harness here: a sample it could not finish is
            // its error, whatever the cause it records.
            (Some(_), _, _) => (TrialOutcome::HarnessError, StopReason::HarnessError),
            (None, Some(limit), _) => (TrialOutcome::Limit, limit_reason(limit)),
            (None, None, Some(true)) => (TrialOutcome::Passed, StopReason::Completed),
            (None, None, _) => (TrialOutcome::VerificationFailed, StopReason::Completed),
        };
        let mut totals = RunTotals::of(&self.events);
        totals.retries = self.retries;
        TrialFinished {
            outcome,
            stop_reason,
            totals,
            feedback_rounds: 0,
            tampered: false,
            checks_passed: all_passed,
            duration_ms: seconds_ms(sample.get("total_time"))
                .unwrap_or((finished_at_ms - started_at_ms).max(0) as u64),
            finished_at_ms,
            error,
        }
    }
}

fn limit_reason(limit: &Value) -> StopReason {
    match str_field(limit, "type") {
        Some("token") => StopReason::TokenLimit,
        Some("time" | "working") => StopReason::TimeLimit,
        Some("cost") => StopReason::CostLimit,
        Some("operator" | "custom") => StopReason::Cancelled,
        _ => StopReason::StepLimit,
    }
}

/// Inspect's `ToolCallError.type` as the closest tack kind.
fn tool_error_kind(kind: &str) -> ToolErrorKind {
    match kind {
        "timeout" => ToolErrorKind::Timeout,
        "parsing" => ToolErrorKind::InvalidArguments,
        "permission" | "approval" => ToolErrorKind::Denied,
        _ => ToolErrorKind::ExecutionFailed,
    }
}

fn event_start(event: &Value) -> i64 {
    str_field(event, "timestamp")
        .and_then(parse_rfc3339_ms)
        .unwrap_or(0)
}

fn event_duration(event: &Value) -> u64 {
    seconds_ms(event.get("working_time")).unwrap_or_else(|| {
        match str_field(event, "completed").and_then(parse_rfc3339_ms) {
            Some(end) => (end - event_start(event)).max(0) as u64,
            None => 0,
        }
    })
}

/// Whether a converted trial recorded this message, for tests.
#[cfg(test)]
pub fn recorded_messages(events: &[Event]) -> Vec<(u32, &tack_protocol::Message)> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Message { index, message } => Some((*index, message)),
            _ => None,
        })
        .collect()
}
