//! Traces: every trial of a run recorded as Parquet under `traces/<run-id>/`.
//!
//! Layout: `manifest.json`, and three tables as directories of per-trial
//! Parquet files (`trials/`, `spans/`, `messages/`, see [`schema`]). A trial is
//! journalled event by event to `journal/<trial-id>.jsonl` while it runs, then
//! written to Parquet under a temporary name and renamed when it ends: a
//! Parquet file is unreadable until its footer is written, so a crash costs at
//! most the trials still running, and their journals remain for
//! [`recover_journals`].

mod drift;
mod error;
mod fingerprint;
mod fsutil;
mod manifest;
mod reader;
mod recorded;
mod rows;
pub mod schema;
mod writer;

pub use drift::{
    EnvironmentDrift, EnvironmentKey, RunDrift, Side, TaskDrift, TaskPart, VariantChange,
    VariantDrift, drift, variant_drift,
};
pub use error::TraceError;
pub use fingerprint::{
    EnvironmentFingerprint, RunFingerprint, TaskFingerprint, VariantFingerprint, answered_models,
};
pub use manifest::{
    HostInfo, MANIFEST_SCHEMA_VERSION, Manifest, Resume, RunStatus, Shard, SuiteInfo, VariantInfo,
};
pub use reader::{count_rows, read_table, read_table_files, table_files};
pub use recorded::{RecordedAnswers, recorded_answers, trial_identity};
pub use writer::{RunWriter, TrialRecorder, recover_journals, run_in_progress};
