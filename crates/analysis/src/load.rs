//! Reading whole trials back: a trial's row, spans and conversation, for a
//! trial page or `tack show`. Several trials are read together: one pass
//! over the parts that hold them, not one pass over the run per trial.

use crate::AnalysisError;
use crate::attempts::IS_FINAL;
use crate::batch::BatchColumns;
use crate::frame::{FILE_PATH, Frame};
use crate::tables::{RunTables, file_name};
use crate::trace::{self, SpanCounts, TrialTrace, check_trial_id};
use crate::trials::{self, TrialRow};
use polars::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use tack_trace::Columns;
use tack_trace::schema::{SPANS_DIR, TRIALS_DIR, col};

/// Reads one trial's row, spans and messages; any attempt, final or not.
pub fn load_trial_trace(run_dir: &Path, trial_id: &str) -> Result<TrialTrace, AnalysisError> {
    check_trial_id(trial_id)?;
    let tables = RunTables::open(run_dir)?;
    let ids = [trial_id.to_string()];
    let rows = trial_rows_of(&tables, &ids)?;
    let not_found = || AnalysisError::TrialNotFound {
        dir: run_dir.join(TRIALS_DIR),
        trial_id: trial_id.to_string(),
    };
    let row = rows.into_iter().next().ok_or_else(not_found)?;
    load_trial_traces(&tables, &[row])?
        .pop()
        .ok_or_else(not_found)
}

/// The traces of the trials `ids` (any attempt), in no particular order;
/// ids the run does not hold are left out. For reading a run's trials a
/// batch at a time.
pub fn load_trials(tables: &RunTables, ids: &[String]) -> Result<Vec<TrialTrace>, AnalysisError> {
    for id in ids {
        check_trial_id(id)?;
    }
    let rows = trial_rows_of(tables, ids)?;
    load_trial_traces(tables, &rows)
}

/// The rows of the trials `ids` (any attempt) with nothing from the spans
/// yet; in no particular order, absent ids left out.
pub(crate) fn trial_rows_of(
    tables: &RunTables,
    ids: &[String],
) -> Result<Vec<TrialRow>, AnalysisError> {
    let files = files_of(tables, ids)?;
    let Some(trials) = tables.trials_in(&files)? else {
        return Ok(Vec::new());
    };
    let lazy = trials
        .filter(col(col::TRIAL_ID).is_in(id_list(ids), false))
        .select(trials::row_columns());
    let frame = Frame::collect(lazy, tables.trials_dir(), TRIALS_DIR)?;
    trials::trial_rows(&frame, &HashMap::new())
}

/// `ids` as the right side of `is_in`: one list to look each value up in.
pub(crate) fn id_list(ids: &[String]) -> Expr {
    lit(Series::new("ids".into(), ids)).implode(false)
}

/// Trials whose traces [`trial_traces_in_batches`] holds at once: a default
/// report's listing (five per variant and task, at most 500) in one batch.
/// Each batch looks for the messages its trials share with others (a system
/// prompt, a task's instruction, stored by the first trial that sent them)
/// in the parts written before its own again, so smaller batches cost reads.
pub const TRACE_BATCH: usize = 500;

/// The traces of `rows`' trials, `batch` at a time ([`TRACE_BATCH`] for a
/// report), those in the same parts together, each batch handed to `each`
/// and dropped: a report listing thousands of failed trials renders their
/// pages without holding every trace. Returns `rows`, in their order, with
/// the span counts their traces gave (see [`load_trial_traces`]). For pages:
/// the model calls' lists of message ids are left unread where their
/// counts were written ([`SpanRow::messages_sent`](crate::SpanRow)).
pub fn trial_traces_in_batches<E: From<AnalysisError>>(
    tables: &RunTables,
    rows: &[TrialRow],
    batch: usize,
    mut each: impl FnMut(Vec<TrialTrace>) -> Result<(), E>,
) -> Result<Vec<TrialRow>, E> {
    let ids: Vec<String> = rows.iter().map(|r| r.trial_id.clone()).collect();
    let file_of = file_of_each(tables, &ids)?;
    let mut by_part: Vec<&TrialRow> = rows.iter().collect();
    by_part.sort_by(|a, b| file_of.get(&a.trial_id).cmp(&file_of.get(&b.trial_id)));
    let mut counted: HashMap<String, TrialRow> = HashMap::with_capacity(rows.len());
    for batch in by_part.chunks(batch.max(1)) {
        let batch: Vec<TrialRow> = batch.iter().map(|row| (*row).clone()).collect();
        let traces = load_traces(tables, &batch, Columns::AllButSentIds)?;
        counted.extend(
            traces
                .iter()
                .map(|t| (t.trial.trial_id.clone(), t.trial.clone())),
        );
        each(traces)?;
    }
    Ok(rows
        .iter()
        .map(|row| counted.remove(&row.trial_id).unwrap_or_else(|| row.clone()))
        .collect())
}

/// The traces of `rows`' trials, in the order of `rows`. Each row's span
/// counts (denied calls, injected faults, rate-limit waits) are taken from
/// the spans read.
pub fn load_trial_traces(
    tables: &RunTables,
    rows: &[TrialRow],
) -> Result<Vec<TrialTrace>, AnalysisError> {
    load_traces(tables, rows, Columns::All)
}

