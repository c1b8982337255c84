//! What a run cost, by variant × model × task: tokens of each kind, dollars,
//! dollars per success, and how many calls had no known cost.
//!
//! A model call's cost is recorded with the call (`cost_usd` on its span),
//! computed at run time from the price table the manifest names. A call
//! whose model has no price has a null cost: it is counted as unknown, never
//! as 0, and any total it belongs to is a lower bound (or unknown when no
//! call of it was priced).

use crate::attempts::IS_SCORED;
use crate::frame::Frame;
use crate::rollup::{FailedRows, RollupNeeds, count_where, weight};
use crate::{AnalysisError, RunTables};
use polars::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use tack_protocol::TrialOutcome;
use tack_trace::schema::{TRIALS_DIR, col};

/// A run's cost table, with what it was priced with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostReport {
    pub run_id: String,
    /// The version of the price table the run's costs were computed with
    /// (`None` for runs recorded before it was written down).
    pub price_table: Option<String>,
    /// Variants whose model is built in (simulated): their calls are never
    /// priced.
    pub simulated: Vec<String>,
    /// One row per variant (`task` is `None`), in manifest order.
    pub by_variant: Vec<CostRow>,
    /// One row per variant × model × task, in manifest order.
    pub rows: Vec<CostRow>,
    /// The whole run's scored trials.
    pub total: CostRow,
    /// What the attempts that are not scored cost: those run again (after
    /// an infra error or a crash) and final infra errors. `trials` counts
    /// those attempts; they are in no other row.
    pub not_scored: CostRow,
    /// The price of each model in `rows`, when the caller supplied them
    /// ([`CostReport::set_prices`]); otherwise empty, and `prices_note`
    /// says why.
    pub prices: Vec<ModelPrice>,
    pub prices_note: Option<String>,
}

/// Tokens and dollars of one group of trials. Token counts follow the trace's
/// conventions: `input_tokens` includes cache reads and writes, and
/// `reasoning_tokens` are part of `output_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRow {
    pub variant: String,
    /// The variant's model as the run named it (`openai:gpt-4o`, `sim`).
    pub model: String,
    /// `None` on totals over every task.
    pub task: Option<String>,
    pub simulated: bool,
    pub trials: u32,
    pub successes: u32,
    /// Answered model calls. Failed attempts (errors, timeouts) carry no
    /// usage and no cost and are not counted.
    pub calls: u64,
    pub input_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// Dollars of the calls whose cost is known.
    pub known_usd: f64,
    /// Calls whose cost is unknown (the model has no price).
    pub unknown_cost_calls: u64,
    pub status: CostStatus,
    /// `known_usd / successes`; `None` without a success or when the cost is
    /// unknown. A lower bound when `status` is.
    pub usd_per_success: Option<f64>,
}

/// How far a row's dollars can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostStatus {
    /// Every call was priced (or there were none).
    Exact,
    /// Some calls were not priced: the dollars are what the priced ones cost.
    LowerBound,
    /// No call was priced.
    Unknown,
}

impl CostStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CostStatus::Exact => "exact",
            CostStatus::LowerBound => "lower_bound",
            CostStatus::Unknown => "unknown",
        }
    }
}

/// The price of one model, in US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelPrice {
    pub model: String,
    /// The price table's entry that matched; `None` when it has no price for
    /// the model, whose costs are then unknown.
    pub entry: Option<String>,
    pub rates: Option<Rates>,
}

/// Dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rates {
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    pub output: f64,
    pub reasoning: f64,
}

impl CostRow {
    fn empty(variant: &str, model: &str, task: Option<&str>, simulated: bool) -> CostRow {
        CostRow {
            variant: variant.to_string(),
            model: model.to_string(),
            task: task.map(str::to_owned),
            simulated,
            trials: 0,
            successes: 0,
            calls: 0,
            input_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: 0,
            reasoning_tokens: 0,
            known_usd: 0.0,
            unknown_cost_calls: 0,
            status: CostStatus::Exact,
            usd_per_success: None,
        }
    }

    fn add(&mut self, other: &CostRow) {
        self.trials = self.trials.saturating_add(other.trials);
        self.successes = self.successes.saturating_add(other.successes);
        self.add_calls(&other.calls_only());
    }

    fn add_calls(&mut self, calls: &TrialCalls) {
        self.calls = self.calls.saturating_add(calls.calls);
        self.input_tokens = self.input_tokens.saturating_add(calls.input);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(calls.cache_read);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(calls.cache_write);
        self.output_tokens = self.output_tokens.saturating_add(calls.output);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(calls.reasoning);
        self.known_usd += calls.known_usd;
        self.unknown_cost_calls = self.unknown_cost_calls.saturating_add(calls.unknown);
    }

