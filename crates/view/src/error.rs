//! What goes wrong serving the viewer, each with what to do about it.

use std::path::PathBuf;

use tack_analysis::AnalysisError;

/// A request that cannot be answered, or a viewer that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("no run `{run}` under {roots}; the runs list (/) shows every run found")]
    NoSuchRun { run: String, roots: String },

    #[error("`{value}` is not a side to compare: write RUN/VARIANT, as the compare form does")]
    BadSide { value: String },

    #[error("{field}: {message}")]
    BadQuery {
        field: &'static str,
        message: String,
    },

    #[error(transparent)]
    Compare(#[from] tack_analysis::compare::CompareError),

    #[error("reading run {}: {source}", dir.display())]
    Analysis { dir: PathBuf, source: AnalysisError },

    #[error("rendering {what}: {source}")]
    Render {
        what: &'static str,
        source: tack_report::ReportError,
    },

    #[error("rendering {template}: {source}")]
    Template {
        template: &'static str,
        source: minijinja::Error,
    },

    #[error("cannot listen on {addr}: {source}; pick another with --port, or 0 for any free port")]
    Listen {
        addr: String,
        source: std::io::Error,
    },

    #[error("cannot make an access token from /dev/urandom: {source}")]
    Token { source: std::io::Error },
}

impl ViewError {
    /// The HTTP status that answers this error: the user's request (404,
    /// 400) or the viewer's own trouble (500).
    pub fn status(&self) -> u16 {
        match self {
            ViewError::NoSuchRun { .. }
            | ViewError::Analysis {
                source: AnalysisError::TrialNotFound { .. },
                ..
            } => 404,
            ViewError::BadSide { .. }
            | ViewError::BadQuery { .. }
            | ViewError::Compare(_)
            | ViewError::Analysis {
                source: AnalysisError::InvalidTrialId { .. },
                ..
            } => 400,
            ViewError::Analysis { .. }
            | ViewError::Render { .. }
            | ViewError::Template { .. }
            | ViewError::Listen { .. }
            | ViewError::Token { .. } => 500,
        }
    }
}
