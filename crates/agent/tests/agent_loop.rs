//! The loop on real files with the built-in models: event order, stop
//! reasons, and a sink that fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::time::Duration;

use tack_agent::{AgentRun, Dispatcher, ToolContext, run_agent};
use tack_model::{Model, OracleModel, SimAgent, TaskBrief};
use tack_protocol::SimParams;
use tack_protocol::{
    Edit, Event, EventSink, HarnessConfig, SinkError, Solution, StopReason, VecSink,
};

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("greet.sh"), "echo helo\n").unwrap();
    dir
}

fn brief() -> TaskBrief {
    TaskBrief {
        instruction: "greet.sh misspells hello; fix it".to_string(),
        solution: Solution {
            edits: vec![Edit {
                path: "greet.sh".to_string(),
                old: "helo".to_string(),
                new: "hello".to_string(),
            }],
            script: None,
            decoys: vec![],
            files_at: None,
        },
        test_command: Some("bash greet.sh | grep -qx hello".to_string()),
    }
}

/// Runs `model` on a fresh copy of the workspace; returns the run, the
/// events and the workspace.
async fn run_on_workspace(
    model: &mut dyn Model,
    config: &HarnessConfig,
    sink: &mut dyn EventSink,
) -> (AgentRun, tempfile::TempDir) {
    let dir = workspace();
    let ctx = ToolContext {
        workspace: dir.path().to_path_buf(),
        env: vec![],
        command_timeout: Duration::from_secs(10),
        output_limit: 4096,
        confinement: std::sync::Arc::new(tack_sandbox::Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    };
    let dispatcher = Dispatcher::builtin(&config.tools, ctx).unwrap();
    let run = run_agent(config, model, &dispatcher, "fix it", sink).await;
    (run, dir)
}

fn greeting(dir: &tempfile::TempDir) -> String {
    std::fs::read_to_string(dir.path().join("greet.sh")).unwrap()
}

#[tokio::test]
async fn the_oracle_completes_and_every_step_is_recorded_in_order() {
    let config = HarnessConfig::default();
    let mut model = OracleModel::new(brief());
    let mut sink = VecSink::default();
    let (run, dir) = run_on_workspace(&mut model, &config, &mut sink).await;

    assert_eq!(run.stop_reason, StopReason::Completed);
    assert_eq!(run.totals.steps, 2);
    assert_eq!(run.totals.tool_calls, 1);
    assert_eq!(greeting(&dir), "echo hello\n");
    let kinds: Vec<&str> = sink
        .events
        .iter()
        .map(|e| match e {
            Event::Message { .. } => "message",
            Event::ModelCall(_) => "model",
            Event::ToolCall(_) => "tool",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message", "message", "model", "message", "tool", "message", "model", "message"
        ]
    );
    // Each model call names the messages it was sent; they are recorded once.
    let sent: Vec<&[u32]> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(m) => Some(m.messages.as_slice()),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [&[0, 1][..], &[0, 1, 2, 3][..]]);
    assert!(run.totals.usage.input_tokens > 0 && run.totals.usage.output_tokens > 0);
}

#[tokio::test]
async fn a_step_limit_stops_the_loop_and_says_so() {
    let config = HarnessConfig {
        max_steps: 2,
        ..HarnessConfig::default()
    };
    let mut model = SimAgent::new(brief(), SimParams::default(), 1);
    let mut sink = VecSink::default();
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::StepLimit);
    assert_eq!(run.totals.steps, 2);
}

#[tokio::test]
async fn the_sim_agent_fixes_the_bug_through_the_tools() {
    let config = HarnessConfig::default();
    let params = SimParams {
        malformed_rate: 0.0,
        ..SimParams::default()
    };
    let mut model = SimAgent::new(brief(), params, 3);
    let mut sink = VecSink::default();
    let (run, dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::Completed);
    assert_eq!(greeting(&dir), "echo hello\n");
    assert!(
        run.totals.tool_calls >= 4,
        "explore, read, test, edit, test: {}",
        run.totals.tool_calls
    );
}

struct BrokenSink {
    accepted: usize,
}

impl EventSink for BrokenSink {
    fn record(&mut self, _: Event) -> Result<(), SinkError> {
        if self.accepted == 3 {
            return Err(SinkError::Io(std::io::Error::other("disk full")));
        }
        self.accepted += 1;
        Ok(())
    }
}

