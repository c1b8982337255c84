//! The runs `tack view` shows: every run directory under the roots it was
//! given (a traces directory, or a run's own directory), found again on
//! every request, so a run that starts while the viewer runs appears.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tack_protocol::TrialOutcome;
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
    /// The trials finished since the run's last part was written, from
    /// their journals, by variant.
    pub live: Vec<LiveVariant>,
    pub dir: String,
}

/// A variant's trials finished but not yet in a part.
#[derive(Debug, Clone, Serialize)]
pub struct LiveVariant {
    pub variant: String,
    pub finished: u64,
    pub passed: u64,
}

/// Every run under `roots`, newest first. A root that is itself a run
/// directory is that run; a root that cannot be read holds none.
pub fn find(roots: &[PathBuf]) -> Vec<FoundRun> {
    let mut found = all_runs(roots);
    found.dedup_by(|a, b| a.manifest.run_id == b.manifest.run_id);
    found
}

/// Runs under `roots` that another run of the same id hides (a copy of a
/// run, a baseline copied from `traces/`): each with the one shown. The
/// viewer names runs by id, so only the first found is shown.
pub fn hidden_duplicates(roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let found = all_runs(roots);
    let real = |run: &FoundRun| run.dir.canonicalize().unwrap_or_else(|_| run.dir.clone());
    let mut hidden = Vec::new();
    for (i, run) in found.iter().enumerate() {
        // The same directory reached from two roots is one run, not a copy.
        let first = found[..i]
            .iter()
            .find(|other| other.manifest.run_id == run.manifest.run_id && real(other) != real(run));
        if let Some(first) = first {
            hidden.push((run.dir.clone(), first.dir.clone()));
        }
    }
    hidden
}

/// Every run under `roots`, newest first, copies of one run included (in
/// the order of the roots).
fn all_runs(roots: &[PathBuf]) -> Vec<FoundRun> {
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
    found
}

impl FoundRun {
    /// The runs list's line, with `recorded` the planned trials whose
    /// final attempt is in the run's tables (from its cached summaries, so
    /// a reload does not read a big run's trial ids again).
    pub fn line(&self, recorded: u64) -> RunLine {
        let m = &self.manifest;
        // A run killed before it could say so still says `running`; its
        // writer is gone (reading it recovers its journals).
        let status = match m.status {
            RunStatus::Running if !tack_trace::run_in_progress(&self.dir) => RunStatus::Interrupted,
            status => status,
        };
        let (state, status) = match (&m.shard, m.merged_from.is_empty(), status) {
            (_, _, RunStatus::Running) => ("running", "running".to_string()),
            (Some(shard), _, _) => ("shard", format!("shard {}/{}", shard.index, shard.count)),
            (None, false, _) => ("merged", "merged".to_string()),
            (None, true, RunStatus::Finished) => ("finished", "finished".to_string()),
            (None, true, RunStatus::Interrupted) => ("interrupted", "interrupted".to_string()),
        };
        let planned = m.variants.len() as u64 * m.tasks.len() as u64 * u64::from(m.trials_per_task);
        let (finished, live) = finished_trials(&self.dir, recorded);
        RunLine {
            id: m.run_id.clone(),
            suite: m.suite.name.clone(),
            variants: m.variants.iter().map(|v| v.name.clone()).collect(),
            started_at: m.started_at.clone(),
            status,
            state,
            planned,
            finished,
            live,
            dir: self.dir.display().to_string(),
        }
    }
}

/// Trials finished in `dir`: `recorded` in its tables, and still only in
/// their journals, by variant (a running run's latest, with how many of
/// them passed).
fn finished_trials(dir: &Path, recorded: u64) -> (u64, Vec<LiveVariant>) {
    let mut live: Vec<LiveVariant> = Vec::new();
    for trial in tack_trace::journaled_trials(dir) {
        let Some(outcome) = trial.outcome else {
            continue;
        };
        let index = match live.iter().position(|v| v.variant == trial.variant) {
            Some(index) => index,
            None => {
                live.push(LiveVariant {
                    variant: trial.variant.clone(),
                    finished: 0,
                    passed: 0,
                });
                live.len() - 1
            }
        };
        live[index].finished += 1;
        live[index].passed += u64::from(outcome == TrialOutcome::Passed);
    }
    live.sort_by(|a, b| a.variant.cmp(&b.variant));
    let journaled: u64 = live.iter().map(|v| v.finished).sum();
    (recorded + journaled, live)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn write_run(root: &Path, id: &str) -> PathBuf {
        let dir = root.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let suite = tack_trace::SuiteInfo {
            name: "s".to_string(),
            path: "s".to_string(),
            content_hash: "0".repeat(64),
        };
        Manifest::start(id.to_string(), suite, Vec::new(), Vec::new())
            .write(&dir)
            .unwrap();
        dir
    }

    /// Two copies of one run (a baseline copied from traces/) are one id
    /// to the viewer: the first root's is shown, the other is named.
    #[test]
    fn a_copy_of_a_run_is_named_not_silently_hidden() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let shown = write_run(one.path(), "20261207-000000-s-aaaa");
        let hidden = write_run(two.path(), "20261207-000000-s-aaaa");
        write_run(two.path(), "20261207-000001-s-bbbb");
        let roots = [one.path().to_path_buf(), two.path().to_path_buf()];
        assert_eq!(find(&roots).len(), 2);
        assert_eq!(hidden_duplicates(&roots), [(hidden, shown.clone())]);
        // A run named as well as its directory of runs is no copy.
        assert!(hidden_duplicates(&[one.path().to_path_buf(), shown]).is_empty());
    }
}
