//! What the analysis and the cost table need from the spans, in one pass:
//! the spans are most of a run's bytes, and joining them to their trials
//! is most of a report's work, so it is done once for both.

use crate::AnalysisError;
use crate::attempts::IS_SCORED;
use crate::cost::TrialCalls;
use crate::frame::{Frame, picodollars, usd_of_picodollars};
use crate::summary::SpanTotals;
use crate::trace::{DENIED, FAULTS, WAIT, count_aggregates, count_flags, counted};
use polars::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use tack_protocol::SpanStatus;
use tack_trace::schema::{SPANS_DIR, col, kind};

/// A (variant, model, task) group.
pub(crate) type GroupKey = (String, String, String);

/// The spans' sums per variant × model × task, whether the trial is
/// scored, and fault kind.
#[derive(Debug, Default)]
pub(crate) struct SpanSums {
    groups: Vec<Group>,
}

#[derive(Debug)]
struct Group {
    key: GroupKey,
    scored: bool,
    fault: Option<String>,
    denied_calls: u64,
    injected_faults: u64,
    rate_limit_wait_ms: u64,
    /// Answered model calls' sums, in picodollars for the dollars.
    calls: TrialCalls,
    known_pico: i64,
}

impl Group {
    fn add(&mut self, other: &Group) {
        self.denied_calls += other.denied_calls;
        self.injected_faults += other.injected_faults;
        self.rate_limit_wait_ms = self
            .rate_limit_wait_ms
            .saturating_add(other.rate_limit_wait_ms);
        self.calls.add(&other.calls);
        self.known_pico = self.known_pico.saturating_add(other.known_pico);
    }
}

const CALLS: &str = "calls";
const PICO: &str = "known_picodollars";
const UNKNOWN: &str = "unknown_cost_calls";
/// The columns of [`aggregates`], summed again over a group's trials.
const SUMS: [&str; 11] = [
    DENIED,
    FAULTS,
    WAIT,
    CALLS,
    PICO,
    UNKNOWN,
    col::INPUT_TOKENS,
    col::CACHE_READ_TOKENS,
    col::CACHE_WRITE_TOKENS,
    col::OUTPUT_TOKENS,
    col::REASONING_TOKENS,
];
const TOKENS: [&str; 5] = [
    col::INPUT_TOKENS,
    col::CACHE_READ_TOKENS,
    col::CACHE_WRITE_TOKENS,
    col::OUTPUT_TOKENS,
    col::REASONING_TOKENS,
];

/// The flag of an answered model call: what the cost table counts. Failed
/// attempts carry no usage and no cost.
const IS_CALL: &str = "is_answered_call";

fn is_answered_call() -> Expr {
    col(col::KIND)
        .eq(lit(kind::MODEL_CALL))
        .and(col(col::STATUS).eq(lit(SpanStatus::Ok.as_str())))
        .alias(IS_CALL)
}

/// `value` on answered calls, 0 elsewhere.
fn on_calls(value: Expr) -> Expr {
    when(col(IS_CALL))
        .then(value)
        .otherwise(lit(0).cast(DataType::Int64))
}

/// What a trial's spans count ([`count_aggregates`]) and what its answered
/// calls used and cost.
fn aggregates() -> Vec<Expr> {
    let mut aggs = count_aggregates().to_vec();
    aggs.extend([
        col(IS_CALL).cast(DataType::UInt64).sum().alias(CALLS),
        on_calls(picodollars(col(col::COST_USD))).sum().alias(PICO),
        col(IS_CALL)
            .and(col(col::COST_USD).is_null())
            .cast(DataType::UInt64)
            .sum()
            .alias(UNKNOWN),
    ]);
    aggs.extend(TOKENS.iter().map(|name| {
        on_calls(col(*name).cast(DataType::Int64))
            .cast(DataType::UInt64)
            .sum()
            .alias(*name)
    }));
    aggs
}

impl SpanSums {
    /// Joins the spans that count for either to their trial's row of
    /// `trials` (the marked trials table) and sums them. Only the columns
    /// summed are read: Polars pushes the projection into the Parquet
    /// reader, so tool output is never decoded.
    pub(crate) fn of(
        spans: LazyFrame,
        trials: LazyFrame,
        dir: &Path,
    ) -> Result<SpanSums, AnalysisError> {
        let mut span_columns = vec![
            col(col::TRIAL_ID),
            col(col::KIND),
            col(col::STATUS),
            col(col::ERROR_KIND),
            col(col::FAULT),
            col(col::RATE_LIMIT_WAIT_MS),
            col(col::COST_USD),
        ];
        span_columns.extend(TOKENS.iter().map(|name| col(*name)));
        let keys = [col::VARIANT, col::MODEL, col::TASK, IS_SCORED];
        let mut trial_columns = vec![col(col::TRIAL_ID)];
        trial_columns.extend(keys.iter().map(|name| col(*name)));
        let mut group = keys.iter().map(|name| col(*name)).collect::<Vec<_>>();
        group.push(col(col::FAULT));
        // The flags first, each span's kind compared once. Summed per
        // trial next: the join then matches a row per trial, not one per
        // call, and copies no group names onto every call.
        let mut flags = count_flags().to_vec();
        flags.push(is_answered_call());
        let per_trial = spans
            .select(span_columns)
            .with_columns(flags)
            .filter(col(IS_CALL).or(counted()))
            .group_by([col(col::TRIAL_ID), col(col::FAULT)])
            .agg(aggregates());
        let lazy = per_trial
            .join(
                trials.select(trial_columns),
                [col(col::TRIAL_ID)],
                [col(col::TRIAL_ID)],
                JoinArgs::new(JoinType::Inner),
            )
            .group_by(group)
            .agg(SUMS.iter().map(|name| col(*name).sum()).collect::<Vec<_>>());
        let frame = Frame::collect(lazy, dir, SPANS_DIR)?;
        Ok(SpanSums {
            groups: groups(&frame)?,
        })
    }