#[tokio::test]
async fn a_sink_that_cannot_write_stops_the_trial_as_a_harness_error() {
    let config = HarnessConfig::default();
    let mut model = OracleModel::new(brief());
    let mut sink = BrokenSink { accepted: 0 };
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::HarnessError);
    assert!(run.error.unwrap().contains("disk full"));
}

/// Fails with the given errors, in order, then answers without a tool call.
struct Flaky {
    failures: Vec<tack_model::ModelError>,
}

#[async_trait::async_trait]
impl Model for Flaky {
    fn provider(&self) -> &str {
        "test"
    }

    fn model_name(&self) -> &str {
        "flaky"
    }

    async fn complete(
        &mut self,
        _: tack_model::ModelRequest<'_>,
    ) -> Result<tack_model::ModelResponse, tack_model::ModelError> {
        if !self.failures.is_empty() {
            return Err(self.failures.remove(0));
        }
        Ok(tack_model::ModelResponse {
            message: tack_protocol::Message::assistant("done", vec![]),
            finish_reason: tack_protocol::FinishReason::Stop,
            usage: tack_protocol::Usage {
                input_tokens: 10,
                output_tokens: 1,
                ..Default::default()
            },
            response_model: "flaky-1".to_string(),
        })
    }
}

fn rate_limited(seconds: u64) -> tack_model::ModelError {
    tack_model::ModelError::Api {
        status: 429,
        message: "slow down".to_string(),
        retry_after: Some(Duration::from_secs(seconds)),
    }
}

fn attempts(sink: &VecSink) -> Vec<(u32, u64, bool)> {
    sink.events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(m) => Some((m.attempt, m.retry_wait_ms, m.error.is_none())),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn transient_failures_are_retried_honouring_retry_after() {
    let mut model = Flaky {
        failures: vec![
            rate_limited(7),
            tack_model::ModelError::Transport("connection reset".to_string()),
        ],
    };
    let mut sink = VecSink::default();
    let config = HarnessConfig::default();
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::Completed);
    assert_eq!(run.totals.retries, 2);
    assert_eq!(run.totals.steps, 1);
    let recorded = attempts(&sink);
    assert_eq!(recorded.len(), 3);
    assert_eq!(recorded[0], (1, 0, false));
    // Retry-After: exactly what the server asked for.
    assert_eq!(recorded[1], (2, 7000, false));
    // No Retry-After on the transport error: exponential backoff from 1 s at the third attempt, plus jitter.
    assert_eq!((recorded[2].0, recorded[2].2), (3, true));
    assert!((1000..=1500).contains(&recorded[2].1), "{:?}", recorded[2]);
}

#[tokio::test(start_paused = true)]
async fn a_permanent_failure_is_a_model_error_and_exhausted_retries_an_outage() {
    let bad_request = tack_model::ModelError::Api {
        status: 400,
        message: "bad".to_string(),
        retry_after: None,
    };
    let mut model = Flaky {
        failures: vec![bad_request],
    };
    let mut sink = VecSink::default();
    let (run, _dir) = run_on_workspace(&mut model, &HarnessConfig::default(), &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::ModelError);
    assert_eq!(attempts(&sink).len(), 1);
    assert!(run.error.unwrap().contains("400"));

    let mut model = Flaky {
        failures: (0..5).map(|_| rate_limited(1)).collect(),
    };
    let config = HarnessConfig {
        model_attempts: 3,
        ..HarnessConfig::default()
    };
    let mut sink = VecSink::default();
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    // Still rate limited after every retry: the provider's outage, which the
    // runner records as an infra_error and may run again.
    assert_eq!(run.stop_reason, StopReason::ProviderUnavailable);
    assert_eq!(
        tack_protocol::TrialOutcome::decide(run.stop_reason, None),
        tack_protocol::TrialOutcome::InfraError
    );
    assert!(
        run.error
            .unwrap()
            .contains("unavailable through 3 attempts")
    );
    assert_eq!((run.totals.retries, attempts(&sink).len()), (2, 3));
}

#[tokio::test]
async fn a_token_limit_stops_the_loop() {
    let config = HarnessConfig {
        max_tokens: Some(1),
        ..HarnessConfig::default()
    };
    let mut model = SimAgent::new(brief(), SimParams::default(), 1);
    let mut sink = VecSink::default();
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::TokenLimit);
    assert_eq!(run.totals.steps, 1);
}

