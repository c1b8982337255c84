//! A run's tables, opened once for every query an analysis makes: listing a
//! thousand part files and reading their footers is done once, not per
//! aggregate.

use crate::attempts::{IS_FINAL, IS_SCORED};
use crate::frame::{FILE_PATH, Frame, parquet_files, union_schema};
use crate::rollup::{Rollup, RollupNeeds};
use crate::{AnalysisError, attempts, read_manifest, trace, trials};
use polars::prelude::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tack_trace::Manifest;
use tack_trace::schema::{SPANS_DIR, TRIALS_DIR, col};

/// The manifest and lazy scans of one run's trials and spans.
pub struct RunTables {
    run_dir: PathBuf,
    manifest: Manifest,
    trials_dir: PathBuf,
    trials_files: Vec<PathBuf>,
    /// The union of the trials files' columns.
    trials_schema: SchemaRef,
    /// Every trials row, columns added since the first traces filled in, and
    /// the file each row came from.
    trials: LazyFrame,
    spans_dir: PathBuf,
    /// The names of the spans files.
    span_files: HashSet<String>,
    /// `None` when no trial recorded a span.
    spans: Option<(LazyFrame, SchemaRef)>,
    /// [`RunTables::reruns`], read once.
    reruns: OnceLock<Frame>,
    /// [`RunTables::marked_frame`], read once for every reader of rows.
    marked: OnceLock<Frame>,
    /// [`RunTables::rollup`]: the latest, kept for the next reader whose
    /// needs it covers (the analysis and the cost table share one pass).
    rollup: Mutex<Option<Arc<Rollup>>>,
}

/// One batch of a run's parts ([`RunTables::part_batches`]).
pub(crate) struct PartBatch {
    /// The batch's trials rows, as [`RunTables::trials`] has them.
    pub trials: LazyFrame,
    /// Their spans; `None` when none of the batch's parts has spans.
    pub spans: Option<LazyFrame>,
}

impl std::fmt::Debug for RunTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTables")
            .field("run_dir", &self.run_dir)
            .finish_non_exhaustive()
    }
}

impl RunTables {
    /// Reads `run_dir/manifest.json` and lists the run's Parquet files. A
    /// run without a finished trial is an error.
    pub fn open(run_dir: &Path) -> Result<RunTables, AnalysisError> {
        RunTables::open_files(run_dir, None)
    }

    /// [`RunTables::open`] over the parts named only (file names, alike in
    /// every table): a few new parts of a running run read without listing
    /// and scanning the others.
    pub fn open_parts(run_dir: &Path, parts: &[String]) -> Result<RunTables, AnalysisError> {
        RunTables::open_files(run_dir, Some(parts))
    }

