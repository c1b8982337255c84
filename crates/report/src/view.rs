//! What the index page shows, formatted: templates only lay out strings, so
//! every number format lives here, in one place, and is easy to test.

use serde::Serialize;
use std::collections::BTreeMap;
use tack_analysis::{FailedLimit, MatrixRow, RunAnalysis, TrialRow, VariantSummary};
use tack_protocol::{StopReason, TrialOutcome};
use tack_trace::schema::{Summary, TRIAL_COUNTS, col};

#[derive(Debug, Serialize)]
pub(crate) struct Header {
    pub suite: String,
    pub suite_path: String,
    pub suite_hash: String,
    pub run_id: String,
    pub status: String,
    pub started_at: String,
    pub finished_at: String,
    pub tack_version: String,
    pub seed: u64,
    pub trials_per_task: u32,
    pub host: String,
    pub command_line: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct Simulated {
    pub variant: String,
    pub model: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct Count {
    pub name: String,
    pub count: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct SummaryRow {
    pub variant: String,
    pub model: String,
    pub simulated: bool,
    pub trials: u64,
    pub passed: u64,
    /// Final infra errors, not in `trials`.
    pub infra_errors: u64,
    /// Final attempts cut off, not in `trials`.
    pub cancelled: u64,
    /// Attempts run again, counted nowhere else.
    pub retried_attempts: u64,
    /// Scored trials decided by a later attempt than their first.
    pub rerun_trials: u64,
    /// The success rate of the trials decided at their first attempt, when
    /// some were run again.
    pub rate_without_reruns: Option<String>,
    pub rate: String,
    pub ci: String,
    pub tokens_per_success: String,
    pub mean_tokens_successful: String,
    pub total_tokens: String,
    pub cost: String,
    /// The trials table's counts, as [`count_headings`] names them.
    pub counts: Vec<String>,
    pub denied_calls: u64,
    /// Trials that changed files the checks depend on; highlighted when > 0.
    pub tampered: u64,
    /// Model calls corrupted on purpose by the `chaos(...)` wrapper.
    pub injected_faults: u64,
    /// `injected_faults` per kind, in [`FAULT_KINDS`] order.
    pub faults: Vec<Count>,
    pub outcomes: Vec<Count>,
    pub stop_reasons: Vec<Count>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MatrixView {
    pub variants: Vec<String>,
    pub rows: Vec<MatrixRowView>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MatrixRowView {
    pub task: String,
    pub cells: Vec<MatrixCellView>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MatrixCellView {
    pub text: String,
    /// A CSS colour (no `/`: auto-escaping would mangle it).
    pub color: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct FailedRow {
    /// File name of the trial page under `trials/`. The template writes the
    /// `trials/` prefix itself: auto-escaping would turn a `/` in a value
    /// into `&#x2f;`.
    pub page: String,
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    /// Where the trial ran, when not on the host (`image`, `engine`).
    pub environment: Option<String>,
    pub outcome: String,
    pub stop_reason: String,
    pub steps: u32,
    pub tokens: String,
    /// The agent changed files the checks depend on.
    pub tampered: bool,
    /// Faults the `chaos(...)` wrapper injected into the trial's model calls.
    pub injected_faults: u32,
    pub error: Option<String>,
}

/// The fault kinds of the `chaos(...)` model wrapper, in the order the report
/// lists them: a failed call first, then the ways an answer is corrupted.
/// Kinds not listed (a newer tack) follow alphabetically.
const FAULT_KINDS: [&str; 5] = [
    "transport_error",
    "malformed_json",
    "unknown_tool",
    "wrong_types",
    "truncated",
];

pub(crate) fn header(analysis: &RunAnalysis) -> Header {
    let m = &analysis.manifest;
    Header {
        suite: m.suite.name.clone(),
        suite_path: m.suite.path.clone(),
        suite_hash: m.suite.content_hash.clone(),
        run_id: m.run_id.clone(),
        status: format!("{:?}", m.status).to_lowercase(),
        started_at: m.started_at.clone(),
        finished_at: m
            .finished_at
            .clone()
            .unwrap_or_else(|| "not finished".into()),
        tack_version: m.tack_version.clone(),
        seed: m.seed,
        trials_per_task: m.trials_per_task,
        host: format!(
            "{} ({}/{}, {} CPUs)",
            m.host.hostname, m.host.os, m.host.arch, m.host.cpus
        ),
        command_line: m.command_line.join(" "),
    }
}

pub(crate) fn simulated(analysis: &RunAnalysis) -> Vec<Simulated> {
    analysis
        .manifest
        .variants
        .iter()
        .filter(|v| v.simulated)
        .map(|v| Simulated {
            variant: v.name.clone(),
            model: v.model.clone(),
        })
        .collect()
}

pub(crate) fn summary(variants: &[VariantSummary]) -> Vec<SummaryRow> {
    variants.iter().map(summary_row).collect()
}

/// The headings of the summary's count columns: each count a run report
/// shows ([`Summary`]), in [`TRIAL_COUNTS`] order.
pub(crate) fn count_headings() -> Vec<String> {
    TRIAL_COUNTS
        .iter()
        .filter_map(|c| match c.summary? {
            Summary::Mean => Some(format!("Mean {}", c.label.to_lowercase())),
            Summary::Sum => Some(c.label.to_string()),
        })
        .collect()
}

/// Some variant had faults injected: the index shows the fault columns only
/// then, as most runs have no chaos variant.
pub(crate) fn any_faults(variants: &[VariantSummary]) -> bool {
    variants.iter().any(|v| v.injected_faults > 0)
}

fn summary_row(v: &VariantSummary) -> SummaryRow {
    let stop_order: Vec<&str> = StopReason::ALL.iter().map(|r| r.as_str()).collect();
    SummaryRow {
        variant: v.variant.clone(),
        model: v.model.clone(),
        simulated: v.simulated,
        trials: v.trials,
        passed: v.passed,
        infra_errors: v.infra_errors,
        cancelled: v.cancelled,
        retried_attempts: v.retried_attempts,
        rerun_trials: v.rerun_trials,
        rate_without_reruns: v.success_rate_without_reruns.map(percent),
        // With no trials there is no rate to show, and 0% would be a claim.
        rate: optional((v.trials > 0).then(|| percent(v.success_rate))),
        ci: optional(
            (v.trials > 0).then(|| format!("{}–{}", percent(v.ci_low), percent(v.ci_high))),
        ),
        tokens_per_success: optional(v.tokens_per_success.map(thousands)),
        mean_tokens_successful: optional(v.mean_tokens_successful.map(thousands)),
        total_tokens: thousands(v.total_tokens as f64),
        cost: optional(v.cost_usd.map(|c| format!("${c:.4}"))),
        counts: v
            .counts
            .iter()
            .filter_map(|c| match c.summary? {
                Summary::Mean => Some(format!("{:.1}", c.mean)),
                Summary::Sum => Some(c.sum.to_string()),
            })
            .collect(),
        denied_calls: v.denied_calls,
        tampered: v.tampered,
        injected_faults: v.injected_faults,
        faults: counts(
            &v.faults_by_kind,
            &in_order(&FAULT_KINDS, v.faults_by_kind.keys()),
        ),
        outcomes: counts(&v.outcomes, &outcome_order(v.outcomes.keys())),
        stop_reasons: counts(
            &v.stop_reasons,
            &in_order(&stop_order, v.stop_reasons.keys()),
        ),
    }
}

fn counts(map: &BTreeMap<String, u64>, order: &[String]) -> Vec<Count> {
    order
        .iter()
        .filter_map(|name| {
            map.get(name).map(|&count| Count {
                name: name.clone(),
                count,
            })
        })
        .collect()
}

/// Outcome names in `TrialOutcome::ALL` order (best first), then any unknown
/// names alphabetically, without duplicates.
pub(crate) fn outcome_order<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let known: Vec<&str> = TrialOutcome::ALL.iter().map(|o| o.as_str()).collect();
    in_order(&known, names)
}

fn in_order<'a>(known: &[&str], names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut names: Vec<&String> = names.collect();
    names.sort_by_key(|name| {
        let rank = known.iter().position(|k| k == name).unwrap_or(known.len());
        (rank, name.as_str())
    });
    names.dedup();
    names.into_iter().cloned().collect()
}

pub(crate) fn matrix(rows: &[MatrixRow], variants: &[VariantSummary]) -> MatrixView {
    MatrixView {
        variants: variants.iter().map(|v| v.variant.clone()).collect(),
        rows: rows
            .iter()
            .map(|row| MatrixRowView {
                task: row.task.clone(),
                cells: row
                    .cells
                    .iter()
                    .map(|c| MatrixCellView {
                        text: {
                            let mut text = format!("{}/{}", c.passed, c.trials);
                            if c.infra_errors > 0 {
                                text.push_str(&format!(" +{} infra", c.infra_errors));
                            }
                            if c.cancelled > 0 {
                                text.push_str(&format!(" +{} cut off", c.cancelled));
                            }
                            text
                        },
                        color: rate_color(c.passed, c.trials),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Red (0%) through yellow to green (100%); grey when nothing ran.
fn rate_color(passed: u64, trials: u64) -> String {
    if trials == 0 {
        return "#eeeeee".to_string();
    }
    let hue = 120.0 * passed as f64 / trials as f64;
    format!("hsl({hue:.0}, 65%, 80%)")
}

/// The rows of the listed trials that failed (`infra` false) or ended in an
/// infra error (`infra` true): the agent's failures and the
/// infrastructure's are listed apart.
pub(crate) fn failed(trials: &[TrialRow], infra: bool) -> Vec<FailedRow> {
    let infra_error = TrialOutcome::InfraError.as_str();
    trials
        .iter()
        .filter(|t| (t.outcome == infra_error) == infra)
        .map(|t| FailedRow {
            page: crate::trial_page::file_name(&t.trial_id),
            trial_id: t.trial_id.clone(),
            variant: t.variant.clone(),
            task: t.task.clone(),
            trial_index: t.trial_index,
            environment: t.environment.clone().filter(|e| e != "host"),
            outcome: t.outcome.clone(),
            stop_reason: t.stop_reason.clone(),
            steps: t.counts.get(col::STEPS),
            tokens: thousands(t.total_tokens as f64),
            tampered: t.tampered,
            injected_faults: t.injected_faults,
            error: t.error.as_deref().map(|e| shorten(e, 300)),
        })
        .collect()
}

/// How many trials did not pass, and how many of them are listed.
#[derive(Debug, Serialize)]
pub(crate) struct Listing {
    pub listed: usize,
    pub total: u64,
    pub left_out: u64,
    pub per_task: usize,
    pub limit: usize,
    pub run_id: String,
}

pub(crate) fn listing(analysis: &RunAnalysis, limit: &FailedLimit) -> Listing {
    let listed = analysis.failed_trials.len();
    Listing {
        listed,
        total: analysis.failed_total,
        left_out: analysis.failed_total.saturating_sub(listed as u64),
        per_task: limit.per_task,
        limit: limit.total,
        run_id: analysis.manifest.run_id.clone(),
    }
}

/// What counted: final attempts, those scored, and those not.
#[derive(Debug, Serialize)]
pub(crate) struct Attempts {
    pub final_trials: u64,
    pub scored: u64,
    pub infra_errors: u64,
    /// Final attempts cut off (an interrupted run): not scored.
    pub cancelled: u64,
    pub retried_attempts: u64,
}

pub(crate) fn attempts(analysis: &RunAnalysis) -> Attempts {
    let infra_errors = analysis.variants.iter().map(|v| v.infra_errors).sum();
    let cancelled = analysis.variants.iter().map(|v| v.cancelled).sum();
    let final_trials = analysis.final_trials();
    Attempts {
        final_trials,
        scored: final_trials - infra_errors - cancelled,
        infra_errors,
        cancelled,
        retried_attempts: analysis.retried_attempts(),
    }
}

/// The first `max` characters of `text`, marked when cut; the trial page
/// has the whole text.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

pub(crate) fn percent(rate: f64) -> String {
    format!("{:.1}%", rate * 100.0)
}

fn optional(value: Option<String>) -> String {
    value.unwrap_or_else(|| "—".to_string())
}

/// Rounded to a whole number with thousands separators: `12,345`.
pub(crate) fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if value < -0.5 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1234.0), "1,234");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(percent(0.4902), "49.0%");
        assert_eq!(rate_color(0, 0), "#eeeeee");
        assert_eq!(rate_color(1, 1), "hsl(120, 65%, 80%)");
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("hé", 2), "hé");
    }

    #[test]
    fn known_outcomes_come_first_in_their_order() {
        let names = ["zzz", "limit", "passed", "limit"].map(String::from);
        assert_eq!(outcome_order(names.iter()), ["passed", "limit", "zzz"]);
    }

    #[test]
    fn fault_kinds_in_report_order() {
        let names =
            ["truncated", "new_kind", "transport_error", "malformed_json"].map(String::from);
        assert_eq!(
            in_order(&FAULT_KINDS, names.iter()),
            ["transport_error", "malformed_json", "truncated", "new_kind"]
        );
    }
}
