//! The harness: the agent loop that calls the model, runs the tools it asks
//! for through a defensive dispatcher, shows it the results, and decides when
//! to stop. Every message, model call and tool call goes to an event sink in
//! order.

mod dispatch;
mod recorder;
pub mod tools;
mod view;

use std::time::Instant;

use tack_model::{Model, ModelRequest};
use tack_protocol::{
    EventSink, FinishReason, HarnessConfig, Message, ModelCallRecord, SpanStatus, StopReason,
    ToolCall, ToolCallRecord, ToolErrorKind, Usage,
};

pub use dispatch::{Dispatcher, UnknownToolName};
pub use recorder::now_ms;
pub use tools::{Tool, ToolContext, ToolError, ToolOutput};
pub use view::render as render_result;

use recorder::Recorder;

/// What the loop came to.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    pub stop_reason: StopReason,
    /// Model calls made.
    pub steps: u32,
    pub usage: Usage,
    pub tool_calls: u32,
    pub tool_errors: u32,
    /// The model's last words, when it completed.
    pub final_message: Option<String>,
    /// What went wrong, for model and harness errors.
    pub error: Option<String>,
    /// The last span id used; later spans (checks) continue after it.
    pub spans_used: u32,
}

/// Runs the agent on `instruction` until it completes or a limit stops it.
pub async fn run_agent(
    config: &HarnessConfig,
    model: &mut dyn Model,
    dispatcher: &Dispatcher,
    instruction: &str,
    sink: &mut dyn EventSink,
) -> AgentRun {
    let mut state = LoopState::new(sink);
    let stop = state.run(config, model, dispatcher, instruction).await;
    state.finish(stop)
}

struct LoopState<'s> {
    recorder: Recorder<'s>,
    messages: Vec<Message>,
    steps: u32,
    usage: Usage,
    tool_calls: u32,
    tool_errors: u32,
    final_message: Option<String>,
    error: Option<String>,
}

impl<'s> LoopState<'s> {
    fn new(sink: &'s mut dyn EventSink) -> Self {
        LoopState {
            recorder: Recorder::new(sink),
            messages: Vec::new(),
            steps: 0,
            usage: Usage::default(),
            tool_calls: 0,
            tool_errors: 0,
            final_message: None,
            error: None,
        }
    }

    /// The two nested loops: model turns, and within each the tool calls it
    /// asked for.
    async fn run(
        &mut self,
        config: &HarnessConfig,
        model: &mut dyn Model,
        dispatcher: &Dispatcher,
        instruction: &str,
    ) -> StopReason {
        let tools = dispatcher.specs();
        for message in [
            Message::system(&config.system_prompt),
            Message::user(instruction),
        ] {
            if let Err(stop) = self.push_message(message) {
                return stop;
            }
        }
        loop {
            if self.steps >= config.max_steps {
                return StopReason::StepLimit;
            }
            self.steps += 1;
            let (message, finish) = match self.call_model(model, &tools).await {
                Ok(answer) => answer,
                Err(stop) => return stop,
            };
            let calls = message.tool_calls.clone();
            let content = message.content.clone();
            let model_span = self.recorder.last_span_id();
            if let Err(stop) = self.push_message(message) {
                return stop;
            }
            if calls.is_empty() {
                self.final_message = Some(content);
                return StopReason::Completed;
            }
            let cut_off = finish == FinishReason::Length;
            for call in &calls {
                if let Err(stop) = self
                    .run_tool(config, dispatcher, call, cut_off, model_span)
                    .await
                {
                    return stop;
                }
            }
        }
    }

    async fn call_model(
        &mut self,
        model: &mut dyn Model,
        tools: &[tack_protocol::ToolSpec],
    ) -> Result<(Message, FinishReason), StopReason> {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let request = ModelRequest {
            messages: &self.messages,
            tools,
        };
        let answer = model.complete(request).await;
        let mut record = ModelCallRecord {
            span_id: self.recorder.next_span_id(),
            step: self.steps,
            provider: model.provider().to_string(),
            request_model: model.model_name().to_string(),
            response_model: String::new(),
            started_at_ms,
            duration_ms: clock.elapsed().as_millis() as u64,
            finish_reason: None,
            usage: Usage::default(),
            cost_usd: None,
            messages_from: 0,
            messages_to: self.messages.len() as u32,
            attempt: 1,
            status: SpanStatus::Ok,
            error: None,
        };
        match answer {
            Ok(response) => {
                record.response_model = response.response_model;
                record.finish_reason = Some(response.finish_reason.as_str().to_string());
                record.usage = response.usage;
                self.usage += response.usage;
                self.recorder.model_call(record)?;
                Ok((response.message, response.finish_reason))
            }
            Err(error) => {
                record.status = SpanStatus::Error;
                record.error = Some(error.to_string());
                self.error = Some(error.to_string());
                self.recorder.model_call(record)?;
                Err(StopReason::ModelError)
            }
        }
    }

    async fn run_tool(
        &mut self,
        config: &HarnessConfig,
        dispatcher: &Dispatcher,
        call: &ToolCall,
        cut_off: bool,
        parent_span_id: u32,
    ) -> Result<(), StopReason> {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let result = dispatcher.dispatch(call, cut_off).await;
        let shown = view::render(config.tool_results, &result);
        self.tool_calls += 1;
        let mut record = ToolCallRecord {
            span_id: self.recorder.next_span_id(),
            parent_span_id,
            step: self.steps,
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            result: shown.clone(),
            exit_code: None,
            stdout: None,
            stderr: None,
            truncated: false,
            started_at_ms,
            duration_ms: clock.elapsed().as_millis() as u64,
            status: SpanStatus::Ok,
            error_kind: None,
        };
        match result {
            Ok(ToolOutput::Command(output)) => {
                record.truncated = output.truncated();
                record.exit_code = output.exit_code;
                if output.timed_out {
                    record.status = SpanStatus::Error;
                    record.error_kind = Some(ToolErrorKind::Timeout);
                }
                record.stdout = Some(output.stdout);
                record.stderr = Some(output.stderr);
            }
            Ok(ToolOutput::Text { truncated, .. }) => record.truncated = truncated,
            Err(error) => {
                record.status = SpanStatus::Error;
                record.error_kind = Some(error.kind);
            }
        }
        if record.status == SpanStatus::Error {
            self.tool_errors += 1;
        }
        self.recorder.tool_call(record)?;
        self.push_message(Message::tool_result(&call.id, shown))
    }

    fn push_message(&mut self, message: Message) -> Result<(), StopReason> {
        let index = self.messages.len() as u32;
        self.recorder.message(index, &message)?;
        self.messages.push(message);
        Ok(())
    }

    fn finish(self, stop: StopReason) -> AgentRun {
        let error = self.error.or_else(|| self.recorder.failure());
        AgentRun {
            stop_reason: stop,
            steps: self.steps,
            usage: self.usage,
            tool_calls: self.tool_calls,
            tool_errors: self.tool_errors,
            final_message: self.final_message,
            error,
            spans_used: self.recorder.last_span_id(),
        }
    }
}