    fn calls_only(&self) -> TrialCalls {
        TrialCalls {
            calls: self.calls,
            input: self.input_tokens,
            cache_read: self.cache_read_tokens,
            cache_write: self.cache_write_tokens,
            output: self.output_tokens,
            reasoning: self.reasoning_tokens,
            known_usd: self.known_usd,
            unknown: self.unknown_cost_calls,
        }
    }

    /// Sets `status` and `usd_per_success` from the sums.
    fn finish(mut self) -> CostRow {
        self.status = if self.unknown_cost_calls == 0 {
            CostStatus::Exact
        } else if self.unknown_cost_calls >= self.calls {
            CostStatus::Unknown
        } else {
            CostStatus::LowerBound
        };
        self.usd_per_success = (self.successes > 0 && self.status != CostStatus::Unknown)
            .then(|| self.known_usd / f64::from(self.successes));
        self
    }

    /// The CSV names of [`CostRow::count_cells`], in their order.
    pub const COUNT_COLUMNS: [&'static str; 8] = [
        "trials",
        "successes",
        "model_calls",
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        "reasoning_tokens",
    ];

    /// The row's counts as the CSV and the terminal table show them: one
    /// definition, so the two list the same fields in the same order.
    pub fn count_cells(&self) -> [String; 8] {
        [
            self.trials.to_string(),
            self.successes.to_string(),
            self.calls.to_string(),
            self.input_tokens.to_string(),
            self.cache_read_tokens.to_string(),
            self.cache_write_tokens.to_string(),
            self.output_tokens.to_string(),
            self.reasoning_tokens.to_string(),
        ]
    }

    /// The row's dollars as people should read them: `$0.0123`,
    /// `≥ $0.0123` (some calls unpriced) or `unknown`.
    pub fn usd_text(&self) -> String {
        self.dollars_text(Some(self.known_usd))
    }

    /// Dollars per success, labelled as [`CostRow::usd_text`]; `no success`
    /// when no trial passed.
    pub fn per_success_text(&self) -> String {
        if self.successes == 0 {
            return "no success".to_string();
        }
        self.dollars_text(self.usd_per_success)
    }

    fn dollars_text(&self, usd: Option<f64>) -> String {
        match (self.status, usd) {
            (CostStatus::Unknown, _) | (_, None) => "unknown".to_string(),
            (CostStatus::Exact, Some(usd)) => format_usd(usd),
            (CostStatus::LowerBound, Some(usd)) => format!("≥ {}", format_usd(usd)),
        }
    }
}

/// Dollars: cents from $1 up, below that at least two significant digits,
/// so a run of cheap calls does not read as `$0.00`.
pub fn format_usd(usd: f64) -> String {
    if usd == 0.0 || !usd.is_finite() {
        return format!("${usd}");
    }
    if usd.abs() >= 1.0 {
        return format!("${usd:.2}");
    }
    let magnitude = -usd.abs().log10().floor();
    // 0.0425 → 4 decimals, 0.004 → 4, 0.000045 → 6.
    let decimals = (magnitude as usize + 1).clamp(4, 12);
    format!("${usd:.decimals$}")
}

/// Answered model calls, summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TrialCalls {
    pub calls: u64,
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
    pub known_usd: f64,
    pub unknown: u64,
}

impl TrialCalls {
    /// Adds `other`'s counts and tokens; not its dollars, which the caller
    /// sums exactly (see [`crate::frame::picodollars`]).
    pub(crate) fn add(&mut self, other: &TrialCalls) {
        self.calls = self.calls.saturating_add(other.calls);
        self.input = self.input.saturating_add(other.input);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.output = self.output.saturating_add(other.output);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
        self.unknown = self.unknown.saturating_add(other.unknown);
    }
}

/// Reads `run_dir`'s manifest, trials and spans and builds its cost table.
/// Prices are not known to the analysis; see [`CostReport::set_prices`].
pub fn cost_report(run_dir: &Path) -> Result<CostReport, AnalysisError> {
    cost_report_of(&RunTables::open(run_dir)?)
}