    fn open_files(run_dir: &Path, parts: Option<&[String]>) -> Result<RunTables, AnalysisError> {
        let manifest = read_manifest(run_dir)?;
        let listed = |dir: &Path| match parts {
            Some(parts) => Ok(existing(dir, parts)),
            None => parquet_files(dir),
        };
        let trials_dir = run_dir.join(TRIALS_DIR);
        let trials_files = listed(&trials_dir)?;
        if trials_files.is_empty() {
            return Err(AnalysisError::NoTrials { dir: trials_dir });
        }
        let trials_schema = union_schema(&trials_files)?;
        let trials = trials::scan_as(&trials_dir, &trials_files, &trials_schema, true)?;
        let spans_dir = run_dir.join(SPANS_DIR);
        let span_paths = listed(&spans_dir)?;
        let spans = if span_paths.is_empty() {
            None
        } else {
            let schema = union_schema(&span_paths)?;
            let scan = trace::scan_spans(&spans_dir, &span_paths, &schema)?;
            Some((scan, schema))
        };
        let span_files = span_paths
            .iter()
            .filter_map(|path| path.file_name()?.to_str().map(String::from))
            .collect();
        Ok(RunTables {
            run_dir: run_dir.to_path_buf(),
            manifest,
            trials_dir,
            trials_files,
            trials_schema,
            trials,
            spans_dir,
            span_files,
            spans,
            reruns: OnceLock::new(),
            marked: OnceLock::new(),
            rollup: Mutex::new(None),
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    pub(crate) fn trials_dir(&self) -> &Path {
        &self.trials_dir
    }

    pub(crate) fn spans_dir(&self) -> &Path {
        &self.spans_dir
    }

    /// Every row of the trials table, every attempt.
    pub(crate) fn trials(&self) -> LazyFrame {
        self.trials.clone()
    }

    /// The planned trials run more than once ([`attempts::reruns`]):
    /// read on first use and kept.
    pub(crate) fn reruns(&self) -> Result<&Frame, AnalysisError> {
        if let Some(frame) = self.reruns.get() {
            return Ok(frame);
        }
        let frame = Frame::collect(
            attempts::reruns(self.trials()),
            &self.trials_dir,
            TRIALS_DIR,
        )?;
        Ok(self.reruns.get_or_init(|| frame))
    }

    /// [`RunTables::trials`] with which rows count ([`attempts::mark`]).
    pub(crate) fn marked_trials(&self) -> Result<LazyFrame, AnalysisError> {
        Ok(attempts::mark(self.trials(), self.reruns()?.lazy()))
    }

    /// Every attempt's narrow columns, marked ([`attempts::mark`]), with the
    /// file each row came from: collected on first use and kept, for the
    /// readers that need a row per trial (the trials browser). The run's
    /// figures come from [`RunTables::rollup`], which holds no such rows.
    pub(crate) fn marked_frame(&self) -> Result<&Frame, AnalysisError> {
        if let Some(frame) = self.marked.get() {
            return Ok(frame);
        }
        let lazy = self.marked_trials()?.select(marked_columns());
        let frame = Frame::collect(lazy, &self.trials_dir, TRIALS_DIR)?;
        Ok(self.marked.get_or_init(|| frame))
    }

    /// [`RunTables::marked_frame`] if it has been read.
    pub(crate) fn marked_if_read(&self) -> Option<&Frame> {
        self.marked.get()
    }

    /// The run rolled up ([`Rollup`]) with at least what `needs` asks for:
    /// the one read before when it holds that, else read now.
    pub(crate) fn rollup(&self, needs: RollupNeeds) -> Result<Arc<Rollup>, AnalysisError> {
        // A reader that panicked left at worst no rollup: read it again.
        let mut kept = self.rollup.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rollup) = kept.as_ref()
            && rollup.needs().covers(needs)
        {
            return Ok(rollup.clone());
        }
        let rollup = Arc::new(Rollup::of(self, needs)?);
        *kept = Some(rollup.clone());
        Ok(rollup)
    }

    /// The failed trials rows the last rollup kept (trial id, variant,
    /// task, trial index and file), if any.
    pub(crate) fn kept_failed(&self) -> Option<LazyFrame> {
        let kept = self.rollup.lock().unwrap_or_else(|e| e.into_inner());
        kept.as_ref()?.failed()
    }

    /// The run's parts, `files` trials files at a time, each batch's trials
    /// with the spans of the same parts.
    pub(crate) fn part_batches(
        &self,
        files: usize,
    ) -> impl Iterator<Item = Result<PartBatch, AnalysisError>> + '_ {
        self.trials_files.chunks(files.max(1)).map(|batch| {
            let trials = trials::scan_as(&self.trials_dir, batch, &self.trials_schema, true)?;
            let spans = match &self.spans {
                Some((_, schema)) => {
                    let names: Vec<PathBuf> = batch
                        .iter()
                        .filter_map(|path| path.file_name()?.to_str())
                        .filter(|name| self.span_files.contains(*name))
                        .map(|name| self.spans_dir.join(name))
                        .collect();
                    if names.is_empty() {
                        None
                    } else {
                        Some(trace::scan_spans(&self.spans_dir, &names, schema)?)
                    }
                }
                None => None,
            };
            Ok(PartBatch { trials, spans })
        })
    }

    pub(crate) fn spans(&self) -> Option<LazyFrame> {
        self.spans.as_ref().map(|(scan, _)| scan.clone())
    }

    /// The trials rows in `files` (names of trials files), or `None` when
    /// none of those files exists: a few trials' rows without a scan of the
    /// whole table.
    pub(crate) fn trials_in(&self, files: &[String]) -> Result<Option<LazyFrame>, AnalysisError> {
        match existing(&self.trials_dir, files) {
            paths if paths.is_empty() => Ok(None),
            paths => {
                trials::scan_as(&self.trials_dir, &paths, &self.trials_schema, false).map(Some)
            }
        }
    }

    /// The spans of the trials in `files` (names of trials files; the
    /// spans file of the same name holds their spans), or `None` when none
    /// of those files exists.
    pub(crate) fn spans_in(&self, files: &[String]) -> Result<Option<LazyFrame>, AnalysisError> {
        let Some((_, schema)) = &self.spans else {
            return Ok(None);
        };
        match existing(&self.spans_dir, files) {
            paths if paths.is_empty() => Ok(None),
            paths => trace::scan_spans(&self.spans_dir, &paths, schema).map(Some),
        }
    }
}

/// The files of `dir` named in `files` that exist, sorted, each once.
fn existing(dir: &Path, files: &[String]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = files
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The trials columns [`RunTables::marked_frame`] and the rollup's batches
/// keep: what the aggregates group and sum, the failed listing picks by and
/// the spans join on, not the text columns.
pub(crate) fn marked_columns() -> Vec<Expr> {
    let mut columns = trials::figure_columns();
    // Duration: the trials browser sorts by it; the attempt: a summary
    // counts the trials decided by a later attempt.
    columns.extend(
        [
            col::DURATION_MS,
            col::TRIAL_ATTEMPT,
            IS_FINAL,
            IS_SCORED,
            FILE_PATH,
        ]
        .map(col),
    );
    columns
}

/// The file name of a path from [`crate::frame::FILE_PATH`].
pub(crate) fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}
