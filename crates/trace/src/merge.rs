//! Shard runs of one plan (`tack run --shard`) combined into one run, read
//! like any other. Shards are checked to be slices of one plan measured on
//! one setup before anything is written; the merged run then holds every
//! shard's tables (compacted, as a single run's would be) and a manifest
//! that says which shards it came from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{Manifest, PartLimits, RunStatus, TraceError};

/// Why shard runs could not be merged. Every error of [`ShardRuns::open`]
/// is about the runs given (exit 2 in the CLI); those of
/// [`ShardRuns::write`] are about writing the merged run.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{} is not a run's trace directory", dir.display())]
    NotARun {
        dir: PathBuf,
        #[source]
        source: TraceError,
    },
    #[error(
        "run {run} is not a shard (it was not run with --shard); only shards of one plan can be merged"
    )]
    NotAShard { run: String },
    #[error("run {run} is still running ({writer} writes it); merge it once it has finished")]
    StillRunning { run: String, writer: String },
    #[error("no runs to merge")]
    NoRuns,
    #[error("run {run} does not belong with run {base}: {what}; shards must come from one plan")]
    OtherPlan {
        run: String,
        base: String,
        what: String,
    },
    #[error("run {run} drifted from run {base}: {}", what.join("; "))]
    Drifted {
        run: String,
        base: String,
        what: Vec<String>,
    },
    #[error("run {run} is shard {index}, which another run already is")]
    SameShard { run: String, index: u32 },
    #[error(
        "shard(s) {} missing; pass every shard's run, or --allow-partial to merge without them",
        missing.join(", ")
    )]
    Missing {
        /// `INDEX/COUNT` of each missing shard.
        missing: Vec<String>,
    },
    #[error(
        "trial {trial} is in both run {first} and run {second}; each trial must come from one shard"
    )]
    SameTrial {
        trial: String,
        first: String,
        second: String,
    },
    /// A shard's tables could not be read.
    #[error(transparent)]
    Read(TraceError),
    #[error("could not copy run {run} into {}", out.display())]
    Copy {
        run: String,
        out: PathBuf,
        #[source]
        source: TraceError,
    },
    #[error("could not compact {}", out.display())]
    Compact {
        out: PathBuf,
        #[source]
        source: TraceError,
    },
    /// The merged run's manifest could not be written.
    #[error(transparent)]
    Manifest(TraceError),
}

/// One shard run: its directory and manifest.
#[derive(Debug, Clone)]
pub struct ShardRun {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

/// Shard runs that belong together, ready to be written as one run.
#[derive(Debug, Clone)]
pub struct ShardRuns {
    /// The first shard's manifest, which the merged run's starts from.
    base: Manifest,
    shards: Vec<ShardRun>,
    complete: bool,
    trials: usize,
}

impl ShardRuns {
    /// Reads the runs in `dirs` and checks that they are finished shards of
    /// one plan, measured on one setup, each shard once and each trial in
    /// one shard only. A missing shard is an error unless `allow_partial`.
    pub fn open(dirs: &[PathBuf], allow_partial: bool) -> Result<ShardRuns, MergeError> {
        let shards = dirs
            .iter()
            .map(|dir| read_shard(dir))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(base) = shards.first().map(|s| s.manifest.clone()) else {
            return Err(MergeError::NoRuns);
        };
        let complete = check_together(&base, &shards, allow_partial)?;
        let trials = count_trials(&shards)?;
        Ok(ShardRuns {
            base,
            shards,
            complete,
            trials,
        })
    }

    /// How many trials the shards hold together.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Whether every shard of the plan is there; a merge without all of
    /// them is marked interrupted.
    pub fn complete(&self) -> bool {
        self.complete
    }

    pub fn shards(&self) -> &[ShardRun] {
        &self.shards
    }

    /// Writes the merged run `run_id` into `out`: every shard's parts, and
    /// the journals of trials a shard was interrupted in (so a report can
    /// recover them as for any run), compacted, so the merged run has as
    /// few parts as a single run would and a message several shards stored
    /// is kept once; then its manifest, which is returned.
    pub fn write(
        &self,
        out: &Path,
        run_id: String,
        command_line: Vec<String>,
    ) -> Result<Manifest, MergeError> {
        for shard in &self.shards {
            crate::adopt_parts(&shard.dir, out).map_err(|source| MergeError::Copy {
                run: shard.manifest.run_id.clone(),
                out: out.to_path_buf(),
                source,
            })?;
        }
        crate::compact(out, PartLimits::default()).map_err(|source| MergeError::Compact {
            out: out.to_path_buf(),
            source,
        })?;
        let manifest = self.manifest(run_id, command_line);
        manifest.write(out).map_err(MergeError::Manifest)?;
        Ok(manifest)
    }

