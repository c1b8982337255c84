//! A run's figures in one pass over its parts, a batch of parts at a time
//! (two batches at once, on threads of their own): the trials rolled up
//! into a cube (a row per combination of what the aggregates group and
//! filter by, with the trials' figures summed), the spans summed per group
//! ([`SpanSums`]), and the failed trials a listing may show. Memory holds
//! two batches and these small results, never a row per
//! trial, so a report of a million trials needs about what one of ten
//! thousand does.
//!
//! A trial's spans are in the spans file named as its trials file, so a
//! batch's spans join to the batch's own trials; which attempt of a planned
//! trial is final is decided with the whole run's [`attempts::reruns`], read
//! before the first batch.

use crate::attempts::{self, IS_FINAL, IS_SCORED};
use crate::frame::{FILE_PATH, Frame, picodollars};
use crate::span_sums::SpanSums;
use crate::tables::{PartBatch, RunTables, marked_columns};
use crate::{AnalysisError, counts};
use polars::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use tack_protocol::TrialOutcome;
use tack_trace::schema::{TRIALS_DIR, col};

/// Part files read together: about four thousand trials and their spans.
/// Larger batches hold more at once (a batch of 64 parts held about 70 MB
/// more at a million trials).
const BATCH_FILES: usize = 12;
/// Batches summed at once, each by a thread of its own: Polars leaves a
/// core idle at the end of each of its queries, which the other batch's
/// queries then use. Measured at a million trials against one batch of 16
/// at a time: 0.15–0.3 s faster, the peak about the same; two batches of
/// 16 were 0.3 s faster but held 15–20 MB more, and two of 8 were no
/// faster (more, smaller queries).
const SUMMERS: usize = 2;
/// Rows gathered from batches (cube rows, failed trials) since they were
/// last reduced, before they are reduced again: what is held stays near the
/// size of the reduced rows themselves (a million trials' cube has about
/// 27,000 rows, ten thousand trials' 1,500), where a bound on all held rows
/// let a big run hold several times its cube.
const NEW_ROWS_HELD: usize = 20_000;

/// The cube's column counting the trials a row stands for.
pub(crate) const WEIGHT: &str = "rolled_up_trials";
/// A cube key: the row's attempt is not its planned trial's first.
pub(crate) const RERUN: &str = "is_rerun";
/// A cube key: the trials have a cost (their model is priced).
pub(crate) const COST_KNOWN: &str = "cost_known";
/// The cube's sum of the trials' costs, in picodollars.
pub(crate) const PICO: &str = "cost_picodollars";

/// Which failed trials a rollup keeps for a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailedRows {
    None,
    /// The first of each variant and task, by trial index.
    FirstPerTask(usize),
    All,
}

impl FailedRows {
    /// Rows kept for `self` hold those asked for by `asked`.
    fn covers(self, asked: FailedRows) -> bool {
        match (self, asked) {
            (_, FailedRows::None) | (FailedRows::All, _) => true,
            (FailedRows::FirstPerTask(kept), FailedRows::FirstPerTask(n)) => kept >= n,
            _ => false,
        }
    }
}

/// What a rollup holds besides the cube.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RollupNeeds {
    /// Sum the spans ([`Rollup::span_sums`]).
    pub spans: bool,
    pub failed: FailedRows,
}

impl RollupNeeds {
    /// The trials table alone.
    pub(crate) fn trials_only() -> RollupNeeds {
        RollupNeeds {
            spans: false,
            failed: FailedRows::None,
        }
    }

    pub(crate) fn covers(self, asked: RollupNeeds) -> bool {
        (self.spans || !asked.spans) && self.failed.covers(asked.failed)
    }
}

/// A run rolled up: see the module docs.
pub(crate) struct Rollup {
    needs: RollupNeeds,
    /// The trials directory, for errors.
    dir: PathBuf,
    cube: Frame,
    span_sums: SpanSums,
    /// Final attempts that did not pass: trial id, variant, task, trial
    /// index and file, as many as `needs.failed` asked for.
    failed: Option<Frame>,
}

impl std::fmt::Debug for Rollup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rollup")
            .field("needs", &self.needs)
            .field("cube_rows", &self.cube.height())
            .finish_non_exhaustive()
    }
}

