//! Subagents: a `task` call starts a child session with a fresh context,
//! its own tools (read-only by default, and confined read-only whatever
//! they are) and its own limits, and hands back only its final answer.
//! A child records into a buffer of its own, so several can run at once;
//! the parent then records the child's events as spans beneath the `task`
//! call (see `Session::adopt`).

use std::pin::Pin;
use std::time::{Duration, Instant};

use tack_model::Model;
use tack_protocol::{Event, HarnessConfig, StopReason, ToolErrorKind, VecSink};

use crate::tools::{ToolError, ToolOutput};
use crate::{AgentRun, Dispatcher, DispatcherError, Gatekeeper, Pricer, Session, ToolContext};
use tack_protocol::time::now_ms;

/// What every child of one harness runs with.
pub struct Subagents {
    config: HarnessConfig,
    dispatcher: Dispatcher,
    max_concurrent: usize,
}

impl std::fmt::Debug for Subagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subagents")
            .field("dispatcher", &self.dispatcher)
            .field("max_steps", &self.config.max_steps)
            .finish_non_exhaustive()
    }
}

/// One child's run: its events (span ids and message indices of its own),
/// what it came to, and when it ran.
#[derive(Debug)]
pub(crate) struct ChildRun {
    pub events: Vec<Event>,
    pub run: AgentRun,
    pub started_at_ms: i64,
    pub duration: Duration,
}

impl ChildRun {
    /// What the parent reads: the child's final answer, or why there is
    /// none.
    pub fn answer(&self) -> Result<ToolOutput, ToolError> {
        match (&self.run.stop_reason, &self.run.final_message) {
            (StopReason::Completed, Some(text)) => Ok(ToolOutput::Text {
                text: text.clone(),
                truncated: false,
            }),
            (stop, _) => {
                let why = self
                    .run
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                let kind = if *stop == StopReason::Completed {
                    ToolErrorKind::ExecutionFailed
                } else {
                    ToolErrorKind::Timeout
                };
                Err(ToolError::new(
                    kind,
                    format!(
                        "the subagent stopped ({stop}) before it answered{why}. Give it a narrower task, or do the work yourself."
                    ),
                ))
            }
        }
    }
}

impl Subagents {
    /// The children of a parent with `parent`'s configuration; `ctx` is the
    /// parent's tool context, whose confinement is made read-only here.
    pub fn new(parent: &HarnessConfig, ctx: ToolContext) -> Result<Subagents, DispatcherError> {
        let sub = &parent.subagents;
        let config = HarnessConfig {
            system_prompt: sub.system_prompt.clone(),
            tools: sub.tools.clone(),
            max_steps: sub.max_steps,
            max_tokens: sub.max_tokens,
            // The parent's cost limit counts the children's spend.
            max_cost_usd: None,
            feedback_rounds: 0,
            agents_md: false,
            subagents: Default::default(),
            ..parent.clone()
        };
        let confinement = (*ctx.confinement)
            .clone()
            .exposing_read_only(&ctx.workspace);
        let ctx = ToolContext {
            confinement: std::sync::Arc::new(confinement),
            session: None,
            // A child's file tools hold the root open under its own
            // confinement.
            held_workspace: Default::default(),
            ..ctx
        };
        let dispatcher = Dispatcher::builtin(&config.tools, ctx)?;
        Ok(Subagents {
            config,
            dispatcher,
            max_concurrent: sub.max_concurrent.max(1),
        })
    }

    /// `task` calls of one turn that run at once.
    pub fn max_concurrent(&self) -> usize {
        self.max_concurrent
    }

    /// Runs one child on `prompt` until it answers, a limit of its own
    /// stops it, or `time_left` (the parent's) runs out. Boxed as a `dyn`
    /// future: a child session is a session, and its future would
    /// otherwise contain itself.
    pub(crate) fn run<'s>(
        &'s self,
        mut model: Box<dyn Model>,
        gatekeeper: &'s Gatekeeper,
        pricer: Option<Pricer>,
        prompt: String,
        time_left: Option<Duration>,
    ) -> Pin<Box<dyn Future<Output = ChildRun> + Send + 's>> {
        Box::pin(async move {
            let started_at_ms = now_ms();
            let clock = Instant::now();
            let mut sink = VecSink::default();
            let run = {
                let mut session =
                    Session::new(&self.config, &self.dispatcher, gatekeeper, &mut sink)
                        .with_pricer(pricer);
                let running = session.run(model.as_mut(), &prompt);
                let stopped = match time_left {
                    Some(left) => tokio::time::timeout(left, running).await.ok(),
                    None => Some(running.await),
                };
                let mut run = session.outcome();
                if stopped.is_none() {
                    run.stop_reason = StopReason::TimeLimit;
                    run.error = Some("the agent's time ran out while the subagent worked".into());
                }
                run
            };
            ChildRun {
                events: sink.events,
                run,
                started_at_ms,
                duration: clock.elapsed(),
            }
        })
    }
}