    /// The merged run's manifest: the first shard's plan, spanning the
    /// shards' times, finished only when every shard is there and finished.
    pub fn manifest(&self, run_id: String, command_line: Vec<String>) -> Manifest {
        let manifests: Vec<&Manifest> = self.shards.iter().map(|s| &s.manifest).collect();
        let mut merged = self.base.clone();
        merged.run_id = run_id;
        merged.shard = None;
        merged.merged_from = manifests.iter().map(|m| m.run_id.clone()).collect();
        merged.command_line = command_line;
        merged.started_at = manifests
            .iter()
            .map(|m| m.started_at.clone())
            .min()
            .unwrap_or_default();
        // RFC 3339 times in UTC sort as text.
        merged.finished_at = manifests.iter().filter_map(|m| m.finished_at.clone()).max();
        let all_finished = manifests.iter().all(|m| m.status == RunStatus::Finished);
        merged.status = if self.complete && all_finished {
            RunStatus::Finished
        } else {
            RunStatus::Interrupted
        };
        if let Some(print) = merged.fingerprint.as_mut() {
            for (variant, fingerprint) in &mut print.variants {
                let answered: BTreeSet<String> = manifests
                    .iter()
                    .filter_map(|m| m.fingerprint.as_ref()?.variants.get(variant))
                    .flat_map(|v| v.models_answered.iter().cloned())
                    .collect();
                fingerprint.models_answered = answered.into_iter().collect();
            }
        }
        merged
    }
}

fn read_shard(dir: &Path) -> Result<ShardRun, MergeError> {
    let manifest = Manifest::read(dir).map_err(|source| MergeError::NotARun {
        dir: dir.to_path_buf(),
        source,
    })?;
    let run = manifest.run_id.clone();
    if manifest.shard.is_none() {
        return Err(MergeError::NotAShard { run });
    }
    let writer = crate::run_writer(dir);
    if writer.is_live() {
        return Err(MergeError::StillRunning {
            run,
            writer: writer.to_string(),
        });
    }
    Ok(ShardRun {
        dir: dir.to_path_buf(),
        manifest,
    })
}

/// Checks that the shards are slices of one plan measured on one setup, and
/// says whether every shard is there.
fn check_together(
    base: &Manifest,
    shards: &[ShardRun],
    allow_partial: bool,
) -> Result<bool, MergeError> {
    let mut seen = BTreeSet::new();
    for shard in shards {
        let m = &shard.manifest;
        if let Some(what) = base.plan_difference(m) {
            return Err(MergeError::OtherPlan {
                run: m.run_id.clone(),
                base: base.run_id.clone(),
                what,
            });
        }
        let drift = crate::drift(base, m);
        if !drift.tasks.is_empty() || !drift.environment.is_empty() {
            return Err(MergeError::Drifted {
                run: m.run_id.clone(),
                base: base.run_id.clone(),
                what: drift.describe(),
            });
        }
        if let Some(index) = m.shard.as_ref().map(|s| s.index)
            && !seen.insert(index)
        {
            return Err(MergeError::SameShard {
                run: m.run_id.clone(),
                index,
            });
        }
    }
    let count = base.shard.as_ref().map_or(0, |s| s.count);
    let missing: Vec<String> = (1..=count)
        .filter(|index| !seen.contains(index))
        .map(|index| format!("{index}/{count}"))
        .collect();
    if !missing.is_empty() && !allow_partial {
        return Err(MergeError::Missing { missing });
    }
    Ok(missing.is_empty())
}

/// Counts the trials, refusing a trial id recorded by two shards.
fn count_trials(shards: &[ShardRun]) -> Result<usize, MergeError> {
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    for shard in shards {
        let ids = crate::stored_trial_ids(&shard.dir).map_err(MergeError::Read)?;
        for trial in ids {
            if let Some(first) = owner.insert(trial.clone(), &shard.manifest.run_id) {
                return Err(MergeError::SameTrial {
                    trial,
                    first: first.to_string(),
                    second: shard.manifest.run_id.clone(),
                });
            }
        }
    }
    Ok(owner.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shard;

    fn shard(index: u32, count: u32) -> Manifest {
        Manifest {
            started_at: format!("2026-11-30T00:00:0{index}Z"),
            finished_at: Some(format!("2026-11-30T00:01:0{index}Z")),
            status: RunStatus::Finished,
            shard: Some(Shard {
                index,
                count,
                plan: "p".to_string(),
            }),
            ..crate::testing::manifest(&format!("run-shard{index}of{count}"))
        }
    }

    fn runs(root: &Path, manifests: &[Manifest]) -> Vec<PathBuf> {
        manifests
            .iter()
            .map(|m| {
                let dir = root.join(&m.run_id);
                std::fs::create_dir_all(&dir).unwrap();
                m.write(&dir).unwrap();
                dir
            })
            .collect()
    }

    #[test]
    fn every_shard_once_merges_into_a_finished_run() {
        let root = tempfile::tempdir().unwrap();
        let dirs = runs(root.path(), &[shard(2, 2), shard(1, 2)]);
        let shards = ShardRuns::open(&dirs, false).unwrap();
        assert_eq!((shards.shards().len(), shards.trials()), (2, 0));
        assert!(shards.complete());
        let out = root.path().join("merged");
        let merged = shards
            .write(&out, "merged".to_string(), vec!["tack".to_string()])
            .unwrap();
        assert_eq!(Manifest::read(&out).unwrap(), merged);
        assert_eq!(merged.status, RunStatus::Finished);
        assert_eq!(merged.shard, None);
        assert_eq!(merged.merged_from, ["run-shard2of2", "run-shard1of2"]);
        assert_eq!(merged.started_at, "2026-11-30T00:00:01Z");
        assert_eq!(merged.finished_at.as_deref(), Some("2026-11-30T00:01:02Z"));
    }

    #[test]
    fn a_missing_shard_needs_allow_partial_and_marks_the_run_interrupted() {
        let root = tempfile::tempdir().unwrap();
        let dirs = runs(root.path(), &[shard(1, 3)]);
        let error = ShardRuns::open(&dirs, false).unwrap_err();
        assert!(matches!(&error, MergeError::Missing { missing } if missing == &["2/3", "3/3"]));
        assert!(error.to_string().contains("--allow-partial"), "{error}");
        let shards = ShardRuns::open(&dirs, true).unwrap();
        assert!(!shards.complete());
        let merged = shards.manifest("m".to_string(), vec![]);
        assert_eq!(merged.status, RunStatus::Interrupted);
    }

    #[test]
    fn runs_of_other_plans_or_the_same_shard_twice_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let mut other = shard(2, 2);
        other.seed = 7;
        let dirs = runs(root.path(), &[shard(1, 2), other]);
        let error = ShardRuns::open(&dirs, false).unwrap_err();
        assert!(matches!(error, MergeError::OtherPlan { .. }), "{error}");
        assert!(error.to_string().contains("seed"), "{error}");

        let mut twice = shard(1, 2);
        twice.run_id = "again".to_string();
        let dirs = runs(root.path(), &[shard(1, 2), twice]);
        let error = ShardRuns::open(&dirs, true).unwrap_err();
        assert!(
            matches!(&error, MergeError::SameShard { run, index: 1 } if run == "again"),
            "{error}"
        );
    }

    #[test]
    fn what_is_not_a_shard_is_named() {
        let root = tempfile::tempdir().unwrap();
        let mut whole = shard(1, 1);
        whole.shard = None;
        let dirs = runs(root.path(), &[whole]);
        let error = ShardRuns::open(&dirs, false).unwrap_err();
        assert!(matches!(error, MergeError::NotAShard { .. }), "{error}");
        let missing = [root.path().join("nothing")];
        let error = ShardRuns::open(&missing, false).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("is not a run's trace directory")
        );
        assert!(std::error::Error::source(&error).is_some());
        assert!(matches!(
            ShardRuns::open(&[], true),
            Err(MergeError::NoRuns)
        ));
    }
}
