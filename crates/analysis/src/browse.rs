//! Pages of trials across runs, filtered, searched and sorted (`tack
//! view`'s trials table): one lazy plan over every run's Parquet parts, the
//! filters pushed down to the scans, and only the page asked for collected.
//! Like every listing, it shows each planned trial's final attempt.

use crate::attempts::IS_FINAL;
use crate::frame::{Frame, parquet_files, scan};
use crate::load::{id_list, trial_rows_of};
use crate::{AnalysisError, RunTables, TrialRow};
use polars::prelude::*;
use serde::Serialize;
use tack_trace::schema::{MESSAGES_DIR, SPANS_DIR, TRIALS_DIR, col};

/// The column a browsed row's run id is in.
const RUN: &str = "run_id_of_row";

/// What a page of trials is made of: every field left empty filters nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrialQuery {
    pub variants: Vec<String>,
    pub tasks: Vec<String>,
    pub outcomes: Vec<String>,
    pub stop_reasons: Vec<String>,
    /// Trials whose error, or any of whose tool calls' arguments, output,
    /// results or checks' output, holds this text (case-sensitive).
    pub search: Option<String>,
    pub sort: SortKey,
    pub descending: bool,
    pub offset: usize,
    pub limit: usize,
}

/// What a page is sorted by (then by run, variant, task and trial index).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    Trial,
    Steps,
    Tokens,
    Cost,
    Duration,
}

impl SortKey {
    pub const ALL: [SortKey; 5] = [
        SortKey::Trial,
        SortKey::Steps,
        SortKey::Tokens,
        SortKey::Cost,
        SortKey::Duration,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Trial => "trial",
            SortKey::Steps => "steps",
            SortKey::Tokens => "tokens",
            SortKey::Cost => "cost",
            SortKey::Duration => "duration",
        }
    }

    pub fn parse(text: &str) -> Option<SortKey> {
        SortKey::ALL.into_iter().find(|key| key.as_str() == text)
    }

    fn column(self) -> Option<&'static str> {
        match self {
            SortKey::Trial => None,
            SortKey::Steps => Some(col::STEPS),
            SortKey::Tokens => Some(col::TOTAL_TOKENS),
            SortKey::Cost => Some(col::COST_USD),
            SortKey::Duration => Some(col::DURATION_MS),
        }
    }
}

/// One row of a page: the trial and the run it is in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BrowsedTrial {
    pub run_id: String,
    #[serde(flatten)]
    pub trial: TrialRow,
}

/// A page of trials and how many match in all.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialPage {
    pub total: usize,
    pub rows: Vec<BrowsedTrial>,
}

/// The page of `runs`' trials that `query` asks for.
///
/// Filters and sorting run over each run's narrow columns, read once and
/// kept by its [`RunTables`] (a million trials filter in memory); only the
/// page's rows are then read whole, from the part files that hold them. A
/// search reads the text columns it searches.
pub fn browse(runs: &[&RunTables], query: &TrialQuery) -> Result<TrialPage, AnalysisError> {
    let Some(first) = runs.first() else {
        return Ok(TrialPage {
            total: 0,
            rows: Vec::new(),
        });
    };
    let dir = first.trials_dir().to_path_buf();
    let polars_error = |source| AnalysisError::Polars {
        dir: dir.clone(),
        table: TRIALS_DIR,
        source,
    };
    let mut chosen = Vec::with_capacity(runs.len());
    for (index, run) in runs.iter().enumerate() {
        let mut trials = run
            .marked_frame()?
            .lazy()
            .filter(col(IS_FINAL).and(filters(query)))
            .select([
                col(col::TRIAL_ID),
                col(col::VARIANT),
                col(col::TASK),
                col(col::TRIAL_INDEX),
                col(col::STEPS),
                col(col::TOTAL_TOKENS),
                col(col::COST_USD),
                col(col::DURATION_MS),
                lit(index as u32).alias(RUN),
            ]);
        if let Some(text) = query.search.as_deref().filter(|t| !t.is_empty()) {
            trials = searched(run, trials, text)?;
        }
        chosen.push(trials);
    }
    let all = concat(chosen, UnionArgs::default()).map_err(polars_error)?;
    let total = Frame::collect(
        all.clone().select([col(col::TRIAL_ID).count().alias("n")]),
        &dir,
        TRIALS_DIR,
    )?
    .u32s("n")?
    .first()
    .copied()
    .unwrap_or(0) as usize;
    let mut by = Vec::new();
    let mut descending = Vec::new();
    if let Some(column) = query.sort.column() {
        by.push(col(column));
        descending.push(query.descending);
    }
    for name in [RUN, col::VARIANT, col::TASK, col::TRIAL_INDEX] {
        by.push(col(name));
        descending.push(query.sort == SortKey::Trial && query.descending);
    }
    let options = SortMultipleOptions::default()
        .with_order_descending_multi(descending)
        .with_nulls_last(true);
    let page = all
        .sort_by_exprs(by, options)
        .slice(
            i64::try_from(query.offset).unwrap_or(i64::MAX),
            u32::try_from(query.limit).unwrap_or(u32::MAX),
        )
        .select([col(RUN), col(col::TRIAL_ID)]);
    let page = Frame::collect(page, &dir, TRIALS_DIR)?;
    let ids = page.strs(col::TRIAL_ID)?;
    let run_of = page.u32s(RUN)?;
    let mut rows = Vec::with_capacity(ids.len());
    for (index, run) in runs.iter().enumerate() {
        let wanted: Vec<String> = ids
            .iter()
            .zip(&run_of)
            .filter(|(_, r)| **r as usize == index)
            .map(|(id, _)| id.clone())
            .collect();
        if wanted.is_empty() {
            continue;
        }
        // A trial id names one attempt: these are the final ones.
        for trial in trial_rows_of(run, &wanted)? {
            rows.push((index, trial));
        }
    }
    // In the page's order.
    let position = |index: usize, id: &str| {
        ids.iter()
            .zip(&run_of)
            .position(|(i, r)| *r as usize == index && i == id)
    };
    rows.sort_by_key(|(index, trial)| position(*index, &trial.trial_id));
    let rows = rows
        .into_iter()
        .map(|(index, trial)| BrowsedTrial {
            run_id: runs[index].manifest().run_id.clone(),
            trial,
        })
        .collect();
    Ok(TrialPage { total, rows })
}

