//! One agent run's events as they happen, for the terminal: the short
//! account `tack exec` gives on stderr and the conversation `tack chat`
//! shows.

use tack_protocol::{
    Event, Role, RunTotals, SpanStatus, StopReason, TrialOutcome, count, printable,
};

/// `tack exec`'s line for an event: tool calls (arguments on one line, cut
/// at 100 characters), approvals and checks; `None` for the rest. What the
/// agent wrote is shown, never obeyed ([`printable`]).
pub fn exec_event(event: &Event) -> Option<String> {
    exec_line(event).map(|line| printable(&line).into_owned())
}

fn exec_line(event: &Event) -> Option<String> {
    match event {
        Event::ToolCall(call) => Some(format!(
            "step {:>2}  {} {}{}",
            call.step,
            call.tool_name,
            shorten(&call.arguments, 100),
            call.error_kind
                .map(|k| format!("  [{k}]"))
                .unwrap_or_default()
        )),
        Event::Approval(a) => Some(format!(
            "         approval {} by {}",
            if a.approved { "granted" } else { "denied" },
            a.approver
        )),
        Event::Check(c) => Some(format!(
            "check    {} {}",
            c.command,
            if c.passed { "passed" } else { "FAILED" }
        )),
        _ => None,
    }
}

/// How a `tack exec` run ended, and what it took.
pub fn exec_outcome(outcome: TrialOutcome, stop: StopReason, totals: &RunTotals) -> String {
    let outcome = match outcome {
        TrialOutcome::Unverified => "completed, not verified (no --check)".to_string(),
        outcome => format!("{outcome} ({stop})"),
    };
    format!(
        "{outcome}, {}, {}, {}",
        count(totals.steps, "step"),
        count(totals.tool_calls, "tool call"),
        count(totals.usage.total(), "token")
    )
}

/// `tack chat`'s line for an event: what the agent says, each tool call
/// with the first line of its result (`·` done, `!` failed), refusals;
/// `None` for the rest. What the agent wrote is shown, never obeyed.
pub fn chat_event(event: &Event) -> Option<String> {
    chat_line(event).map(|line| printable(&line).into_owned())
}

fn chat_line(event: &Event) -> Option<String> {
    match event {
        Event::Message { message, .. }
            if message.role == Role::Assistant && !message.content.trim().is_empty() =>
        {
            Some(message.content.trim_end().to_string())
        }
        Event::ToolCall(call) => {
            let first = call.result.lines().next().unwrap_or_default();
            let mark = if call.status == SpanStatus::Ok {
                "·"
            } else {
                "!"
            };
            Some(format!(
                "  {mark} {} {}  → {first}",
                call.tool_name, call.arguments
            ))
        }
        Event::Approval(approval) if !approval.approved => {
            Some(format!("  (denied: {})", approval.tool_name))
        }
        _ => None,
    }
}

/// `text` on one line, cut at `max` characters with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let cut: String = one_line.chars().take(max).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_arguments_are_cut_on_one_line() {
        assert_eq!(shorten("a\nb", 10), "a b");
        assert_eq!(shorten(&"x".repeat(12), 10), format!("{}…", "x".repeat(10)));
    }

    #[test]
    fn an_unverified_run_says_so() {
        let totals = RunTotals::default();
        let text = exec_outcome(TrialOutcome::Unverified, StopReason::Completed, &totals);
        assert_eq!(
            text,
            "completed, not verified (no --check), 0 steps, 0 tool calls, 0 tokens"
        );
        let text = exec_outcome(TrialOutcome::Limit, StopReason::StepLimit, &totals);
        assert!(text.starts_with("limit (step_limit), "), "{text}");
    }
}
