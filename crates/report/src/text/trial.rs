//! One trial's trajectory for the terminal (`tack show`): a header with
//! its outcome and totals, then every model call, tool call, approval,
//! assistant message and check in recording order.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tack_analysis::{MessageRow, SpanRow, TrialTrace};
use tack_protocol::{SpanStatus, TrialOutcome, count, printable};
use tack_trace::schema::{col, kind};

/// The trial's header and timeline. `simulated`: its model is built in;
/// `denials`: the sandbox's denials by tool call span id.
pub fn trial(
    run_id: &str,
    trace: &TrialTrace,
    simulated: bool,
    denials: &BTreeMap<u32, Vec<String>>,
    style: TrialStyle,
) -> String {
    let mut out = header(run_id, trace, simulated, denials, style);
    out.push_str(&timeline(trace, denials, style));
    out
}

/// The trial as one JSON object (`tack show --json`): its row, spans (each
/// with its sandbox denials) and messages, and the run id.
pub fn trial_json(
    run_id: &str,
    trace: &TrialTrace,
    denials: &BTreeMap<u32, Vec<String>>,
) -> serde_json::Result<serde_json::Value> {
    let mut json = serde_json::to_value(trace)?;
    if let Some(spans) = json.get_mut("spans").and_then(|s| s.as_array_mut()) {
        for span in spans {
            let id = span.get("span_id").and_then(|v| v.as_u64());
            let found = id.and_then(|id| denials.get(&u32::try_from(id).ok()?));
            if let Some(object) = span.as_object_mut() {
                object.insert(
                    "sandbox_denials".to_string(),
                    serde_json::to_value(found.cloned().unwrap_or_default())?,
                );
            }
        }
    }
    if let Some(object) = json.as_object_mut() {
        object.insert("run_id".to_string(), run_id.into());
    }
    Ok(json)
}

/// How to print: ANSI colours or not, whole texts or shortened.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrialStyle {
    /// ANSI colours (for a terminal).
    pub color: bool,
    /// Tool results, assistant text and check output whole, not shortened.
    pub full: bool,
}

impl TrialStyle {
    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
    fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
    fn red(self, text: &str) -> String {
        self.paint("31", text)
    }
    fn green(self, text: &str) -> String {
        self.paint("32", text)
    }
    fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
    fn blue(self, text: &str) -> String {
        self.paint("34", text)
    }
}

fn header(
    run_id: &str,
    trace: &TrialTrace,
    simulated: bool,
    denials: &BTreeMap<u32, Vec<String>>,
    s: TrialStyle,
) -> String {
    let t = &trace.trial;
    let mut out = String::new();
    let outcome = if t.outcome == TrialOutcome::Passed.as_str() {
        s.green(&t.outcome)
    } else {
        s.red(&t.outcome)
    };
    let model = if simulated {
        format!(
            "{} (simulated: a built-in model, not an LLM)",
            printable(&t.model)
        )
    } else {
        printable(&t.model).into_owned()
    };
    let cost = cost_text(trace);
    let checks = match t.checks_passed {
        Some(true) => s.green("passed"),
        Some(false) => s.red("failed"),
        None => "did not run".to_string(),
    };
    let _ = writeln!(
        out,
        "{} {}",
        s.bold("trial"),
        s.bold(&printable(&t.trial_id))
    );
    let rows = [
        ("run", printable(run_id).into_owned()),
        ("variant", printable(&t.variant).into_owned()),
        (
            "task",
            format!("{} (trial {})", printable(&t.task), t.trial_index),
        ),
        ("model", model),
        (
            "outcome",
            format!("{outcome}, stop reason {}", printable(&t.stop_reason)),
        ),
        ("checks", checks),
        ("steps", effort(t, denials.len())),
        (
            "tokens",
            format!(
                "{} (input {} · output {})",
                t.total_tokens, t.input_tokens, t.output_tokens
            ),
        ),
        ("cost", cost),
        ("duration", seconds(t.duration_ms)),
    ];
    for (label, value) in rows {
        let _ = writeln!(out, "  {:<9} {value}", s.dim(label));
    }
    if t.tampered {
        let _ = writeln!(
            out,
            "  {}",
            s.red("tampered: the agent changed files the checks depend on")
        );
    }
    if let Some(error) = &t.error {
        // A multi-line error (a build log's tail) keeps the column.
        let error = printable(error).replace('\n', "\n            ");
        let _ = writeln!(out, "  {:<9} {}", s.dim("error"), s.red(&error));
    }
    out
}

