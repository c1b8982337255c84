use std::path::{Path, PathBuf};

use tack_trace::TraceError;

/// What can go wrong storing or fetching a run. Each message names the URL
/// or file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A location that is not one tack can use.
    #[error("{location}: {reason}")]
    Location { location: String, reason: String },

    // The store's error is shown in the message, not chained as a source:
    // its own text already carries its causes.
    #[error("{url}: could not set up the {service} client: {error}; {hint}")]
    Client {
        url: String,
        service: &'static str,
        error: Box<object_store::Error>,
        hint: &'static str,
    },

    /// The environment configures the store in a way it cannot work.
    #[error("{url}: {reason}")]
    Setup { url: String, reason: String },

    /// A request to the store failed. `detail` is the store's error,
    /// shortened (an XML error body becomes its code and message).
    #[error("{url}: could not {action}: {detail}; {hint}")]
    Remote {
        url: String,
        action: &'static str,
        detail: String,
        error: Box<object_store::Error>,
        hint: String,
        /// The bucket is missing or the credentials are refused: the user's
        /// to fix, not a failure of the store.
        usage: bool,
    },

    #[error(
        "{url} is not a run: it holds no manifest.json (the manifest is uploaded last, so a run still \
         running has none yet); name a run as <prefix>/<run-id>"
    )]
    NotARun { url: String },

    #[error("{url} already holds a run; choose a new run URL")]
    RunExists { url: String },

    #[error("{path} cannot be uploaded: {reason}")]
    LocalRun { path: PathBuf, reason: String },

    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("no directory for tack's cache: set XDG_CACHE_HOME or HOME")]
    NoCacheDir,

    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl StoreError {
    /// Whether the user named something wrong (exit 2) rather than tack or
    /// the store failing (exit 3).
    pub fn is_usage(&self) -> bool {
        if let StoreError::Remote { usage, .. } = self {
            return *usage;
        }
        matches!(
            self,
            StoreError::Location { .. }
                | StoreError::Setup { .. }
                | StoreError::Client { .. }
                | StoreError::NotARun { .. }
                | StoreError::RunExists { .. }
                | StoreError::LocalRun { .. }
                | StoreError::NoCacheDir
        )
    }

    pub(crate) fn io(path: &Path, error: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            error,
        }
    }
}
