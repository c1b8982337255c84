//! Traces: every trial of a run recorded as Parquet under `traces/<run-id>/`.
//!
//! It must not depend on `tack-agent`, `tack-harness`, `tack-analysis` or
//! Polars: it stores events and reads them back as Arrow.
//!
//! Layout: `manifest.json`, and three tables as directories of Parquet part
//! files (`trials/`, `spans/`, `messages/`, see [`schema`]), each part holding
//! up to a thousand trials; messages are stored once per run by content
//! address. A trial is journalled event by event to
//! `journal/<trial-id>.jsonl` while it runs; its rows go into the open part
//! when it ends, and its journal is removed once that part is written under a
//! temporary name, fsynced and renamed. A Parquet file is unreadable until its
//! footer is written, so a crash loses nothing: the journals remain for
//! [`recover_journals`].

mod compact;
mod cores;
mod drift;
mod error;
mod fingerprint;
mod fsutil;
mod liveness;
mod manifest;
mod merge;
mod parts;
mod progress;
mod reader;
mod recorded;
mod rows;
mod runs;
pub mod schema;
mod transcript;
mod writer;

pub use compact::{Compaction, compact, finish_pending};
pub use cores::map_on_cores;
pub use drift::{
    EnvironmentDrift, EnvironmentKey, RunDrift, Side, TaskDrift, TaskPart, VariantChange,
    VariantDrift, drift, variant_drift,
};
pub use error::{TableError, TraceError};
pub use fingerprint::{
    EnvironmentFingerprint, RunFingerprint, TaskFingerprint, VariantFingerprint, answered_models,
};
pub use liveness::{CLAIM_FILE, PID_FILE, STALE_AFTER, Writer, run_in_progress, run_writer};
pub use manifest::{
    HostInfo, MANIFEST_SCHEMA_VERSION, Manifest, Resume, RunStatus, Shard, SuiteInfo, VariantInfo,
};
pub use merge::{MergeError, ShardRun, ShardRuns};
pub use parts::{PartLimits, adopt_parts};
pub use progress::{JournaledTrial, journaled_trials};
pub use reader::{
    Columns, count_rows, read_table, read_table_files, read_trial_rows, read_trial_rows_in,
    table_files, trial_ids_in,
};
pub use recorded::{
    RecordedAnswers, RecordedTrial, recorded_answers, recorded_trials, trial_identity,
};
pub use runs::{RunsError, find_run, no_trial, resumable_run, run_ids, trial_not_named};
pub use transcript::{
    TranscriptMessage, legacy_message_id, trial_transcript, trial_transcripts, trial_transcripts_in,
};
pub use writer::{RunWriter, TrialRecorder, recover_journals, stored_trial_ids};

#[cfg(test)]
pub(crate) mod testing {
    /// A whole manifest for a unit test: the version-1 fixture, read as
    /// tack reads old runs, under `run_id`.
    pub(crate) fn manifest(run_id: &str) -> crate::Manifest {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/manifest-v1.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let mut manifest: crate::Manifest = serde_json::from_str(&text).unwrap();
        manifest.run_id = run_id.to_string();
        manifest
    }
}