/// Steps and tool calls, then only the counts that are not zero (retries,
/// interventions, denials, feedback rounds): a line of zeros said nothing
/// and ran past 120 columns.
fn effort(t: &tack_analysis::TrialRow, sandbox_denials: usize) -> String {
    let mut parts = vec![
        t.counts.get(col::STEPS).to_string(),
        format!(
            "{} ({})",
            count(t.counts.get(col::TOOL_CALLS), "tool call"),
            count(t.counts.get(col::TOOL_ERRORS), "error")
        ),
    ];
    let retries = t.counts.get(col::RETRIES);
    let interventions = t.counts.get(col::INTERVENTIONS);
    let rounds = t.counts.get(col::FEEDBACK_ROUNDS);
    if retries > 0 {
        parts.push(count(retries, "retry"));
    }
    if interventions > 0 {
        parts.push(count(interventions, "intervention"));
    }
    if t.denied_calls > 0 {
        parts.push(format!("{} denied", t.denied_calls));
    }
    if sandbox_denials > 0 {
        parts.push(format!("{sandbox_denials} with sandbox denials"));
    }
    if rounds > 0 {
        parts.push(count(rounds, "feedback round"));
    }
    parts.join(" · ")
}

/// The trial's dollars; a lower bound, or unknown, when some answered model
/// call had no price (never 0 for those).
fn cost_text(trace: &TrialTrace) -> String {
    let unpriced = trace
        .spans
        .iter()
        .filter(|sp| {
            sp.kind == kind::MODEL_CALL
                && sp.status == SpanStatus::Ok.as_str()
                && sp.cost_usd.is_none()
        })
        .count();
    match (trace.trial.cost_usd, unpriced) {
        (Some(usd), 0) => tack_analysis::cost::format_usd(usd),
        (Some(usd), n) => format!(
            "≥ {} ({n} model calls of unknown cost)",
            tack_analysis::cost::format_usd(usd)
        ),
        (None, 0) => "unknown".to_string(),
        (None, n) => format!("unknown ({n} model calls, none priced)"),
    }
}