/// The query's filters on a trials row, `true` for none.
fn filters(query: &TrialQuery) -> Expr {
    let one_of = |column: &str, values: &[String]| {
        if values.is_empty() {
            lit(true)
        } else {
            col(column).is_in(id_list(values), false)
        }
    };
    one_of(col::VARIANT, &query.variants)
        .and(one_of(col::TASK, &query.tasks))
        .and(one_of(col::OUTCOME, &query.outcomes))
        .and(one_of(col::STOP_REASON, &query.stop_reasons))
}

/// `trials` narrowed to those whose error holds `text`, or one of whose
/// spans does in its text columns, or one of whose messages (the agent's,
/// the model's, the tools' results) does.
fn searched(run: &RunTables, trials: LazyFrame, text: &str) -> Result<LazyFrame, AnalysisError> {
    let polars_error = |table, source| AnalysisError::Polars {
        dir: run.run_dir().join(table),
        table,
        source,
    };
    let holds = |column: &str| {
        col(column)
            .str()
            .contains_literal(lit(text.to_string()))
            .fill_null(lit(false))
    };
    let mut matching = vec![
        run.trials()
            .filter(holds(col::ERROR))
            .select([col(col::TRIAL_ID)]),
    ];
    if let Some(mut spans) = run.spans() {
        let schema = spans
            .collect_schema()
            .map_err(|e| polars_error(SPANS_DIR, e))?;
        let text_columns = [
            col::NAME,
            col::TOOL_ARGUMENTS,
            col::STDOUT,
            col::STDERR,
            col::CHECK_OUTPUT,
            col::ERROR,
        ];
        let in_span = text_columns
            .into_iter()
            .filter(|name| schema.get(name).is_some_and(|t| t == &DataType::String))
            .map(holds)
            .reduce(Expr::or)
            .unwrap_or(lit(false));
        matching.push(spans.filter(in_span).select([col(col::TRIAL_ID)]));
    }
    if let Some(in_messages) = in_messages(run, holds(col::CONTENT))? {
        matching.push(in_messages);
    }
    let matching = concat(matching, UnionArgs::default())
        .map_err(|e| polars_error(TRIALS_DIR, e))?
        .unique(None, UniqueKeepStrategy::Any);
    Ok(trials.join(
        matching,
        [col(col::TRIAL_ID)],
        [col(col::TRIAL_ID)],
        JoinArgs::new(JoinType::Inner),
    ))
}

/// The ids of the trials one of whose messages satisfies `hit`; `None`
/// when the run has no messages table. Messages are stored once per run by
/// content address, and each trial lists the ones it sent and received;
/// runs before schema version 3 kept them per trial, with its id.
fn in_messages(run: &RunTables, hit: Expr) -> Result<Option<LazyFrame>, AnalysisError> {
    let dir = run.run_dir().join(MESSAGES_DIR);
    let files = parquet_files(&dir)?;
    if files.is_empty() {
        return Ok(None);
    }
    let mut messages = scan(&dir, MESSAGES_DIR, &files)?;
    let schema = messages
        .collect_schema()
        .map_err(|source| AnalysisError::Polars {
            dir: dir.clone(),
            table: MESSAGES_DIR,
            source,
        })?;
    if schema.get(col::CONTENT) != Some(&DataType::String) {
        return Ok(None);
    }
    let hits = messages.filter(hit);
    // A message names the trial that stored it first (trial_id), not every
    // trial that sent it; runs before version 3 have no ids, only trials.
    if schema.get(col::MESSAGE_ID).is_none() && schema.get(col::TRIAL_ID).is_some() {
        return Ok(Some(hits.select([col(col::TRIAL_ID)])));
    }
    let listed = run
        .trials()
        .select([col(col::TRIAL_ID), col(col::MESSAGE_IDS)])
        .explode(
            cols([col::MESSAGE_IDS]),
            ExplodeOptions {
                empty_as_null: false,
                keep_nulls: false,
            },
        )
        .join(
            hits.select([col(col::MESSAGE_ID)]),
            [col(col::MESSAGE_IDS)],
            [col(col::MESSAGE_ID)],
            JoinArgs::new(JoinType::Inner),
        )
        .select([col(col::TRIAL_ID)]);
    Ok(Some(listed))
}
