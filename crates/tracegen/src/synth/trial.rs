//! The events of one synthetic trial attempt, in the order the harness
//! records them: the start, the system prompt and instruction, then per step
//! a model call (after any failed attempts), the assistant's message, an
//! approval now and then, the tool call and its result; then the checks and
//! the totals.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use tack_protocol::{
    ApprovalRecord, CheckRecord, Event, Message, ModelCallRecord, RunTotals, SpanStatus,
    StopReason, ToolCall, ToolCallRecord, ToolErrorKind, TrialFinished, TrialOutcome, TrialStarted,
    Usage,
};

use super::{Shape, TaskProfile, VariantProfile, text};

/// How an attempt at a planned trial ends, before the agent's own result is
/// drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The agent ran to a result of its own.
    Normal,
    /// The sandbox could not be set up: no step ran.
    SandboxFailure,
    /// The provider stayed down through every retry, some steps in.
    ProviderDown,
    /// A crash cut the attempt off; it was recovered from its journal.
    Cancelled,
}

impl Attempt {
    /// The attempts one planned trial takes: most run once; about one in
    /// seventy hits an infrastructure failure and runs again (one in ten of
    /// those fails again, and stays an infra error), and a few were cut off
    /// by a crash and resumed.
    pub(crate) fn chain(rng: &mut ChaCha8Rng) -> Vec<Attempt> {
        let roll: f64 = rng.random();
        let infra = if rng.random_bool(0.5) {
            Attempt::SandboxFailure
        } else {
            Attempt::ProviderDown
        };
        if roll < 0.013 {
            if rng.random_bool(0.1) {
                vec![infra, infra]
            } else {
                vec![infra, Attempt::Normal]
            }
        } else if roll < 0.016 {
            vec![Attempt::Cancelled, Attempt::Normal]
        } else {
            vec![Attempt::Normal]
        }
    }
}

/// Who ran, and where in the plan.
pub(crate) struct TrialSlot<'a> {
    pub run_id: &'a str,
    pub variant: &'a VariantProfile,
    pub task: &'a TaskProfile,
    pub trial_index: u32,
    pub attempt: u32,
    pub seed: u64,
    pub started_at_ms: i64,
}

/// A log-normal draw with the given median, as a whole number of at least 1:
/// durations, token counts and output sizes all have its long right tail.
fn log_normal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> u64 {
    let z: f64 = rng.sample(StandardNormal);
    ((median.max(1.0).ln() + sigma * z).exp().round() as u64).max(1)
}

/// Tool output above this many bytes is cut, as the harness cuts it.
const OUTPUT_LIMIT: usize = 16 * 1024;

/// A tool call [`Builder::pick_call`] chose, before its record is shaped.
struct PickedCall {
    name: &'static str,
    arguments: String,
    stdout: String,
    exit_code: Option<i32>,
    /// Its typical duration.
    median_ms: f64,
    /// Which of the task's files it names.
    file: usize,
}

struct Builder<'a> {
    slot: &'a TrialSlot<'a>,
    rng: &'a mut ChaCha8Rng,
    events: Vec<Event>,
    messages: u32,
    /// Tokens of the conversation so far, and of it at the last call.
    context_tokens: u64,
    cached_tokens: u64,
    next_span: u32,
    clock_ms: i64,
}

