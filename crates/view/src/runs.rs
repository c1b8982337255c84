//! The runs `tack view` shows: every run directory under the roots it was
//! given (a traces directory, or a run's own directory), found again on
//! every request, so a run that starts while the viewer runs appears.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tack_trace::schema::JOURNAL_DIR;
use tack_trace::{Manifest, RunStatus};

/// A run found under a root.
#[derive(Debug, Clone)]
pub struct FoundRun {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

/// What the runs list shows of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunLine {
    pub id: String,
    pub suite: String,
    pub variants: Vec<String>,
    pub started_at: String,
    /// `running`, `finished`, `interrupted`, `shard i/n` or `merged`.
    pub status: String,
    /// The status's kind, without the shard's numbers (a style class).
    pub state: &'static str,
    pub planned: u64,
    /// Trials finished so far: recorded in the run's tables, or still in
    /// its journals (a running run's latest).
    pub finished: u64,
    pub dir: String,
}

/// Every run under `roots`, newest first. A root that is itself a run
/// directory is that run; a root that cannot be read holds none.
pub fn find(roots: &[PathBuf]) -> Vec<FoundRun> {
    let mut found = Vec::new();
    for root in roots {
        if let Ok(manifest) = Manifest::read(root) {
            found.push(FoundRun {
                dir: root.clone(),
                manifest,
            });
            continue;
        }
        for id in tack_trace::run_ids(root) {
            let dir = root.join(&id);
            if let Ok(manifest) = Manifest::read(&dir) {
                found.push(FoundRun { dir, manifest });
            }
        }
    }
    found.sort_by(|a, b| {
        (&b.manifest.started_at, &b.manifest.run_id)
            .cmp(&(&a.manifest.started_at, &a.manifest.run_id))
    });
    found.dedup_by(|a, b| a.manifest.run_id == b.manifest.run_id);
    found
}

impl FoundRun {
    pub fn line(&self) -> RunLine {
        let m = &self.manifest;
        let (state, status) = match (&m.shard, m.merged_from.is_empty(), m.status) {
            (_, _, RunStatus::Running) => ("running", "running".to_string()),
            (Some(shard), _, _) => ("shard", format!("shard {}/{}", shard.index, shard.count)),
            (None, false, _) => ("merged", "merged".to_string()),
            (None, true, RunStatus::Finished) => ("finished", "finished".to_string()),
            (None, true, RunStatus::Interrupted) => ("interrupted", "interrupted".to_string()),
        };
        let planned = m.variants.len() as u64 * m.tasks.len() as u64 * u64::from(m.trials_per_task);
        RunLine {
            id: m.run_id.clone(),
            suite: m.suite.name.clone(),
            variants: m.variants.iter().map(|v| v.name.clone()).collect(),
            started_at: m.started_at.clone(),
            status,
            state,
            planned,
            finished: finished_trials(&self.dir),
            dir: self.dir.display().to_string(),
        }
    }
}

/// Trials that have finished in `dir`: those recorded in its tables and
/// those whose end is in a journal not yet compacted into them.
fn finished_trials(dir: &Path) -> u64 {
    let recorded = tack_trace::recorded_trials(dir).map_or(0, |ids| ids.len() as u64);
    let journaled = std::fs::read_dir(dir.join(JOURNAL_DIR))
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| ends_finished(&entry.path()))
                .count() as u64
        })
        .unwrap_or(0);
    recorded + journaled
}

/// Whether a trial's journal ends with its `trial_finished` event, the last
/// line a finished trial writes: only the file's tail is read, so a list
/// of a running run's journals stays cheap whatever their length.
fn ends_finished(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 16 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let length = file.metadata().map_or(0, |m| m.len());
    if file
        .seek(SeekFrom::Start(length.saturating_sub(TAIL)))
        .is_err()
    {
        return false;
    }
    let mut tail = Vec::new();
    if file.read_to_end(&mut tail).is_err() {
        return false;
    }
    let tail = String::from_utf8_lossy(&tail);
    tail.trim_end()
        .rsplit('\n')
        .next()
        .is_some_and(|last| last.contains("\"type\":\"trial_finished\""))
}
