//! The agent loop: two nested loops (model turns, and the tool calls each
//! turn asks for), limits checked before every model call, transient model
//! failures retried with backoff, every tool call through the gate, and every
//! step recorded. A session can be resumed with more user input, which is how
//! failing checks go back to the model in feedback rounds.

mod delegation;
pub mod log;
mod restore;
mod tools;

pub use restore::Restored;

use std::time::{Duration, Instant};

use tack_model::{Model, ModelError, ModelRequest, ModelResponse, TokenCounter};
use tack_protocol::{
    COMPACTION_PROMPT, COMPACTION_PURPOSE, Event, EventSink, FinishReason, HarnessConfig, Message,
    ModelCallRecord, Role, SinkError, SpanStatus, StopReason, ToolSpec, Usage,
};

use crate::context::{self, Context};
use crate::gate::Gatekeeper;
use crate::recorder::Recorder;
use crate::retry::backoff;
use crate::subagents::Subagents;
use crate::{AgentRun, Dispatcher};
use tack_protocol::time::now_ms;

/// Prices one call's usage in dollars; `None` when the model has no price.
pub type Pricer = std::sync::Arc<dyn Fn(&Usage) -> Option<f64> + Send + Sync>;

pub struct Session<'a> {
    pricer: Option<Pricer>,
    subagents: Option<&'a Subagents>,
    project_instructions: Option<String>,
    config: &'a HarnessConfig,
    dispatcher: &'a Dispatcher,
    gatekeeper: &'a Gatekeeper,
    recorder: Recorder<'a>,
    tools: Vec<ToolSpec>,
    /// What the next model call is sent.
    context: Context,
    /// Counts the context's tokens when a strategy needs to know them.
    tokens: TokenCounter,
    clock: Instant,
    run: AgentRun,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("messages", &self.context.messages().len())
            .field("run", &self.run)
            .finish()
    }
}

