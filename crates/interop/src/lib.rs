//! The field's formats, written from tack's traces: Harbor's agent
//! trajectories (ATIF, the Agent Trajectory Interchange Format), one per
//! trial ([`atif`]), and OpenTelemetry traces sent over OTLP ([`otlp`]).

mod answers;
pub mod atif;
pub mod otlp;

use std::path::{Path, PathBuf};

/// Why an export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    #[error(transparent)]
    Analysis(#[from] tack_analysis::AnalysisError),
    #[error("cannot read the traces of {run_dir}: {source}")]
    Trace {
        run_dir: PathBuf,
        #[source]
        source: tack_trace::TraceError,
    },
    #[error(
        "{path} already exists and is not empty; pass another --out or remove it, so that no earlier export is mixed in"
    )]
    OutExists { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("trial {trial_id}: {message}")]
    Encode { trial_id: String, message: String },
    #[error("{0}")]
    Otlp(String),
}

/// Every trial id the run holds (every attempt), sorted: the order exports
/// are written in.
pub(crate) fn trial_ids(run_dir: &Path) -> Result<Vec<String>, InteropError> {
    let mut ids: Vec<String> = tack_trace::stored_trial_ids(run_dir)
        .map_err(|source| InteropError::Trace {
            run_dir: run_dir.to_path_buf(),
            source,
        })?
        .into_iter()
        .collect();
    ids.sort();
    Ok(ids)
}

/// The variants whose answers come from a built-in simulated model: every
/// export says so of their trials.
pub(crate) fn simulated_variants(manifest: &tack_trace::Manifest) -> Vec<String> {
    manifest
        .variants
        .iter()
        .filter(|v| v.simulated)
        .map(|v| v.name.clone())
        .collect()
}