impl Rollup {
    /// Reads `tables` a batch of parts at a time, [`SUMMERS`] batches at
    /// once.
    pub(crate) fn of(tables: &RunTables, needs: RollupNeeds) -> Result<Rollup, AnalysisError> {
        let dir = tables.trials_dir();
        let reruns = tables.reruns()?.lazy();
        let batches = Batches {
            iter: Mutex::new(tables.part_batches(BATCH_FILES)),
            failed: AtomicBool::new(false),
        };
        let sum = || Sums::of_batches(&batches, &reruns, needs, tables);
        let parts: Vec<Sums> = std::thread::scope(|scope| {
            let others: Vec<_> = (1..SUMMERS).map(|_| scope.spawn(sum)).collect();
            let mut parts = vec![sum()];
            for other in others {
                match other.join() {
                    Ok(part) => parts.push(part),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            parts
                .into_iter()
                .collect::<Result<Vec<Sums>, AnalysisError>>()
        })?;
        let mut all = Sums::new(needs);
        for part in parts {
            all.add(part, dir)?;
        }
        let Sums {
            mut cubes,
            mut failed,
            span_sums,
            ..
        } = all;
        let failed = match needs.failed {
            FailedRows::None => None,
            _ => Some(match failed.finish(dir)? {
                Some(rows) => rows,
                None => Frame::collect(empty_failed(), dir, TRIALS_DIR)?,
            }),
        };
        let cube = cubes.finish(dir)?.ok_or_else(|| AnalysisError::NoTrials {
            dir: dir.to_path_buf(),
        })?;
        Ok(Rollup {
            needs,
            dir: dir.to_path_buf(),
            cube,
            span_sums,
            failed,
        })
    }

    pub(crate) fn needs(&self) -> RollupNeeds {
        self.needs
    }

    /// The cube: one row per combination of [`KEYS`], [`WEIGHT`]
    /// trials in it, their figures summed under their own column names
    /// (tokens, counts, `tampered` as a count) and their cost in [`PICO`].
    /// Aggregate it with [`weight`] and [`count_where`].
    pub(crate) fn cube(&self) -> LazyFrame {
        self.cube.lazy()
    }

    pub(crate) fn has_trials(&self) -> bool {
        self.cube.height() > 0
    }

    /// Empty unless asked for ([`RollupNeeds::spans`]).
    pub(crate) fn span_sums(&self) -> &SpanSums {
        &self.span_sums
    }

    /// The failed trials kept ([`RollupNeeds::failed`]): trial id, variant,
    /// task, trial index and [`FILE_PATH`]; `None` when none were asked for.
    pub(crate) fn failed(&self) -> Option<LazyFrame> {
        self.failed.as_ref().map(Frame::lazy)
    }

    /// Final attempts that did not pass, in the whole run.
    pub(crate) fn failed_total(&self) -> Result<u64, AnalysisError> {
        let lazy = self.cube().select([count_where(
            col(IS_FINAL).and(col(col::OUTCOME).neq(lit(TrialOutcome::Passed.as_str()))),
        )
        .alias(WEIGHT)]);
        let frame = Frame::collect(lazy, &self.dir, TRIALS_DIR)?;
        Ok(frame.u64s(WEIGHT)?.first().copied().unwrap_or(0))
    }
}

/// The batches the summers take from, one at a time.
struct Batches<I> {
    iter: Mutex<I>,
    /// A summer failed.
    failed: AtomicBool,
}

/// What one summer gathered from the batches it took: the cube's rows,
/// the failed rows kept and the spans' sums.
struct Sums {
    needs: RollupNeeds,
    cubes: Held,
    failed: Held,
    span_sums: SpanSums,
}

impl Sums {
    fn new(needs: RollupNeeds) -> Sums {
        Sums {
            needs,
            cubes: Held::new(Reduce::Cube),
            failed: Held::new(Reduce::Failed(needs.failed)),
            span_sums: SpanSums::default(),
        }
    }

    /// Takes batches from `batches` until none is left.
    fn of_batches(
        batches: &Batches<impl Iterator<Item = Result<PartBatch, AnalysisError>>>,
        reruns: &LazyFrame,
        needs: RollupNeeds,
        tables: &RunTables,
    ) -> Result<Sums, AnalysisError> {
        let mut sums = Sums::new(needs);
        loop {
            // Once a summer failed, the others stop: its error is the
            // report's.
            if batches.failed.load(Ordering::Relaxed) {
                return Ok(sums);
            }
            let next = batches
                .iter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .next();
            let Some(batch) = next else {
                return Ok(sums);
            };
            if let Err(error) = batch.and_then(|batch| sums.add_batch(batch, reruns, tables)) {
                batches.failed.store(true, Ordering::Relaxed);
                return Err(error);
            }
        }
    }

    fn add_batch(
        &mut self,
        batch: PartBatch,
        reruns: &LazyFrame,
        tables: &RunTables,
    ) -> Result<(), AnalysisError> {
        let dir = tables.trials_dir();
        let marked = attempts::mark(batch.trials, reruns.clone()).select(marked_columns());
        let marked = Frame::collect(marked, dir, TRIALS_DIR)?;
        self.cubes.push(
            Frame::collect(cube_of(marked.lazy()), dir, TRIALS_DIR)?,
            dir,
        )?;
        if let Some(rows) = failed_rows(marked.lazy(), self.needs.failed) {
            self.failed
                .push(Frame::collect(rows, dir, TRIALS_DIR)?, dir)?;
        }
        if self.needs.spans
            && let Some(spans) = batch.spans
        {
            self.span_sums
                .extend(SpanSums::of(spans, marked.lazy(), tables.spans_dir())?);
        }
        Ok(())
    }

    /// `other`'s rows and sums added to these.
    fn add(&mut self, other: Sums, dir: &Path) -> Result<(), AnalysisError> {
        for (held, mut theirs) in [
            (&mut self.cubes, other.cubes),
            (&mut self.failed, other.failed),
        ] {
            if let Some(rows) = theirs.finish(dir)? {
                held.push(rows, dir)?;
            }
        }
        self.span_sums.extend(other.span_sums);
        Ok(())
    }
}

/// Trials a cube row stands for, summed over a group of rows.
pub(crate) fn weight() -> Expr {
    col(WEIGHT).sum()
}

/// Trials of the cube rows where `condition` (on [`KEYS`]) holds,
/// summed over a group of rows.
pub(crate) fn count_where(condition: Expr) -> Expr {
    when(condition).then(col(WEIGHT)).otherwise(lit(0u64)).sum()
}

/// What the cube groups by: everything the aggregates group or filter by.
const KEYS: [&str; 9] = [
    col::VARIANT,
    col::MODEL,
    col::TASK,
    col::OUTCOME,
    col::STOP_REASON,
    IS_FINAL,
    IS_SCORED,
    RERUN,
    COST_KNOWN,
];

/// The columns a cube row sums.
fn summed() -> Vec<String> {
    let mut names: Vec<String> = [
        WEIGHT,
        col::TOTAL_TOKENS,
        col::INPUT_TOKENS,
        col::OUTPUT_TOKENS,
        col::TAMPERED,
        PICO,
    ]
    .map(String::from)
    .to_vec();
    names.extend(counts::names().map(String::from));
    names
}

/// Marked trials rows rolled up.
fn cube_of(marked: LazyFrame) -> LazyFrame {
    let u64_sum = |name: &str| col(name).cast(DataType::UInt64).sum().alias(name);
    let mut sums = vec![
        len().cast(DataType::UInt64).alias(WEIGHT),
        u64_sum(col::TOTAL_TOKENS),
        u64_sum(col::INPUT_TOKENS),
        u64_sum(col::OUTPUT_TOKENS),
        u64_sum(col::TAMPERED),
        picodollars(col(col::COST_USD)).sum().alias(PICO),
    ];
    sums.extend(counts::names().map(u64_sum));
    marked
        .with_columns([
            col(col::TRIAL_ATTEMPT).gt(lit(0u32)).alias(RERUN),
            col(col::COST_USD).is_not_null().alias(COST_KNOWN),
        ])
        .group_by(KEYS.map(col))
        .agg(sums)
}

/// Cube rows summed again, one per combination of keys.
fn resum(cube: LazyFrame) -> LazyFrame {
    let sums: Vec<Expr> = summed()
        .iter()
        .map(|name| col(name.as_str()).sum())
        .collect();
    cube.group_by(KEYS.map(col)).agg(sums)
}

/// How [`Held`] rows are reduced.
#[derive(Debug, Clone, Copy)]
enum Reduce {
    /// Cube rows summed into a row per combination of keys ([`resum`]).
    Cube,
    /// Failed trials cut to those a listing asks for.
    Failed(FailedRows),
}

impl Reduce {
    fn apply(self, rows: LazyFrame) -> LazyFrame {
        match self {
            Reduce::Cube => resum(rows),
            Reduce::Failed(FailedRows::FirstPerTask(n)) if n > 0 => first_per_task(rows, n),
            Reduce::Failed(_) => rows,
        }
    }
}

/// Rows from the batches read so far (a cube's, or failed trials'),
/// reduced again when they grow: a cube summed into a row per combination,
/// failed trials cut to the first of each variant and task.
struct Held {
    frames: Vec<Frame>,
    /// Rows pushed since the last reduction.
    new_rows: usize,
    reduce: Reduce,
}

impl Held {
    fn new(reduce: Reduce) -> Held {
        Held {
            frames: Vec::new(),
            new_rows: 0,
            reduce,
        }
    }

    fn push(&mut self, rows: Frame, dir: &Path) -> Result<(), AnalysisError> {
        self.new_rows += rows.height();
        self.frames.push(rows.compacted()?);
        if self.new_rows > NEW_ROWS_HELD
            && let Some(reduced) = self.finish(dir)?
        {
            self.new_rows = 0;
            self.frames = vec![reduced];
        }
        Ok(())
    }

    /// Everything held, reduced; `None` before the first batch.
    fn finish(&mut self, dir: &Path) -> Result<Option<Frame>, AnalysisError> {
        let mut frames = std::mem::take(&mut self.frames);
        if frames.len() <= 1 {
            return Ok(frames.pop());
        }
        let Some(all) = concat_frames(&frames, dir)? else {
            return Ok(None);
        };
        Frame::collect(self.reduce.apply(all), dir, TRIALS_DIR)?
            .compacted()
            .map(Some)
    }
}

/// The failed final attempts of `marked` that `rows` asks for.
fn failed_rows(marked: LazyFrame, rows: FailedRows) -> Option<LazyFrame> {
    let failed = marked
        .filter(col(IS_FINAL).and(col(col::OUTCOME).neq(lit(TrialOutcome::Passed.as_str()))))
        .select(failed_columns());
    failed_rows_of(failed, rows)
}

/// The rows of `failed` (with [`failed_columns`]) that `rows` asks for.
fn failed_rows_of(failed: LazyFrame, rows: FailedRows) -> Option<LazyFrame> {
    match rows {
        // Polars' group-wise head(0) yields a row of nulls, not no rows.
        FailedRows::None | FailedRows::FirstPerTask(0) => None,
        FailedRows::All => Some(failed),
        FailedRows::FirstPerTask(n) => Some(first_per_task(failed, n)),
    }
}

fn failed_columns() -> [Expr; 5] {
    [
        col::TRIAL_ID,
        col::VARIANT,
        col::TASK,
        col::TRIAL_INDEX,
        FILE_PATH,
    ]
    .map(col)
}

/// The first `n` rows of each variant and task by trial index, sorted so.
pub(crate) fn first_per_task(failed: LazyFrame, n: usize) -> LazyFrame {
    failed
        .sort(
            [col::VARIANT, col::TASK, col::TRIAL_INDEX],
            SortMultipleOptions::default(),
        )
        .group_by_stable([col(col::VARIANT), col(col::TASK)])
        .head(Some(n))
}

/// No failed rows, with the columns failed rows have.
fn empty_failed() -> LazyFrame {
    let schema = Schema::from_iter([
        Field::new(col::TRIAL_ID.into(), DataType::String),
        Field::new(col::VARIANT.into(), DataType::String),
        Field::new(col::TASK.into(), DataType::String),
        Field::new(col::TRIAL_INDEX.into(), DataType::UInt32),
        Field::new(FILE_PATH.into(), DataType::String),
    ]);
    DataFrame::empty_with_schema(&schema).lazy()
}

/// `frames` one under the other; `None` for no frames.
fn concat_frames(frames: &[Frame], dir: &Path) -> Result<Option<LazyFrame>, AnalysisError> {
    if frames.is_empty() {
        return Ok(None);
    }
    let lazies: Vec<LazyFrame> = frames.iter().map(Frame::lazy).collect();
    concat(lazies, UnionArgs::default())
        .map(Some)
        .map_err(|source| AnalysisError::Polars {
            dir: dir.to_path_buf(),
            table: TRIALS_DIR,
            source,
        })
}