impl<'a> Session<'a> {
    pub fn new(
        config: &'a HarnessConfig,
        dispatcher: &'a Dispatcher,
        gatekeeper: &'a Gatekeeper,
        sink: &'a mut dyn EventSink,
    ) -> Session<'a> {
        Session {
            pricer: None,
            subagents: None,
            project_instructions: None,
            config,
            dispatcher,
            gatekeeper,
            recorder: Recorder::new(sink),
            tools: dispatcher.specs(),
            context: Context::default(),
            tokens: TokenCounter::default(),
            clock: Instant::now(),
            run: AgentRun::default(),
        }
    }

    /// Project instructions (the workspace's `AGENTS.md`), sent after the
    /// system prompt and before the task.
    pub fn with_project_instructions(mut self, instructions: Option<String>) -> Self {
        self.project_instructions = instructions;
        self
    }

    /// Lets `task` calls start subagents.
    pub fn with_subagents(mut self, subagents: Option<&'a Subagents>) -> Self {
        self.subagents = subagents;
        self
    }

    /// Prices every answered call, so costs are recorded and `max_cost_usd`
    /// can stop the loop.
    pub fn with_pricer(mut self, pricer: Option<Pricer>) -> Self {
        self.pricer = pricer;
        self
    }

    /// Sends `input` as the user (the instruction first, feedback later) and
    /// runs until the model answers without a tool call or a limit stops it.
    pub async fn run(&mut self, model: &mut dyn Model, input: &str) -> StopReason {
        let stop = self.run_inner(model, input).await;
        self.run.stop_reason = stop;
        stop
    }

    async fn run_inner(&mut self, model: &mut dyn Model, input: &str) -> StopReason {
        if self.context.is_empty() {
            if let Err(stop) = self.push_message(Message::system(&self.config.system_prompt)) {
                return stop;
            }
            if let Some(text) = self.project_instructions.take()
                && let Err(stop) = self.push_message(Message::user(text))
            {
                return stop;
            }
        }
        if let Err(stop) = self.push_message(Message::user(input)) {
            return stop;
        }
        self.drive(model).await
    }

    /// The loop: a model call per step, then the tools it asks for.
    async fn drive(&mut self, model: &mut dyn Model) -> StopReason {
        loop {
            if let Some(stop) = self.limit_reached() {
                return stop;
            }
            if let Err(stop) = self.fit_context(model).await {
                return stop;
            }
            self.recorder.begin_step();
            let (message, finish, model_span) = match self.call_model(model, None).await {
                Ok(answer) => answer,
                Err(stop) => return stop,
            };
            let calls = message.tool_calls.clone();
            let content = message.content.clone();
            if let Err(stop) = self.push_message(message) {
                return stop;
            }
            if calls.is_empty() {
                self.run.final_message = Some(content);
                return StopReason::Completed;
            }
            let cut_off = finish == FinishReason::Length;
            if let Err(stop) = self.run_tools(model, &calls, cut_off, model_span).await {
                return stop;
            }
        }
    }

    fn limit_reached(&self) -> Option<StopReason> {
        let config = self.config;
        let totals = self.recorder.totals();
        if totals.steps >= config.max_steps {
            return Some(StopReason::StepLimit);
        }
        if config
            .max_wall_secs
            .is_some_and(|secs| self.clock.elapsed() >= Duration::from_secs(secs))
        {
            return Some(StopReason::TimeLimit);
        }
        if config
            .max_tokens
            .is_some_and(|max| totals.usage.total() >= max)
        {
            return Some(StopReason::TokenLimit);
        }
        let spent = totals.cost_usd.unwrap_or(0.0);
        if config.max_cost_usd.is_some_and(|max| spent >= max) {
            return Some(StopReason::CostLimit);
        }
        None
    }

    fn time_left(&self) -> Option<Duration> {
        self.config
            .max_wall_secs
            .map(|secs| Duration::from_secs(secs).saturating_sub(self.clock.elapsed()))
    }

    /// Applies the variant's context strategy before the next step's call:
    /// stale tool results become stubs, and past the threshold the older
    /// history is compacted into a summary.
    async fn fit_context(&mut self, model: &mut dyn Model) -> Result<(), StopReason> {
        let config = self.config;
        let strategy = &config.context;
        let step = self.recorder.steps() + 1;
        if let Some(after) = strategy.strip_results_after {
            for stub in self.context.strip_results(after, step) {
                self.recorder.message(stub.index, &stub.message)?;
            }
        }
        if strategy.compact_at.is_some() {
            let tokens = self
                .tokens
                .request_tokens(self.context.messages(), &self.tools);
            if context::over_threshold(strategy, tokens) {
                self.compact(model, step).await?;
            }
        }
        Ok(())
    }

    /// Asks the model to summarise the history older than the last few
    /// steps, and puts the summary in its place. The call is sent that
    /// history (the same messages, so a provider's prompt cache still
    /// applies) and the compaction instruction; it is a span of its own,
    /// with purpose `compaction`.
    async fn compact(&mut self, model: &mut dyn Model, step: u32) -> Result<(), StopReason> {
        let keep = self.config.context.keep_last_steps();
        let Some(span) = self.context.compaction_span(keep, step) else {
            return Ok(());
        };
        let prompt = Message::user(COMPACTION_PROMPT);
        let prompt_index = self.context.record_only();
        self.recorder.message(prompt_index, &prompt)?;
        let mut messages = self.context.messages()[..span.1].to_vec();
        messages.push(prompt);
        let mut sent = self.context.sent();
        sent.truncate(span.1);
        sent.push(prompt_index);
        let (answer, _, _) = self.call_model(model, Some((messages, sent))).await?;
        if answer.content.trim().is_empty() {
            // Nothing to put in the history's place: keep it whole, and
            // let the window decide.
            return Ok(());
        }
        let summarised = step.saturating_sub(1).saturating_sub(keep);
        let summary = context::summary_message(&answer.content, summarised);
        let (index, summary) = self.context.replace_with_summary(span, summary);
        self.recorder.message(index, summary)
    }

    /// One model call, retrying transient failures. Every attempt is a span.
    /// `other` is a request that is not the loop's next step (a
    /// compaction): its messages and their history positions.
    async fn call_model(
        &mut self,
        model: &mut dyn Model,
        other: Option<(Vec<Message>, Vec<u32>)>,
    ) -> Result<(Message, FinishReason, u32), StopReason> {
        let attempts = self.config.model_attempts.max(1);
        let mut retry_after = None;
        for attempt in 1..=attempts {
            let wait = if attempt > 1 {
                backoff(attempt, retry_after)
            } else {
                Duration::ZERO
            };
            if self.time_left().is_some_and(|left| left <= wait) {
                return Err(StopReason::TimeLimit);
            }
            // Not on the first attempt: a zero sleep still waits for the
            // timer's next tick, about a millisecond of every step.
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let (mut record, answer) = self.attempt(model, other.as_ref(), attempt, wait).await?;
            match answer {
                Ok(response) => {
                    record.response_model = response.response_model;
                    record.finish_reason = Some(response.finish_reason.as_str().to_string());
                    record.usage = response.usage;
                    record.cost_usd = self
                        .pricer
                        .as_ref()
                        .and_then(|price| price(&response.usage));
                    let span = record.span_id;
                    self.recorder.model_call(record)?;
                    return Ok((response.message, response.finish_reason, span));
                }
                Err(error) => {
                    record.status = SpanStatus::Error;
                    record.error = Some(error.to_string());
                    self.recorder.model_call(record)?;
                    if !error.is_transient() {
                        self.run.error = Some(format!(
                            "after {}: {error}",
                            tack_protocol::count(attempt, "attempt")
                        ));
                        return Err(StopReason::ModelError);
                    }
                    if attempt == attempts {
                        self.run.error = Some(format!(
                            "the provider was unavailable through {}: {error}",
                            tack_protocol::count(attempt, "attempt")
                        ));
                        return Err(StopReason::ProviderUnavailable);
                    }
                    retry_after = error.retry_after();
                }
            }
        }
        Err(StopReason::ModelError)
    }

    /// One request to the model, bounded by the time left, and the span
    /// that records it (its outcome filled in by the caller).
    async fn attempt(
        &mut self,
        model: &mut dyn Model,
        other: Option<&(Vec<Message>, Vec<u32>)>,
        attempt: u32,
        wait: Duration,
    ) -> Result<(ModelCallRecord, Result<ModelResponse, ModelError>), StopReason> {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let request = ModelRequest {
            messages: match other {
                Some((messages, _)) => messages,
                None => self.context.messages(),
            },
            tools: &self.tools,
        };
        let answer = match self.time_left() {
            Some(left) => match tokio::time::timeout(left, model.complete(request)).await {
                Ok(answer) => answer,
                Err(_) => return Err(StopReason::TimeLimit),
            },
            None => model.complete(request).await,
        };
        let mut record = ModelCallRecord {
            span_id: self.recorder.next_span_id(),
            step: self.recorder.steps(),
            provider: model.provider().to_string(),
            request_model: model.model_name().to_string(),
            response_model: String::new(),
            started_at_ms,
            duration_ms: clock.elapsed().as_millis() as u64,
            finish_reason: None,
            usage: Usage::default(),
            cost_usd: None,
            messages: match other {
                Some((_, sent)) => sent.clone(),
                None => self.context.sent(),
            },
            attempt,
            retry_wait_ms: wait.as_millis() as u64,
            rate_limit_wait_ms: 0,
            fault: None,
            purpose: other.map(|_| COMPACTION_PURPOSE.to_string()),
            parent_span_id: None,
            status: SpanStatus::Ok,
            error: None,
        };
        if let Some(note) = model.take_annotation() {
            record.rate_limit_wait_ms = note.rate_limit_wait_ms;
            record.fault = note.fault;
        }
        Ok((record, answer))
    }

    fn push_message(&mut self, message: Message) -> Result<(), StopReason> {
        let (index, message) = self.context.push(message, self.recorder.steps());
        self.recorder.message(index, message)
    }

    /// After a turn was cancelled (its future dropped): every call of the
    /// last answer that has no result gets one saying so, so the
    /// conversation stays well formed for the next turn.
    pub fn cancel_turn(&mut self) {
        let messages = self.context.messages();
        let Some(at) = messages.iter().rposition(|m| m.role == Role::Assistant) else {
            return;
        };
        let answered: Vec<&str> = messages[at..]
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        let unanswered: Vec<String> = messages[at]
            .tool_calls
            .iter()
            .filter(|c| !answered.contains(&c.id.as_str()))
            .map(|c| c.id.clone())
            .collect();
        for id in unanswered {
            let note = "cancelled: the user interrupted this turn before the call finished";
            if self.push_message(Message::tool_result(&id, note)).is_err() {
                return;
            }
        }
        self.run.stop_reason = StopReason::Cancelled;
    }

    /// Summarises the older history now (`/compact`); `false` when there
    /// is too little history to compact.
    pub async fn compact_now(&mut self, model: &mut dyn Model) -> Result<bool, StopReason> {
        let before = self.context.sent();
        self.compact(model, self.recorder.steps() + 1).await?;
        Ok(self.context.sent() != before)
    }

    /// Records an event that is not the loop's own (the checks), with the
    /// next span id.
    pub fn record(&mut self, make: impl FnOnce(u32) -> Event) -> Result<(), SinkError> {
        let span_id = self.recorder.next_span_id();
        self.recorder.record_raw(make(span_id))
    }

    /// Where the loop stands: its stop reason, totals and error so far.
    pub fn outcome(&self) -> AgentRun {
        let mut run = self.run.clone();
        run.totals = self.recorder.totals().clone();
        if run.error.is_none() {
            run.error = self.recorder.failure();
        }
        run
    }
}
