//! Where two trials of the same task stop doing the same thing: the first
//! tool call whose name or arguments differ; for a replay, whose answers
//! are the original's, the first whose result differs.

use serde::Serialize;
use tack_trace::schema::kind;

use crate::{SpanRow, TrialTrace};

/// The index (among each trial's tool calls, in order) of the first tool
/// call that differs between the two trials, or `None` when one trial's
/// calls are a prefix of the other's and both made the same number.
pub fn first_divergence(base: &TrialTrace, candidate: &TrialTrace) -> Option<usize> {
    let calls = |trace: &TrialTrace| -> Vec<(Option<String>, Option<String>)> {
        trace
            .spans
            .iter()
            .filter(|s| s.kind == kind::TOOL_CALL)
            .map(|s| (s.tool_name.clone(), s.tool_arguments.clone()))
            .collect()
    };
    let (b, c) = (calls(base), calls(candidate));
    match b.iter().zip(&c).position(|(x, y)| x != y) {
        Some(at) => Some(at),
        None if b.len() != c.len() => Some(b.len().min(c.len())),
        None => None,
    }
}

/// How a replayed trial (`tack replay`) came out against the trial it
/// replays: the model's answers are the recorded ones, so what can differ
/// is what the tools and checks did with them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayDifference {
    pub original_trial: String,
    pub original_outcome: String,
    pub replay_outcome: String,
    /// The first tool call whose result differs, if any does.
    pub first_different_call: Option<DifferentCall>,
}

/// A tool call of a replay whose result is not the recorded one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DifferentCall {
    /// Its place among the trial's tool calls, from 1.
    pub number: usize,
    pub tool: String,
    pub differs_in: Differs,
}

/// What of a tool call differs: the first of its status, exit code,
/// output and result (what the model was shown) that does, or the call
/// itself, made on one side only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Differs {
    Status,
    ExitCode,
    Stdout,
    Stderr,
    Result,
    OnlyInOriginal,
    OnlyInReplay,
}

impl std::fmt::Display for Differs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Differs::Status => "in its status",
            Differs::ExitCode => "in its exit code",
            Differs::Stdout => "in its stdout",
            Differs::Stderr => "in its stderr",
            Differs::Result => "in what the model was shown",
            Differs::OnlyInOriginal => "made by the original only",
            Differs::OnlyInReplay => "made by the replay only",
        })
    }
}

/// Compares a replay with the trial it replays, tool call by tool call.
pub fn replay_difference(original: &TrialTrace, replay: &TrialTrace) -> ReplayDifference {
    fn calls(trace: &TrialTrace) -> Vec<&SpanRow> {
        trace
            .spans
            .iter()
            .filter(|s| s.kind == kind::TOOL_CALL)
            .collect()
    }
    let (before, now) = (calls(original), calls(replay));
    let mut first_different_call = before.iter().zip(&now).enumerate().find_map(|(i, (a, b))| {
        result_difference(a, b).map(|differs_in| DifferentCall {
            number: i + 1,
            tool: b.tool_name.clone().unwrap_or_default(),
            differs_in,
        })
    });
    // A replay that ran out of recorded answers, or stopped early, made
    // fewer (or more) calls: the first one only one side made differs.
    if first_different_call.is_none() && before.len() != now.len() {
        let longer = if before.len() > now.len() {
            &before
        } else {
            &now
        };
        let at = before.len().min(now.len());
        first_different_call = Some(DifferentCall {
            number: at + 1,
            tool: longer[at].tool_name.clone().unwrap_or_default(),
            differs_in: if now.len() < before.len() {
                Differs::OnlyInOriginal
            } else {
                Differs::OnlyInReplay
            },
        });
    }
    ReplayDifference {
        original_trial: original.trial.trial_id.clone(),
        original_outcome: original.trial.outcome.clone(),
        replay_outcome: replay.trial.outcome.clone(),
        first_different_call,
    }
}

fn result_difference(a: &SpanRow, b: &SpanRow) -> Option<Differs> {
    if a.status != b.status {
        Some(Differs::Status)
    } else if a.exit_code != b.exit_code {
        Some(Differs::ExitCode)
    } else if a.stdout != b.stdout {
        Some(Differs::Stdout)
    } else if a.stderr != b.stderr {
        Some(Differs::Stderr)
    } else if a.tool_result != b.tool_result {
        Some(Differs::Result)
    } else {
        None
    }
}