/// The events of one attempt, from `TrialStarted` to `TrialFinished`.
pub(crate) fn trial_events(
    shape: &Shape,
    slot: &TrialSlot<'_>,
    attempt: Attempt,
    rng: &mut ChaCha8Rng,
) -> Vec<Event> {
    let mut b = Builder {
        slot,
        rng,
        events: Vec::with_capacity(4 * shape.spans_per_trial as usize),
        messages: 0,
        context_tokens: 0,
        cached_tokens: 0,
        next_span: 1,
        clock_ms: slot.started_at_ms,
    };
    b.events.push(started(slot));
    if attempt == Attempt::SandboxFailure {
        b.clock_ms += log_normal(b.rng, 800.0, 0.6) as i64;
        let error = "sandbox setup failed: could not create the trial workspace: \
                     No space left on device (os error 28)";
        return b.finish(
            StopReason::HarnessError,
            TrialOutcome::InfraError,
            Some(error),
        );
    }
    b.message(Message::system(slot.variant.system_prompt.clone()));
    b.message(Message::user(slot.task.instruction.clone()));
    let passes = b.rng.random_bool(pass_chance(slot.variant, slot.task));
    let mean_steps = (f64::from(shape.spans_per_trial) - 0.5) / 2.0;
    // Failing trials wander longer before they stop.
    let median = if passes { 0.8 } else { 1.15 } * mean_steps / 0.96;
    let mut steps = log_normal(b.rng, median, 0.5) as u32;
    let roll: f64 = b.rng.random();
    let (stop, outcome, error) = ending(attempt, roll, steps >= slot.variant.max_steps, passes);
    steps = steps.clamp(1, slot.variant.max_steps);
    if matches!(attempt, Attempt::ProviderDown | Attempt::Cancelled)
        || stop == StopReason::ModelError
    {
        steps = b.rng.random_range(1..=steps);
    }
    for step in 1..=steps {
        let answers = stop == StopReason::Completed && step == steps;
        b.step(step, answers, outcome == TrialOutcome::Passed);
    }
    match stop {
        StopReason::Completed => b.checks(outcome == TrialOutcome::Passed),
        StopReason::ProviderUnavailable => {
            b.failed_call(steps + 1, 1, "HTTP 503 Service Unavailable", None)
        }
        _ => {}
    }
    b.finish(stop, outcome, error)
}

/// The attempt's `TrialStarted`.
fn started(slot: &TrialSlot<'_>) -> Event {
    Event::TrialStarted(TrialStarted {
        run_id: slot.run_id.to_string(),
        trial_id: tack_protocol::trial_id(
            &slot.variant.name,
            &slot.task.name,
            slot.trial_index,
            slot.attempt,
        ),
        variant: slot.variant.name.clone(),
        task: slot.task.name.clone(),
        trial_index: slot.trial_index,
        attempt: slot.attempt,
        seed: slot.seed,
        model: slot.variant.model.to_string(),
        started_at_ms: slot.started_at_ms,
        environment: Some(tack_protocol::TrialEnvironment::Host),
    })
}

/// How an attempt ends, by its kind, a uniform `roll` (1% model errors,
/// 0.1% harness errors), whether its steps reach the variant's limit, and
/// whether it `passes`.
fn ending(
    attempt: Attempt,
    roll: f64,
    over_steps: bool,
    passes: bool,
) -> (StopReason, TrialOutcome, Option<&'static str>) {
    match attempt {
        Attempt::ProviderDown => (
            StopReason::ProviderUnavailable,
            TrialOutcome::InfraError,
            Some("the provider was unavailable through 5 retries: HTTP 503 Service Unavailable"),
        ),
        Attempt::Cancelled => (
            StopReason::Cancelled,
            TrialOutcome::Cancelled,
            Some("the run was interrupted before this trial finished; recovered from its journal"),
        ),
        _ if roll < 0.01 => (
            StopReason::ModelError,
            TrialOutcome::ModelError,
            Some("HTTP 400: the request exceeds the model's context length"),
        ),
        _ if roll < 0.011 => (
            StopReason::HarnessError,
            TrialOutcome::HarnessError,
            Some("could not record the trial: the event sink refused a write"),
        ),
        _ if over_steps => (StopReason::StepLimit, TrialOutcome::Limit, None),
        _ if passes => (StopReason::Completed, TrialOutcome::Passed, None),
        _ => (
            StopReason::Completed,
            TrialOutcome::VerificationFailed,
            None,
        ),
    }
}

/// The chance that `variant` passes `task`.
fn pass_chance(variant: &VariantProfile, task: &TaskProfile) -> f64 {
    (variant.skill + 0.7 * (0.5 - task.difficulty)).clamp(0.02, 0.98)
}

