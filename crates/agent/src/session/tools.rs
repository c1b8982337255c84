//! Running the tools a turn asks for: each call is prepared, cleared by
//! the gate (and the approver), run, recorded as a span, and its result
//! shown to the model (or a preview, when it is offloaded).

use std::time::{Duration, Instant};

use tack_model::Model;
use tack_protocol::{
    ApprovalRecord, ApprovalRequestedRecord, Event, Message, SpanStatus, StopReason, ToolCall,
    ToolCallRecord, ToolErrorKind, tool_names,
};

use super::Session;
use crate::gate::Clearance;
use crate::offload;
use crate::tools::{ToolError, ToolOutput};
use crate::{ApprovalRequest, PreparedCall, view};
use tack_protocol::time::now_ms;

impl Session<'_> {
    /// Runs a turn's calls in order; a run of consecutive `task` calls
    /// runs at once.
    pub(super) async fn run_tools(
        &mut self,
        model: &mut dyn Model,
        calls: &[ToolCall],
        cut_off: bool,
        model_span: u32,
    ) -> Result<(), StopReason> {
        let subagents = self.subagents.is_some();
        let delegates = |call: &ToolCall| subagents && !cut_off && call.name == tool_names::TASK;
        let mut at = 0;
        while at < calls.len() {
            let tasks = calls[at..].iter().take_while(|c| delegates(c)).count();
            if tasks == 0 {
                self.run_tool(&calls[at], cut_off, model_span).await?;
                at += 1;
            } else {
                self.run_tasks(model, &calls[at..at + tasks], model_span)
                    .await?;
                at += tasks;
            }
        }
        Ok(())
    }

    pub(super) async fn run_tool(
        &mut self,
        call: &ToolCall,
        cut_off: bool,
        parent_span_id: u32,
    ) -> Result<(), StopReason> {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        // A call that cannot run (unknown tool, arguments that do not fit)
        // is refused before anyone is asked to approve it.
        let prepared = self.dispatcher.prepare(call, cut_off);
        let clearance = self
            .clear(call, &prepared, parent_span_id, started_at_ms)
            .await?;
        let result = match (&clearance.refusal, prepared) {
            (Some(message), _) => Err(ToolError::new(ToolErrorKind::Denied, message.clone())),
            (None, Err(error)) => Err(error),
            (None, Ok(prepared)) => {
                let left = self.time_left();
                self.dispatcher.run(prepared.within(left)).await
            }
        };
        let span_id = self.recorder.next_span_id();
        let timing = (started_at_ms, clock.elapsed());
        self.finish_tool(call, result, &clearance, span_id, parent_span_id, timing)
    }

    /// Asks the gate about a prepared call (and the approver, when the gate
    /// says ask), recording the approval.
    pub(super) async fn clear(
        &mut self,
        call: &ToolCall,
        prepared: &Result<PreparedCall, ToolError>,
        parent_span_id: u32,
        started_at_ms: i64,
    ) -> Result<Clearance, StopReason> {
        let (gatekeeper, step) = (self.gatekeeper, self.recorder.steps());
        let mut recorded = Ok(());
        let recorder = &mut self.recorder;
        let mut asking = |request: &ApprovalRequest| {
            let event = Event::ApprovalRequested(ApprovalRequestedRecord {
                step,
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
                rule: request.rule.clone(),
                part: request.part.clone(),
            });
            if recorded.is_ok() {
                recorded = recorder.record(event);
            }
        };
        let clearance = match prepared {
            Ok(prepared) => gatekeeper.clear(call, &prepared.access, &mut asking).await,
            Err(_) => Clearance::default(),
        };
        recorded?;
        if let Some((request, answer, wait_ms)) = &clearance.approval {
            let record = ApprovalRecord {
                span_id: self.recorder.next_span_id(),
                parent_span_id,
                step: self.recorder.steps(),
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
                rule: request.rule.clone(),
                part: request.part.clone(),
                approved: answer.approved,
                approver: answer.approver.clone(),
                reason: answer.reason.clone(),
                started_at_ms,
                wait_ms: *wait_ms,
            };
            self.recorder.record(Event::Approval(record))?;
        }
        Ok(clearance)
    }

    /// Records a call's span, counts it, and gives the model its result.
    pub(super) fn finish_tool(
        &mut self,
        call: &ToolCall,
        result: Result<ToolOutput, ToolError>,
        clearance: &Clearance,
        span_id: u32,
        parent_span_id: u32,
        (started_at_ms, duration): (i64, Duration),
    ) -> Result<(), StopReason> {
        let shown = view::render(self.config.tool_results, &result);
        let mut record = self.tool_record(call, &result, clearance, &shown, parent_span_id);
        record.span_id = span_id;
        record.started_at_ms = started_at_ms;
        record.duration_ms = duration.as_millis() as u64;
        self.recorder.tool_call(record)?;
        let shown = self.offloaded(call, shown);
        self.push_message(Message::tool_result(&call.id, shown))
    }

    /// What the model reads of a result: the result, or past the strategy's
    /// `offload_results_over`, a preview naming the file that holds it. The
    /// tool span keeps the whole result either way.
    /// A read of a saved result is shown as read: the model asked for it.
    fn offloaded(&self, call: &ToolCall, shown: String) -> String {
        let (Some(limit), Some(dir)) = (
            self.config.context.offload_results_over,
            self.dispatcher.results_dir(),
        ) else {
            return shown;
        };
        if shown.len() as u64 <= limit || offload::reads_saved_result(call, dir) {
            return shown;
        }
        match offload::offload(dir, &call.id, &shown) {
            Ok(preview) => preview,
            Err(error) => format!(
                "[this result could not be saved to a file ({error}), so it is shown whole]\n{shown}"
            ),
        }
    }

    /// The span of a call, but for its id and timing.
    fn tool_record(
        &self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolError>,
        clearance: &Clearance,
        shown: &str,
        parent_span_id: u32,
    ) -> ToolCallRecord {
        let decision = clearance.decision.as_ref();
        let mut record = ToolCallRecord {
            span_id: 0,
            parent_span_id,
            step: self.recorder.steps(),
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            result: shown.to_string(),
            exit_code: None,
            stdout: None,
            stderr: None,
            truncated: false,
            started_at_ms: 0,
            duration_ms: 0,
            status: SpanStatus::Ok,
            error_kind: None,
            permission: decision.map(|d| d.verdict.as_str().to_string()),
            permission_rule: decision.map(|d| d.rule.clone()),
            permission_part: decision.map(|d| d.part.clone()),
            sandbox_profile: None,
            sandbox_denials: Vec::new(),
            mcp_server: self.dispatcher.server_of(&call.name).map(str::to_string),
        };
        match result {
            Ok(ToolOutput::Command(output)) => {
                record.truncated = output.truncated();
                record.exit_code = output.exit_code;
                if output.timed_out {
                    record.status = SpanStatus::Error;
                    record.error_kind = Some(ToolErrorKind::Timeout);
                }
                record.stdout = Some(output.stdout.clone());
                record.stderr = Some(output.stderr.clone());
                record.sandbox_profile = Some(output.profile.as_str().to_string());
                record.sandbox_denials = output.denials.clone();
            }
            // The file tools enforce the profile themselves (the same walls
            // as for `bash`), so their spans name it too.
            Ok(ToolOutput::Text { truncated, .. }) => {
                record.truncated = *truncated;
                record.sandbox_profile = Some(self.config.sandbox.as_str().to_string());
            }
            Err(error) => {
                record.status = SpanStatus::Error;
                record.error_kind = Some(error.kind);
                if error.kind == ToolErrorKind::SandboxDenied {
                    record.sandbox_profile = Some(self.config.sandbox.as_str().to_string());
                    record.sandbox_denials = vec![error.message.clone()];
                }
            }
        }
        record
    }
}
