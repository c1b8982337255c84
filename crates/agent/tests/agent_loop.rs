//! The loop on real files with the built-in models: event order, stop
//! reasons, and a sink that fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::time::Duration;

use tack_agent::{AgentRun, Dispatcher, ToolContext, run_agent};
use tack_model::{Model, OracleModel, SimAgent, SimParams, TaskBrief};
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
    assert_eq!(run.steps, 2);
    assert_eq!(run.tool_calls, 1);
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
    let ranges: Vec<(u32, u32)> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(m) => Some((m.messages_from, m.messages_to)),
            _ => None,
        })
        .collect();
    assert_eq!(ranges, [(0, 2), (0, 4)]);
    assert!(run.usage.input_tokens > 0 && run.usage.output_tokens > 0);
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
    assert_eq!(run.steps, 2);
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
        run.tool_calls >= 4,
        "explore, read, test, edit, test: {}",
        run.tool_calls
    );
}

struct BrokenSink {
    accepted: usize,
}

impl EventSink for BrokenSink {
    fn record(&mut self, _: Event) -> Result<(), SinkError> {
        if self.accepted == 3 {
            return Err(SinkError("disk full".to_string()));
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