/// [`load_trial_traces`], decoding `columns` of the spans.
fn load_traces(
    tables: &RunTables,
    rows: &[TrialRow],
    columns: Columns,
) -> Result<Vec<TrialTrace>, AnalysisError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = rows.iter().map(|r| r.trial_id.clone()).collect();
    let files = files_of(tables, &ids)?;
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    // The transcripts are read by one thread, apart from Polars' pool that
    // reads the spans, so the two overlap.
    let (spans, transcripts) = std::thread::scope(|scope| {
        let transcripts = scope
            .spawn(|| tack_trace::trial_transcripts_in(tables.run_dir(), &id_refs, Some(&files)));
        let spans = spans_of(tables, &ids, &files, columns);
        match transcripts.join() {
            Ok(transcripts) => (spans, transcripts),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let mut spans = spans?;
    let mut transcripts = transcripts.map_err(|source| AnalysisError::Trace {
        run_dir: tables.run_dir().to_path_buf(),
        source,
    })?;
    Ok(rows
        .iter()
        .map(|row| {
            let mut spans = spans.remove(&row.trial_id).unwrap_or_default();
            // No transcript: the trial failed before its first message.
            let transcript = transcripts.remove(&row.trial_id).unwrap_or_default();
            let messages = trace::message_rows(transcript);
            trace::attach_tool_results(&mut spans, &messages);
            let counts = SpanCounts::of(&spans);
            let mut trial = row.clone();
            trial.denied_calls = counts.denied_calls;
            trial.injected_faults = counts.injected_faults();
            trial.rate_limit_wait_ms = counts.rate_limit_wait_ms;
            TrialTrace {
                trial,
                spans,
                messages,
            }
        })
        .collect())
}

/// The spans of trials `ids`, by trial id in `seq` order, read from
/// `files` (those that hold them) only. tack-trace finds their rows by each
/// file's `trial_id` column and decodes only the pages that hold them: a
/// listed trial's spans are a few dozen rows of a part of thousands, whose
/// tool output is most of its bytes.
fn spans_of(
    tables: &RunTables,
    ids: &[String],
    files: &[String],
    columns: Columns,
) -> Result<HashMap<String, Vec<trace::SpanRow>>, AnalysisError> {
    let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let batches =
        tack_trace::read_trial_rows_in(tables.run_dir(), SPANS_DIR, columns, &wanted, Some(files))
            .map_err(|source| AnalysisError::Trace {
                run_dir: tables.run_dir().to_path_buf(),
                source,
            })?;
    let mut out: HashMap<String, Vec<trace::SpanRow>> = HashMap::new();
    for (path, batch) in &batches {
        let columns = BatchColumns::new(batch, path, SPANS_DIR);
        let trial_ids = columns.strs(col::TRIAL_ID)?;
        for (trial_id, row) in trial_ids.into_iter().zip(trace::span_rows(&columns)?) {
            out.entry(trial_id).or_default().push(row);
        }
    }
    for spans in out.values_mut() {
        spans.sort_by_key(|span| span.seq);
    }
    Ok(out)
}

/// The names of the files holding the rows of trials `ids`.
fn files_of(tables: &RunTables, ids: &[String]) -> Result<Vec<String>, AnalysisError> {
    let mut files: Vec<String> = file_of_each(tables, ids)?.into_values().collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// The name of the file holding each of trials `ids`' rows, by trial id.
fn file_of_each(
    tables: &RunTables,
    ids: &[String],
) -> Result<HashMap<String, String>, AnalysisError> {
    // After an analysis, the failed trials it kept (those it lists among
    // them) or the trials rows it read know their files; a lone trial
    // (`tack show`) is looked up in the files rather than read whole.
    if let Some(kept) = tables.kept_failed() {
        let files = files_in(kept, tables, ids)?;
        if ids.iter().all(|id| files.contains_key(id)) {
            return Ok(files);
        }
    }
    let trials = match tables.marked_if_read() {
        Some(frame) => frame.lazy(),
        None => tables.trials(),
    };
    files_in(trials, tables, ids)
}

/// The file of each of `rows` that holds one of trials `ids`.
fn files_in(
    rows: LazyFrame,
    tables: &RunTables,
    ids: &[String],
) -> Result<HashMap<String, String>, AnalysisError> {
    let lazy = rows
        .filter(col(col::TRIAL_ID).is_in(id_list(ids), false))
        .select([col(col::TRIAL_ID), col(FILE_PATH)]);
    let frame = Frame::collect(lazy, tables.trials_dir(), TRIALS_DIR)?;
    Ok(frame
        .strs(col::TRIAL_ID)?
        .into_iter()
        .zip(frame.strs(FILE_PATH)?.iter().map(|path| file_name(path)))
        .collect())
}

/// Every final attempt's row, with its span counts.
pub(crate) fn final_trial_rows(tables: &RunTables) -> Result<Vec<TrialRow>, AnalysisError> {
    let lazy = tables
        .marked_trials()?
        .filter(col(IS_FINAL))
        .select(trials::row_columns());
    let frame = Frame::collect(lazy, tables.trials_dir(), TRIALS_DIR)?;
    let counts = match tables.spans() {
        Some(spans) => trace::span_counts(spans, tables.spans_dir())?,
        None => HashMap::new(),
    };
    trials::trial_rows(&frame, &counts)
}

/// `rows`' span counts (denied calls, injected faults, rate-limit waits),
/// read from the files that hold them only.
pub(crate) fn add_span_counts(
    tables: &RunTables,
    rows: &mut [TrialRow],
) -> Result<(), AnalysisError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = rows.iter().map(|r| r.trial_id.clone()).collect();
    let files = files_of(tables, &ids)?;
    if let Some(spans) = tables.spans_in(&files)? {
        let spans = spans.filter(col(col::TRIAL_ID).is_in(id_list(&ids), false));
        let counts = trace::span_counts(spans, tables.spans_dir())?;
        for row in rows {
            if let Some(c) = counts.get(&row.trial_id) {
                row.denied_calls = c.denied_calls;
                row.injected_faults = c.injected_faults();
                row.rate_limit_wait_ms = c.rate_limit_wait_ms;
            }
        }
    }
    Ok(())
}
