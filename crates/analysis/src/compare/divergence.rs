//! Where two trials of the same task stop doing the same thing: the first
//! tool call whose name or arguments differ.

use crate::TrialTrace;
use tack_trace::schema::kind;

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