    /// `other`'s groups added: sums of other trials (another batch of
    /// parts). A group both have is summed into one, so a run read in many
    /// batches holds a group per variant, model, task, scoring and fault
    /// kind, not one per batch.
    pub(crate) fn extend(&mut self, other: SpanSums) {
        let id = |g: &Group| (g.key.clone(), g.scored, g.fault.clone());
        let mut at: HashMap<_, usize> = (self.groups.iter().map(id))
            .enumerate()
            .map(|(i, id)| (id, i))
            .collect();
        for g in other.groups {
            match at.get(&id(&g)).and_then(|&i| self.groups.get_mut(i)) {
                Some(same) => same.add(&g),
                None => {
                    at.insert(id(&g), self.groups.len());
                    self.groups.push(g);
                }
            }
        }
    }

    /// Denied calls, injected faults and rate-limit waits per variant, over
    /// its scored trials.
    pub(crate) fn totals_by_variant(&self) -> HashMap<String, SpanTotals> {
        let mut out: HashMap<String, SpanTotals> = HashMap::new();
        for g in self.groups.iter().filter(|g| g.scored) {
            let counted = g.denied_calls > 0 || g.injected_faults > 0 || g.rate_limit_wait_ms > 0;
            if !counted {
                continue;
            }
            let totals = out.entry(g.key.0.clone()).or_default();
            totals.denied_calls += g.denied_calls;
            totals.injected_faults += g.injected_faults;
            totals.rate_limit_wait_ms = totals
                .rate_limit_wait_ms
                .saturating_add(g.rate_limit_wait_ms);
            if let Some(kind) = &g.fault
                && g.injected_faults > 0
            {
                *totals.faults_by_kind.entry(kind.clone()).or_default() += g.injected_faults;
            }
        }
        out
    }

    /// The answered model calls summed per variant × model × task and
    /// whether their trial is scored; groups without a call are absent.
    pub(crate) fn calls(&self) -> Vec<(GroupKey, bool, TrialCalls)> {
        // Ordered, so that sums the caller makes of these add up alike in
        // every run.
        let mut merged: BTreeMap<(&GroupKey, bool), (TrialCalls, i64)> = BTreeMap::new();
        for g in self.groups.iter().filter(|g| g.calls.calls > 0) {
            let (sums, pico) = merged.entry((&g.key, g.scored)).or_default();
            sums.add(&g.calls);
            *pico = pico.saturating_add(g.known_pico);
        }
        merged
            .into_iter()
            .map(|((key, scored), (mut sums, pico))| {
                sums.known_usd = usd_of_picodollars(pico);
                (key.clone(), scored, sums)
            })
            .collect()
    }
}

fn groups(f: &Frame) -> Result<Vec<Group>, AnalysisError> {
    let (variant, model, task) = (
        f.strs(col::VARIANT)?,
        f.strs(col::MODEL)?,
        f.strs(col::TASK)?,
    );
    let scored = f.bools(IS_SCORED)?;
    let fault = f.opt_strs(col::FAULT)?;
    let (denied, faults, wait) = (f.u64s(DENIED)?, f.u64s(FAULTS)?, f.u64s(WAIT)?);
    let (calls, pico, unknown) = (f.u64s(CALLS)?, f.i64s(PICO)?, f.u64s(UNKNOWN)?);
    let [input, read, write, output, reasoning] = [
        f.u64s(TOKENS[0])?,
        f.u64s(TOKENS[1])?,
        f.u64s(TOKENS[2])?,
        f.u64s(TOKENS[3])?,
        f.u64s(TOKENS[4])?,
    ];
    Ok((0..f.height())
        .map(|i| Group {
            key: (variant[i].clone(), model[i].clone(), task[i].clone()),
            scored: scored[i],
            fault: fault[i].clone(),
            denied_calls: denied[i],
            injected_faults: faults[i],
            rate_limit_wait_ms: wait[i],
            calls: TrialCalls {
                calls: calls[i],
                input: input[i],
                cache_read: read[i],
                cache_write: write[i],
                output: output[i],
                reasoning: reasoning[i],
                known_usd: 0.0,
                unknown: unknown[i],
            },
            known_pico: pico[i],
        })
        .collect())
}