/// Spans and assistant messages, merged in recording order.
fn timeline(trace: &TrialTrace, denials: &BTreeMap<u32, Vec<String>>, s: TrialStyle) -> String {
    enum Item<'a> {
        Span(&'a SpanRow),
        Said(&'a MessageRow),
    }
    let mut items: Vec<(u64, Item<'_>)> = trace
        .spans
        .iter()
        .map(|sp| (sp.seq, Item::Span(sp)))
        .collect();
    items.extend(
        trace
            .messages
            .iter()
            .filter(|m| m.role == "assistant" && !m.content.trim().is_empty())
            .map(|m| (m.seq, Item::Said(m))),
    );
    items.sort_by_key(|(seq, _)| *seq);
    let mut out = String::from("\n");
    for (_, item) in items {
        match item {
            Item::Said(message) => {
                let text = if s.full {
                    printable(message.content.trim()).into_owned()
                } else {
                    one_line(&message.content, 160)
                };
                let _ = writeln!(out, "      {} {}", s.dim("says:"), text);
            }
            Item::Span(span) => out.push_str(&span_lines(span, denials, s)),
        }
    }
    if trace.spans.is_empty() {
        out.push_str("(no spans: the trial ended before its first model call)\n");
    }
    out
}

fn span_lines(span: &SpanRow, denials: &BTreeMap<u32, Vec<String>>, s: TrialStyle) -> String {
    match span.kind.as_str() {
        kind::MODEL_CALL => model_call(span, s),
        kind::TOOL_CALL => tool_call(span, denials.get(&span.span_id), s),
        kind::APPROVAL => approval(span, s),
        kind::CHECK => check(span, s),
        other => format!(
            "{} {} {}\n",
            s.dim("?"),
            printable(other),
            printable(&span.name)
        ),
    }
}

fn step(span: &SpanRow) -> String {
    span.step
        .map_or_else(|| "     ".to_string(), |n| format!("{n:>4} "))
}

fn model_call(span: &SpanRow, s: TrialStyle) -> String {
    let mut parts = vec![format!(
        "in {} · out {}",
        span.input_tokens.unwrap_or(0),
        span.output_tokens.unwrap_or(0)
    )];
    if let Some(cached) = span.cache_read_tokens.filter(|n| *n > 0) {
        parts.push(format!("cached {cached}"));
    }
    if let Some(reasoning) = span.reasoning_tokens.filter(|n| *n > 0) {
        parts.push(format!("reasoning {reasoning}"));
    }
    if let Some(finish) = &span.finish_reason {
        parts.push(format!("finish {}", printable(finish)));
    }
    if let Some(usd) = span.cost_usd {
        parts.push(tack_analysis::cost::format_usd(usd));
    }
    if let Some(attempt) = span.attempt.filter(|a| *a > 1) {
        let wait = span.retry_wait_ms.unwrap_or(0);
        parts.push(s.yellow(&format!("attempt {attempt} after {}", seconds(wait))));
    }
    if let Some(fault) = &span.fault {
        parts.push(s.yellow(&format!("injected fault: {}", printable(fault))));
    }
    let mut out = format!(
        "{}{} {}\n",
        s.dim(&step(span)),
        s.blue("model call"),
        parts.join(" · ")
    );
    if let Some(error) = &span.error {
        let _ = writeln!(
            out,
            "      {}",
            s.red(&format!("error: {}", printable(error)))
        );
    }
    out
}

fn tool_call(span: &SpanRow, denials: Option<&Vec<String>>, s: TrialStyle) -> String {
    let name = printable(span.tool_name.as_deref().unwrap_or(&span.name));
    let arguments = span.tool_arguments.as_deref().unwrap_or("");
    let mut status = Vec::new();
    if let Some(code) = span.exit_code {
        let text = format!("exit {code}");
        status.push(if code == 0 { text } else { s.red(&text) });
    }
    if let Some(kind) = &span.error_kind {
        status.push(s.red(&format!("error {}", printable(kind))));
    }
    if span.truncated == Some(true) {
        status.push(s.yellow("output cut at the cap"));
    }
    // An `ask` has its approval span just before; only a refusal by a rule
    // needs its rule here.
    if span.permission.as_deref() == Some("deny") {
        let rule = span.permission_rule.as_deref().unwrap_or("");
        status.push(s.red(&format!("denied by rule {}", one_line(rule, 80))));
    }
    let status = if status.is_empty() {
        String::new()
    } else {
        format!(" → {}", status.join(" · "))
    };
    // In full, the arguments as the model wrote them: a failed
    // str_replace is about the very whitespace a one-line summary folds.
    let arguments = if s.full {
        printable(arguments).into_owned()
    } else {
        one_line(arguments, 120)
    };
    let mut out = format!(
        "{}{} {arguments}{status}\n",
        s.dim(&step(span)),
        s.bold(&name),
    );
    for denial in denials.into_iter().flatten() {
        let _ = writeln!(
            out,
            "      {} {}",
            s.red("sandbox denied:"),
            printable(denial)
        );
    }
    if let Some(result) = &span.tool_result {
        out.push_str(&block(result, 12, s));
    }
    out
}

fn approval(span: &SpanRow, s: TrialStyle) -> String {
    let name = printable(span.tool_name.as_deref().unwrap_or(&span.name));
    let approver = printable(span.approver.as_deref().unwrap_or("?"));
    let verdict = match span.approved {
        Some(true) => s.green(&format!("approved by {approver}")),
        Some(false) => s.red(&format!("denied by {approver}")),
        None => format!("undecided ({approver})"),
    };
    let part = span
        .permission_part
        .as_deref()
        .map(|part| format!(" `{}`", one_line(part, 80)))
        .unwrap_or_default();
    let mut out = format!(
        "{}{} {name}{part}: {verdict} after {}\n",
        s.dim(&step(span)),
        s.yellow("approval"),
        seconds(span.duration_ms),
    );
    if let Some(rule) = &span.permission_rule {
        let _ = writeln!(out, "      {} {}", s.dim("asked by:"), one_line(rule, 160));
    }
    if let Some(reason) = &span.error {
        let _ = writeln!(out, "      {} {}", s.dim("reason:"), one_line(reason, 160));
    }
    out
}

fn check(span: &SpanRow, s: TrialStyle) -> String {
    let verdict = match span.check_passed {
        Some(true) => s.green("PASS"),
        _ => s.red("FAIL"),
    };
    let command = span.check_command.as_deref().unwrap_or("");
    let exit = span
        .exit_code
        .map(|c| format!(" (exit {c})"))
        .unwrap_or_default();
    let mut out = format!(
        "      {} {} {verdict}{exit} {}\n",
        s.bold("check"),
        printable(&span.name),
        s.dim(&format!("$ {}", one_line(command, 100)))
    );
    if let Some(output) = &span.check_output {
        out.push_str(&tail(output, 10, s));
    }
    out
}

/// `text` indented, its first and last lines when longer than `max` lines.
fn block(text: &str, max: usize, s: TrialStyle) -> String {
    let text = printable(text);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let bar = s.dim("│");
    let mut out = String::new();
    if s.full || lines.len() <= max {
        for line in &lines {
            let _ = writeln!(out, "      {bar} {line}");
        }
        return out;
    }
    let head = max / 2;
    let tail_start = lines.len() - (max - head);
    for line in &lines[..head] {
        let _ = writeln!(out, "      {bar} {line}");
    }
    let hidden = tail_start - head;
    let _ = writeln!(
        out,
        "      {bar} {}",
        s.dim(&format!("… {hidden} more lines (--full shows all)"))
    );
    for line in &lines[tail_start..] {
        let _ = writeln!(out, "      {bar} {line}");
    }
    out
}

/// The last `max` lines of `text`, indented.
fn tail(text: &str, max: usize, s: TrialStyle) -> String {
    let text = printable(text);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let bar = s.dim("│");
    let start = if s.full {
        0
    } else {
        lines.len().saturating_sub(max)
    };
    let mut out = String::new();
    if start > 0 {
        let _ = writeln!(
            out,
            "      {bar} {}",
            s.dim(&format!("… {start} earlier lines (--full shows all)"))
        );
    }
    for line in &lines[start..] {
        let _ = writeln!(out, "      {bar} {line}");
    }
    out
}

/// `text` on one line, cut to `max` characters with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let flat = printable(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

fn seconds(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: TrialStyle = TrialStyle {
        color: false,
        full: false,
    };

    #[test]
    fn long_outputs_keep_their_head_and_tail_unless_full() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let shown = block(&text, 4, PLAIN);
        let lines: Vec<&str> = shown.lines().map(str::trim).collect();
        assert_eq!(
            lines,
            [
                "│ line 1",
                "│ line 2",
                "│ … 16 more lines (--full shows all)",
                "│ line 19",
                "│ line 20"
            ]
        );
        let full = TrialStyle {
            full: true,
            ..PLAIN
        };
        assert_eq!(block(&text, 4, full).lines().count(), 20);
        let last = tail(&text, 2, PLAIN);
        assert!(last.contains("… 18 earlier lines") && last.ends_with("│ line 20\n"));
    }

    #[test]
    fn colour_only_when_asked_and_texts_on_one_line() {
        assert_eq!(PLAIN.red("x"), "x");
        let color = TrialStyle {
            color: true,
            ..PLAIN
        };
        assert_eq!(color.red("x"), "\x1b[31mx\x1b[0m");
        assert_eq!(one_line("a\n  b   c", 80), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(
            (seconds(999), seconds(1500)),
            ("999 ms".into(), "1.5 s".into())
        );
    }
}
