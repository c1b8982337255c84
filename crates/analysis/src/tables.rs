//! A run's tables, opened once for every query an analysis makes: listing a
//! thousand part files and reading their footers is done once, not per
//! aggregate.

use crate::attempts::{IS_FINAL, IS_SCORED};
use crate::frame::{FILE_PATH, Frame, parquet_files};
use crate::span_sums::SpanSums;
use crate::{AnalysisError, attempts, read_manifest, trace, trials};
use polars::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tack_trace::Manifest;
use tack_trace::schema::{SPANS_DIR, TRIALS_DIR, col};

/// The manifest and lazy scans of one run's trials and spans.
pub struct RunTables {
    run_dir: PathBuf,
    manifest: Manifest,
    trials_dir: PathBuf,
    /// Every trials row, columns added since the first traces filled in, and
    /// the file each row came from.
    trials: LazyFrame,
    spans_dir: PathBuf,
    /// `None` when no trial recorded a span.
    spans: Option<LazyFrame>,
    /// [`RunTables::marked_frame`], read once for every aggregate.
    marked: OnceLock<Frame>,
    /// [`RunTables::span_sums`], one pass over the spans for the analysis
    /// and the cost table alike.
    span_sums: OnceLock<SpanSums>,
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
        let files = listed(&trials_dir)?;
        if files.is_empty() {
            return Err(AnalysisError::NoTrials { dir: trials_dir });
        }
        let trials = trials::scan(&trials_dir, &files, true)?;
        let spans_dir = run_dir.join(SPANS_DIR);
        let span_files = listed(&spans_dir)?;
        let spans = if span_files.is_empty() {
            None
        } else {
            Some(trace::scan_spans(&spans_dir, &span_files)?)
        };
        Ok(RunTables {
            run_dir: run_dir.to_path_buf(),
            manifest,
            trials_dir,
            trials,
            spans_dir,
            spans,
            marked: OnceLock::new(),
            span_sums: OnceLock::new(),
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

    /// [`RunTables::trials`] with which rows count ([`attempts::mark`]).
    pub(crate) fn marked_trials(&self) -> Result<LazyFrame, AnalysisError> {
        attempts::mark(self.trials()).map_err(|source| AnalysisError::Polars {
            dir: self.trials_dir.clone(),
            table: TRIALS_DIR,
            source,
        })
    }

    /// Every attempt's narrow columns, marked ([`attempts::mark`]), with the
    /// file each row came from: collected on first use and kept, so the
    /// aggregates, the cost table and finding a failed trial's files read
    /// the trials table once between them.
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

    /// The spans' sums per variant, model, task, scoring and fault kind;
    /// computed on first use and kept.
    pub(crate) fn span_sums(&self) -> Result<&SpanSums, AnalysisError> {
        if let Some(sums) = self.span_sums.get() {
            return Ok(sums);
        }
        let sums = match self.spans() {
            Some(spans) => SpanSums::of(spans, self.marked_frame()?.lazy(), &self.spans_dir)?,
            None => SpanSums::default(),
        };
        Ok(self.span_sums.get_or_init(|| sums))
    }

    pub(crate) fn spans(&self) -> Option<LazyFrame> {
        self.spans.clone()
    }

    /// The trials rows in `files` (names of trials files), or `None` when
    /// none of those files exists: a few trials' rows without a scan of the
    /// whole table.
    pub(crate) fn trials_in(&self, files: &[String]) -> Result<Option<LazyFrame>, AnalysisError> {
        match existing(&self.trials_dir, files) {
            paths if paths.is_empty() => Ok(None),
            paths => trials::scan(&self.trials_dir, &paths, false).map(Some),
        }
    }

    /// The spans of the trials in `files` (names of trials files; the
    /// spans file of the same name holds their spans), or `None` when none
    /// of those files exists.
    pub(crate) fn spans_in(&self, files: &[String]) -> Result<Option<LazyFrame>, AnalysisError> {
        match existing(&self.spans_dir, files) {
            paths if paths.is_empty() => Ok(None),
            paths => trace::scan_spans(&self.spans_dir, &paths).map(Some),
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

/// The trials columns [`RunTables::marked_frame`] keeps: what the
/// aggregates and the cost table group and sum, not the text columns.
fn marked_columns() -> Vec<Expr> {
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