/// [`cost_report`] of an opened run. Rows cover the scored trials, as the
/// success rates do; the attempts that were run again and the final infra
/// errors are summed apart in [`CostReport::not_scored`].
pub fn cost_report_of(tables: &RunTables) -> Result<CostReport, AnalysisError> {
    let manifest = tables.manifest();
    let dir = tables.trials_dir();
    // After an analysis of the same tables, its pass is reused.
    let rollup = tables.rollup(RollupNeeds {
        spans: true,
        failed: FailedRows::None,
    })?;
    let trials = rollup.cube();
    let simulated: Vec<String> = manifest
        .variants
        .iter()
        .filter(|v| v.simulated)
        .map(|v| v.name.clone())
        .collect();
    let mut groups = trial_counts(trials.clone(), dir, &simulated)?;
    let mut not_scored = CostRow::empty(NOT_SCORED, "", None, false);
    not_scored.trials = not_scored_attempts(trials, dir)?;
    for (key, scored, calls) in rollup.span_sums().calls() {
        if scored {
            let is_sim = simulated.contains(&key.0);
            groups
                .entry(key.clone())
                .or_insert_with(|| CostRow::empty(&key.0, &key.1, Some(&key.2), is_sim))
                .add_calls(&calls);
        } else {
            not_scored.add_calls(&calls);
        }
    }
    let variant_order: Vec<String> = manifest.variants.iter().map(|v| v.name.clone()).collect();
    let mut rows: Vec<CostRow> = groups.into_values().map(CostRow::finish).collect();
    sort_rows(&mut rows, &variant_order, &manifest.tasks);
    let by_variant = variant_totals(&rows);
    // Simulated when every variant is: a total over built-in models only
    // is no real model's cost (a mixed one is the real ones' sum).
    let all_simulated = !by_variant.is_empty() && by_variant.iter().all(|row| row.simulated);
    let mut total = CostRow::empty("all variants", "", None, all_simulated);
    for row in &by_variant {
        total.add(row);
    }
    Ok(CostReport {
        run_id: manifest.run_id.clone(),
        price_table: manifest.price_table.clone(),
        simulated,
        by_variant,
        rows,
        total: total.finish(),
        not_scored: not_scored.finish(),
        prices: Vec::new(),
        prices_note: Some("per-model prices were not supplied with this table".to_string()),
    })
}

/// The `variant` of [`CostReport::not_scored`].
pub const NOT_SCORED: &str = "not scored";

/// Names of aggregate columns.
const TRIALS: &str = "trials";
const SUCCESSES: &str = "successes";

use crate::span_sums::GroupKey;

/// Scored trials and successes per variant × model × task.
fn trial_counts(
    trials: LazyFrame,
    dir: &Path,
    simulated: &[String],
) -> Result<BTreeMap<GroupKey, CostRow>, AnalysisError> {
    let passed = col(col::OUTCOME).eq(lit(TrialOutcome::Passed.as_str()));
    let lazy = trials
        .filter(col(IS_SCORED))
        .group_by([col(col::VARIANT), col(col::MODEL), col(col::TASK)])
        .agg([weight().alias(TRIALS), count_where(passed).alias(SUCCESSES)]);
    let f = Frame::collect(lazy, dir, TRIALS_DIR)?;
    let (variant, model, task) = (
        f.strs(col::VARIANT)?,
        f.strs(col::MODEL)?,
        f.strs(col::TASK)?,
    );
    let (trials, successes) = (f.u32s(TRIALS)?, f.u32s(SUCCESSES)?);
    let mut groups = BTreeMap::new();
    for i in 0..f.height() {
        let is_sim = simulated.contains(&variant[i]);
        let mut row = CostRow::empty(&variant[i], &model[i], Some(&task[i]), is_sim);
        row.trials = trials[i];
        row.successes = successes[i];
        groups.insert((variant[i].clone(), model[i].clone(), task[i].clone()), row);
    }
    Ok(groups)
}

/// Attempts that are not scored: run again, or a final infra error or cut-off attempt.
fn not_scored_attempts(trials: LazyFrame, dir: &Path) -> Result<u32, AnalysisError> {
    let lazy = trials.select([count_where(col(IS_SCORED).not()).alias(TRIALS)]);
    let f = Frame::collect(lazy, dir, TRIALS_DIR)?;
    Ok(f.u32s(TRIALS)?.first().copied().unwrap_or(0))
}

/// Manifest order of variants, then of tasks; names it does not know last,
/// by name.
fn sort_rows(rows: &mut [CostRow], variants: &[String], tasks: &[String]) {
    let position = |list: &[String], name: &str| list.iter().position(|n| n == name);
    rows.sort_by_cached_key(|r| {
        let task = r.task.clone().unwrap_or_default();
        (
            position(variants, &r.variant).unwrap_or(usize::MAX),
            r.variant.clone(),
            r.model.clone(),
            position(tasks, &task).unwrap_or(usize::MAX),
            task,
        )
    });
}