impl Builder<'_> {
    fn span_id(&mut self) -> u32 {
        let id = self.next_span;
        self.next_span += 1;
        id
    }

    fn message(&mut self, message: Message) {
        self.context_tokens += message.content.len() as u64 / 4 + 4;
        self.events.push(Event::Message {
            index: self.messages,
            message,
        });
        self.messages += 1;
    }

    fn tick(&mut self, median_ms: f64) -> (i64, u64) {
        let start = self.clock_ms;
        let duration = log_normal(self.rng, median_ms, 0.7);
        self.clock_ms += duration as i64;
        (start, duration)
    }

    fn call_record(&mut self, step: u32, attempt: u32) -> ModelCallRecord {
        let v = self.slot.variant;
        let (started_at_ms, duration_ms) = self.tick(if v.reasoning { 9000.0 } else { 2500.0 });
        let rate_limit_wait_ms = if self.rng.random_bool(0.08) {
            self.rng.random_range(50..3000)
        } else {
            0
        };
        ModelCallRecord {
            span_id: self.span_id(),
            step,
            provider: v.provider.to_string(),
            request_model: v.request_model.to_string(),
            response_model: v.response_model.to_string(),
            started_at_ms,
            duration_ms,
            finish_reason: None,
            usage: Usage::default(),
            cost_usd: None,
            messages: (0..self.messages).collect(),
            attempt,
            retry_wait_ms: 0,
            rate_limit_wait_ms,
            fault: None,
            purpose: None,
            parent_span_id: None,
            status: SpanStatus::Error,
            error: None,
        }
    }

    /// A model-call attempt that got no answer; the call is retried.
    fn failed_call(&mut self, step: u32, attempt: u32, error: &str, fault: Option<&str>) {
        let mut call = self.call_record(step, attempt);
        call.error = Some(error.to_string());
        call.fault = fault.map(str::to_owned);
        self.events.push(Event::ModelCall(call));
    }

    /// The answered call of `step`, with what it used and cost.
    fn answered_call(&mut self, step: u32, attempt: u32, finish: &str) -> u32 {
        let v = self.slot.variant;
        let mut call = self.call_record(step, attempt);
        if attempt > 1 {
            call.retry_wait_ms = self.rng.random_range(500..4000);
        }
        let reasoning = if v.reasoning {
            log_normal(self.rng, 600.0, 0.8)
        } else {
            0
        };
        let output = log_normal(self.rng, 120.0, 0.6) + reasoning;
        let cache_read = if v.price.is_some() {
            self.cached_tokens * 9 / 10
        } else {
            0
        };
        let cache_write = if v.provider == "anthropic" {
            self.context_tokens - self.cached_tokens
        } else {
            0
        };
        call.usage = Usage {
            input_tokens: self.context_tokens + 350,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            reasoning_tokens: reasoning,
        };
        call.cost_usd = v.price.map(|p| {
            let fresh = call.usage.input_tokens - cache_read - cache_write;
            (fresh as f64 * p.input
                + cache_read as f64 * p.cached_input
                + cache_write as f64 * p.cache_write
                + output as f64 * p.output)
                / 1e6
        });
        self.cached_tokens = self.context_tokens;
        call.status = SpanStatus::Ok;
        call.finish_reason = Some(finish.to_string());
        let id = call.span_id;
        self.events.push(Event::ModelCall(call));
        id
    }

    /// One agent step: a model call and, unless the model answers, a tool
    /// call and its result.
    fn step(&mut self, step: u32, answers: bool, passing: bool) {
        let v = self.slot.variant;
        let mut attempt = 1;
        if self.rng.random_bool(0.02) {
            self.failed_call(
                step,
                attempt,
                "HTTP 429: rate limited; retry after 2s",
                None,
            );
            attempt = 2;
        }
        let fault = self.rng.random_bool(v.fault_rate);
        if fault && self.rng.random_bool(0.5) {
            self.failed_call(
                step,
                attempt,
                "injected transport error (chaos)",
                Some("transport_error"),
            );
            attempt += 1;
        }
        let malformed = fault && attempt == 1;
        if answers {
            self.answered_call(step, attempt, "stop");
            let summary = format!("Done: {}", text::remark(self.rng));
            self.message(Message::assistant(summary, Vec::new()));
            return;
        }
        let parent = self.answered_call(step, attempt, "tool_calls");
        if malformed && let Some(Event::ModelCall(call)) = self.events.last_mut() {
            call.fault = Some("malformed_json".to_string());
        }
        let call_id = if v.stable_call_ids {
            format!("call-{step}")
        } else {
            format!("call_{:016x}", self.rng.random::<u64>())
        };
        let late = passing && self.rng.random_bool(0.5);
        let mut tool = self.tool_call(step, parent, &call_id, late);
        if malformed {
            tool.arguments.truncate(tool.arguments.len() / 2);
            tool.error_kind = Some(ToolErrorKind::InvalidJson);
            tool.status = SpanStatus::Error;
            tool.result = "error: the arguments are not valid JSON".to_string();
            (tool.stdout, tool.stderr, tool.exit_code) = (None, None, None);
        }
        let remark = text::remark(self.rng);
        let request = ToolCall {
            id: call_id.clone(),
            name: tool.tool_name.clone(),
            arguments: tool.arguments.clone(),
        };
        self.message(Message::assistant(remark, vec![request]));
        if v.approvals && tool.tool_name == "bash" && self.rng.random_bool(0.05) {
            self.approval(step, parent, &tool);
        }
        let result = Message::tool_result(call_id, tool.result.clone());
        self.events.push(Event::ToolCall(tool));
        self.message(result);
    }

    fn approval(&mut self, step: u32, parent: u32, tool: &ToolCallRecord) {
        let (started_at_ms, wait_ms) = self.tick(900.0);
        let approved = self.rng.random_bool(0.9);
        let span_id = self.span_id();
        self.events.push(Event::Approval(ApprovalRecord {
            span_id,
            parent_span_id: parent,
            step,
            call_id: tool.call_id.clone(),
            tool_name: tool.tool_name.clone(),
            arguments: tool.arguments.clone(),
            rule: "ask bash: git *".to_string(),
            part: "git status".to_string(),
            approved,
            approver: "rules".to_string(),
            reason: (!approved).then(|| "refused by the rules approver".to_string()),
            started_at_ms,
            wait_ms,
        }));
    }

    /// A tool call of `step`; `late` calls run the tests that now pass.
    /// Which call a step makes, by the mix of tools agents use (reads,
    /// edits, listings, greps, runs, test runs, the last passing when
    /// `late`), with what it prints.
    fn pick_call(&mut self, late: bool) -> PickedCall {
        let task = self.slot.task;
        let file_index = self.rng.random_range(0..task.files.len());
        let file = &task.files[file_index];
        let size = log_normal(self.rng, 250.0, 1.1) as usize;
        let roll = self.rng.random_range(0..100);
        let (name, arguments, stdout, exit_code, median_ms) = match roll {
            0..=14 => (
                "read_file",
                format!("{{\"path\":\"{}\"}}", file.0),
                file.1.clone(),
                None,
                5.0,
            ),
            15..=29 => (
                "str_replace",
                format!(
                    "{{\"path\":\"{}\",\"old\":\"return {}\",\"new\":\"return {} or []\"}}",
                    file.0,
                    text::identifier(self.rng),
                    text::identifier(self.rng)
                ),
                format!("replaced 1 occurrence in {}", file.0),
                None,
                5.0,
            ),
            30..=33 => (
                "write_file",
                format!(
                    "{{\"path\":\"{}\",\"content\":\"...\"}}",
                    text::path(self.rng)
                ),
                format!("wrote {size} bytes"),
                None,
                5.0,
            ),
            34..=43 => (
                "bash",
                "{\"command\":\"ls -la\"}".to_string(),
                task.listing.clone(),
                Some(0),
                40.0,
            ),
            44..=49 => (
                "bash",
                format!("{{\"command\":\"cat {}\"}}", file.0),
                file.1.clone(),
                Some(0),
                30.0,
            ),
            50..=64 => (
                "bash",
                format!(
                    "{{\"command\":\"grep -rn {} src\"}}",
                    text::identifier(self.rng)
                ),
                text::grep_hits(self.rng, size),
                Some(0),
                80.0,
            ),
            65..=71 => (
                "bash",
                format!("{{\"command\":\"python {}\"}}", file.0),
                text::traceback(self.rng),
                Some(1),
                400.0,
            ),
            _ => {
                let failures = if late { 0 } else { self.rng.random_range(1..4) };
                (
                    "bash",
                    "{\"command\":\"python -m pytest -q tests\"}".to_string(),
                    text::test_run(self.rng, size, failures),
                    Some(i32::from(failures > 0)),
                    3000.0,
                )
            }
        };
        PickedCall {
            name,
            arguments,
            stdout,
            exit_code,
            median_ms,
            file: file_index,
        }
    }

    fn tool_call(&mut self, step: u32, parent: u32, call_id: &str, late: bool) -> ToolCallRecord {
        let PickedCall {
            name,
            arguments,
            stdout,
            exit_code,
            median_ms,
            file,
        } = self.pick_call(late);
        let (started_at_ms, duration_ms) = self.tick(median_ms);
        let is_bash = name == "bash";
        let mut tool = ToolCallRecord {
            span_id: self.span_id(),
            parent_span_id: parent,
            step,
            call_id: call_id.to_string(),
            tool_name: name.to_string(),
            arguments,
            result: String::new(),
            exit_code,
            stdout: None,
            stderr: None,
            truncated: stdout.len() > OUTPUT_LIMIT,
            started_at_ms,
            duration_ms,
            status: SpanStatus::Ok,
            error_kind: None,
            permission: None,
            permission_rule: None,
            permission_part: None,
            sandbox_profile: is_bash.then(|| "strict".to_string()),
            sandbox_denials: Vec::new(),
            mcp_server: None,
        };
        let mut shown = stdout;
        shown.truncate(OUTPUT_LIMIT);
        if self.slot.variant.approvals && is_bash {
            tool.permission = Some("allow".to_string());
            tool.permission_rule = Some("allow bash: *".to_string());
            if self.rng.random_bool(0.02) {
                tool.permission = Some("deny".to_string());
                tool.permission_rule = Some("deny bash: rm -rf *".to_string());
                tool.status = SpanStatus::Error;
                tool.error_kind = Some(ToolErrorKind::Denied);
                tool.exit_code = None;
                tool.result = "error: denied by rule deny bash: rm -rf *".to_string();
                return tool;
            }
        }
        if is_bash && self.rng.random_bool(0.01) {
            tool.sandbox_denials = vec!["open /etc/hosts for writing: EACCES".to_string()];
        }
        let stderr = (is_bash && self.rng.random_bool(0.1))
            .then(|| "warning: pytest cache directory is read-only".to_string());
        if name == "str_replace" && self.rng.random_bool(0.1) {
            tool.status = SpanStatus::Error;
            tool.error_kind = Some(ToolErrorKind::ExecutionFailed);
            let path = &self.slot.task.files[file].0;
            tool.result = format!("error: no match for the old text in {path}");
            return tool;
        }
        tool.result = if self.slot.variant.stdout_only || !is_bash {
            shown.clone()
        } else {
            let mut full = shown.clone();
            if let Some(err) = &stderr {
                full.push_str("\n[stderr]\n");
                full.push_str(err);
            }
            if let Some(code) = tool.exit_code.filter(|c| *c != 0) {
                full.push_str(&format!("\n[exit code {code}]"));
            }
            full
        };
        if is_bash {
            tool.stdout = Some(shown);
            tool.stderr = Some(stderr.unwrap_or_default());
        }
        tool
    }

    fn checks(&mut self, passed: bool) {
        let count = self.rng.random_range(1..3);
        let failing = if passed {
            count
        } else {
            self.rng.random_range(0..count)
        };
        for i in 0..count {
            let ok = passed || i < failing;
            let (started_at_ms, duration_ms) = self.tick(2500.0);
            let output = if ok {
                format!(
                    "{} passed in 1.{:02}s",
                    self.rng.random_range(3..40),
                    self.rng.random_range(0..100)
                )
            } else {
                text::test_run(self.rng, 600, 1)
            };
            let span_id = self.span_id();
            self.events.push(Event::Check(CheckRecord {
                span_id,
                name: if i == 0 { "hidden tests" } else { "lint" }.to_string(),
                command: if i == 0 {
                    "python -m pytest -q hidden"
                } else {
                    "ruff check src"
                }
                .to_string(),
                exit_code: Some(i32::from(!ok)),
                passed: ok,
                output,
                started_at_ms,
                duration_ms,
            }));
        }
    }

    fn finish(
        mut self,
        stop: StopReason,
        outcome: TrialOutcome,
        error: Option<&str>,
    ) -> Vec<Event> {
        let checked = stop == StopReason::Completed;
        let tampered = checked && self.rng.random_bool(0.003);
        let feedback_rounds = u32::from(checked && self.rng.random_bool(0.03));
        self.events.push(Event::TrialFinished(TrialFinished {
            outcome,
            stop_reason: stop,
            totals: RunTotals::of(&self.events),
            feedback_rounds,
            tampered,
            checks_passed: checked.then_some(outcome == TrialOutcome::Passed),
            duration_ms: (self.clock_ms - self.slot.started_at_ms).max(0) as u64,
            finished_at_ms: self.clock_ms,
            error: error.map(str::to_owned),
        }));
        self.events
    }
}
