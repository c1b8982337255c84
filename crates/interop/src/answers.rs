//! Which model call produced which assistant message. The trace keeps them
//! apart: a model-call span (`seq` when it was made) and the conversation
//! (each message with the `seq` of the event that added it). A call's answer
//! is the first assistant message added after it; a failed attempt answers
//! nothing, and each message is one call's answer.

use std::collections::HashMap;

use tack_analysis::{MessageRow, SpanRow};
use tack_trace::schema::kind;

/// For each assistant message (by position in `messages`), the successful
/// model call that produced it, if the trace has one.
pub(crate) fn answered_by<'a>(
    spans: &'a [SpanRow],
    messages: &[MessageRow],
) -> HashMap<usize, &'a SpanRow> {
    let mut calls: Vec<&SpanRow> = spans
        .iter()
        .filter(|span| span.kind == kind::MODEL_CALL && span.status == "ok")
        .collect();
    calls.sort_by_key(|span| span.seq);
    let mut pairs = HashMap::new();
    let mut next = 0;
    for (at, message) in messages.iter().enumerate() {
        if message.role != "assistant" {
            continue;
        }
        // The last call made before this message and after the previous answer.
        let mut found = None;
        while next < calls.len() && calls[next].seq < message.seq {
            found = Some(calls[next]);
            next += 1;
        }
        if let Some(call) = found {
            pairs.insert(at, call);
        }
    }
    pairs
}
