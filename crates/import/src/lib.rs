//! Turns other tools' evaluation logs into tack runs, so `tack report`,
//! `tack compare` and `tack query` read months of existing results like runs
//! tack made itself. One module per source format; each converts to the
//! event vocabulary of `tack_protocol` and writes through `tack_trace`, so an
//! imported trial is stored exactly as a native one. `harbor` reads task
//! directories (not logs) to say what of them tack can reproduce.
//!
//! It must not depend on `tack-runner`, `tack-harness` or `tack-analysis`: an
//! import is stored exactly as `tack-trace` stores a native run.

mod beneath;
pub mod harbor;
pub mod harbor_job;
pub mod inspect;
mod summary;

pub use summary::{harbor_job_summary, harbor_summary, inspect_summary};

use std::path::PathBuf;

/// Why a log could not be imported at all (a sample that cannot be
/// converted is reported as skipped instead, and the rest go on).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("could not read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a readable Inspect AI log: {source}")]
    NotALog {
        path: PathBuf,
        source: inspect::LogError,
    },
    #[error(
        "{path} cannot be read as a Harbor job ({reason}); pass the job directory Harbor wrote (it holds result.json and a directory per trial)"
    )]
    NotAHarborJob { path: PathBuf, reason: String },
    #[error("{log} was already imported into {run_dir}; remove that directory to import it again")]
    AlreadyImported { log: PathBuf, run_dir: PathBuf },
    #[error("could not write the run for {log}: {source}")]
    Trace {
        log: PathBuf,
        source: tack_trace::TraceError,
    },
}

impl ImportError {
    /// The input itself is at fault (missing, not a log): the user must
    /// pass another file. Otherwise writing the run failed.
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            ImportError::Io { .. }
                | ImportError::NotALog { .. }
                | ImportError::NotAHarborJob { .. }
                | ImportError::AlreadyImported { .. }
        )
    }
}