/// One row per variant and model, over all its tasks, in the order of `rows`.
fn variant_totals(rows: &[CostRow]) -> Vec<CostRow> {
    let mut totals: Vec<CostRow> = Vec::new();
    for row in rows {
        let same = |t: &&mut CostRow| t.variant == row.variant && t.model == row.model;
        match totals.iter_mut().find(same) {
            Some(total) => total.add(row),
            None => {
                let mut total = CostRow::empty(&row.variant, &row.model, None, row.simulated);
                total.add(row);
                totals.push(total);
            }
        }
    }
    totals.into_iter().map(CostRow::finish).collect()
}

impl CostReport {
    /// The distinct models of the run, in row order.
    pub fn models(&self) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        for row in &self.by_variant {
            if !models.contains(&row.model) {
                models.push(row.model.clone());
            }
        }
        models
    }

    /// Lists each model's price from a price table `version`, looked up with
    /// `lookup`. The run's costs were computed when it ran; listing a table
    /// of another version next to them would misstate what was charged, so
    /// then nothing is listed and `prices_note` says why.
    pub fn set_prices(&mut self, version: &str, lookup: impl Fn(&str) -> ModelPrice) {
        match self.price_table.as_deref() {
            Some(recorded) if recorded == version => {
                self.prices = self.models().iter().map(|m| lookup(m)).collect();
                self.prices_note = None;
            }
            Some(recorded) => {
                self.prices.clear();
                self.prices_note = Some(format!(
                    "the run was priced with price table {recorded}; the table available now is \
                     {version}, so its prices are not listed"
                ));
            }
            None => {
                self.prices.clear();
                self.prices_note = Some(
                    "the run did not record which price table priced it, so no prices are listed"
                        .to_string(),
                );
            }
        }
    }

    /// True when some call's cost is unknown.
    pub fn any_unknown(&self) -> bool {
        self.total.unknown_cost_calls > 0
    }

    /// The detail rows as CSV, one line per variant × model × task. Dollars
    /// are empty when unknown; `cost_status` says whether they are exact or
    /// a lower bound.
    pub fn to_csv(&self) -> String {
        let mut out = format!(
            "run_id,variant,model,task,simulated,{},cost_usd,cost_status,usd_per_success,\
             unknown_cost_calls\n",
            CostRow::COUNT_COLUMNS.join(",")
        );
        for r in &self.rows {
            let usd = match r.status {
                CostStatus::Unknown => String::new(),
                _ => plain_usd(r.known_usd),
            };
            let per_success = r.usd_per_success.map(plain_usd).unwrap_or_default();
            let mut fields = vec![
                csv_name(&self.run_id),
                csv_name(&r.variant),
                csv_name(&r.model),
                csv_name(r.task.as_deref().unwrap_or("")),
                r.simulated.to_string(),
            ];
            fields.extend(r.count_cells());
            fields.extend([
                usd,
                r.status.as_str().to_string(),
                per_success,
                r.unknown_cost_calls.to_string(),
            ]);
            out.push_str(&fields.join(","));
            out.push('\n');
        }
        out
    }
}

/// Dollars for machines: rounded to a billionth, so that float sums read
/// `0.035`, not `0.034999999999999996`.
fn plain_usd(usd: f64) -> String {
    let text = format!("{usd:.9}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A name in cost.csv (a run, variant, model or task, which a run received
/// from elsewhere chooses) as a CSV field that a spreadsheet shows and
/// does not compute: one starting as a formula does (`=HYPERLINK(…)`,
/// `+`, `-`, `@`, a tab or carriage return) gets a leading `'`, as OWASP
/// advises. Numbers are written by tack and are left as they are.
fn csv_name(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        csv_field(&format!("'{text}"))
    } else {
        csv_field(text)
    }
}

/// A CSV field, quoted when it holds a separator, quote or line break.
pub fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::csv_name;

    /// A name a received run chose is shown by a spreadsheet, not run.
    #[test]
    fn a_name_that_reads_as_a_formula_is_shown_as_text() {
        assert_eq!(
            csv_name("=HYPERLINK(\"https://x\",\"open\")"),
            "\"'=HYPERLINK(\"\"https://x\"\",\"\"open\"\")\""
        );
        assert_eq!(csv_name("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_name("-2+3"), "'-2+3");
        assert_eq!(csv_name("leap-year-400"), "leap-year-400");
    }
}