/// Denies `bash`, asks for `str_replace`.
struct Strict;

impl tack_agent::PermissionGate for Strict {
    fn judge(&self, tool: &str, _: &[tack_protocol::ToolAccess]) -> tack_agent::GateDecision {
        let verdict = match tool {
            "bash" => tack_agent::GateVerdict::Deny,
            "str_replace" => tack_agent::GateVerdict::Ask,
            _ => tack_agent::GateVerdict::Allow,
        };
        tack_agent::GateDecision {
            verdict,
            rule: format!("rules[0] ({tool})"),
            part: tool.to_string(),
            reason: "test".to_string(),
            asking: vec![tool.to_string()],
        }
    }
}

#[tokio::test]
async fn gates_deny_and_ask_and_every_ask_is_an_intervention() {
    let dir = workspace();
    let config = HarnessConfig::default();
    let ctx = ToolContext {
        workspace: dir.path().to_path_buf(),
        env: vec![],
        command_timeout: Duration::from_secs(10),
        output_limit: 4096,
        confinement: std::sync::Arc::new(tack_sandbox::Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    };
    let dispatcher = Dispatcher::builtin(&config.tools, ctx).unwrap();
    let approver = tack_agent::RulesApprover::new(&["str_replace".to_string()]).unwrap();
    let gatekeeper =
        tack_agent::Gatekeeper::new(Some(Box::new(Strict)), vec![], Box::new(approver));
    let mut sink = VecSink::default();
    let mut model = OracleModel::new(brief());
    let mut session = tack_agent::Session::new(&config, &dispatcher, &gatekeeper, &mut sink);
    let stop = session.run(&mut model, "fix it").await;
    let run = session.outcome();
    assert_eq!(stop, StopReason::Completed);
    assert_eq!(run.totals.interventions, 1);
    assert_eq!(greeting(&dir), "echo hello\n");
    let approvals: Vec<_> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Approval(a) => Some((a.tool_name.clone(), a.approved, a.approver.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        approvals,
        [("str_replace".to_string(), true, "rules".to_string())]
    );
}

fn input_tokens(sink: &VecSink) -> Vec<u64> {
    sink.events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(call) if call.purpose.is_none() => Some(call.usage.input_tokens),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_simulated_agent_has_a_window_and_summarises_when_asked() {
    // How big its requests get on this task, without a window.
    let config = HarnessConfig::default();
    let mut model = SimAgent::new(brief(), SimParams::default(), 1);
    let mut sink = VecSink::default();
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::Completed);
    let sizes = input_tokens(&sink);
    let (first, largest) = (sizes[0], *sizes.iter().max().unwrap());
    assert!(largest > first + 150, "{sizes:?}");
    // A window only the largest request does not fit.
    let window = largest - 1;
    let params = SimParams {
        context_window: Some(window),
        ..SimParams::default()
    };

    let mut model = SimAgent::new(brief(), params, 1);
    let mut sink = VecSink::default();
    let (run, _dir) = run_on_workspace(&mut model, &config, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::ModelError);
    let error = run.error.unwrap();
    assert!(
        error.contains(&format!("maximum context length is {window} tokens")),
        "{error}"
    );

    // Compacting half way from the first request to the window.
    let threshold = first + (window - first) / 2;
    let compacting = HarnessConfig {
        context: tack_protocol::ContextConfig {
            context_window: Some(window),
            compact_at: Some(threshold as f64 / window as f64),
            keep_last_steps: Some(1),
            ..Default::default()
        },
        ..HarnessConfig::default()
    };
    let mut model = SimAgent::new(brief(), params, 1);
    let mut sink = VecSink::default();
    let (run, dir) = run_on_workspace(&mut model, &compacting, &mut sink).await;
    assert_eq!(run.stop_reason, StopReason::Completed, "{:?}", run.error);
    assert_eq!(greeting(&dir), "echo hello\n");
    let summaries: Vec<&str> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Message { message, .. }
                if message.content.contains("compacted the conversation") =>
            {
                Some(message.content.as_str())
            }
            _ => None,
        })
        .collect();
    assert!(!summaries.is_empty());
    assert!(
        summaries[0].contains("Task: greet.sh misspells hello"),
        "{}",
        summaries[0]
    );
    assert!(input_tokens(&sink).iter().all(|&n| n <= window));
}
