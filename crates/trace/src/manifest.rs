use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::{RunFingerprint, TraceError};

/// The shape of the run tack writes now. 1: before fingerprints (such
/// manifests have no `schema_version`); 2: `fingerprint`; 3: tables as part
/// files, content-addressed messages, trial attempts and `resumes`.
pub const MANIFEST_SCHEMA_VERSION: u32 = 3;

fn unversioned() -> u32 {
    1
}

/// `traces/<run-id>/manifest.json`: what was run, on what, and when. Written
/// when the run starts and rewritten when it ends, so an interrupted run still
/// says what it was. Fields added since the first version read as absent
/// from older manifests, so every run stays readable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(default = "unversioned")]
    pub schema_version: u32,
    pub run_id: String,
    pub tack_version: String,
    pub suite: SuiteInfo,
    pub variants: Vec<VariantInfo>,
    pub tasks: Vec<String>,
    pub trials_per_task: u32,
    pub seed: u64,
    pub jobs: u32,
    pub host: HostInfo,
    pub command_line: Vec<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub status: RunStatus,
    /// Version of the price table every call's cost was computed with.
    #[serde(default)]
    pub price_table: Option<String>,
    /// What the results depend on besides the harness, for drift checks
    /// ([`crate::drift`]); `None` in manifests of schema version 1.
    #[serde(default)]
    pub fingerprint: Option<RunFingerprint>,
    /// The slice of the plan this run ran (`tack run --shard`); `None` for a
    /// whole or merged run.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// The shard runs `tack merge` combined into this one, by run id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    /// Every `tack run --resume` of this run, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumes: Vec<Resume>,
}

/// One `tack run --resume`: when, how, and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub at: String,
    pub command_line: Vec<String>,
    /// Trials already finished, kept as they were.
    pub trials_kept: u32,
    /// Trials that were running when the run stopped: kept as `cancelled`
    /// attempts and run again.
    pub trials_interrupted: u32,
    /// Trials this resume set out to run.
    pub trials_to_run: u32,
    /// Of those, finished trials run again as new attempts (`--rerun`).
    #[serde(default)]
    pub trials_rerun: u32,
}

/// One slice of a plan split across machines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based: `1..=count`.
    pub index: u32,
    pub count: u32,
    /// sha256 of the whole plan's sorted trial ids, so `tack merge` can
    /// tell shards of one plan from shards of another.
    pub plan: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Finished,
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteInfo {
    pub name: String,
    pub path: String,
    /// sha256 over every file of the suite, in path order.
    pub content_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantInfo {
    pub name: String,
    pub model: String,
    /// True when the model is built in (oracle, sim): reports must say so.
    pub simulated: bool,
    pub description: String,
    /// The variant's full harness configuration, as loaded.
    pub config: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub os: String,
    pub arch: String,
    pub cpus: u32,
    pub hostname: String,
}

impl HostInfo {
    pub fn current() -> HostInfo {
        HostInfo {
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            hostname: std::fs::read_to_string("/etc/hostname")
                .map(|name| name.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

impl Manifest {
    pub const FILE_NAME: &'static str = "manifest.json";

    /// The manifest of a run that starts now, on this host, by this tack:
    /// what ran and what was planned. One trial per task, seed 0 and one
    /// job until the caller says otherwise (`Manifest { seed, ..start }`);
    /// what is known only later (the finish, the price table, the
    /// fingerprint, the shard, merges and resumes) is empty.
    pub fn start(
        run_id: String,
        suite: SuiteInfo,
        variants: Vec<VariantInfo>,
        tasks: Vec<String>,
    ) -> Manifest {
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            run_id,
            tack_version: env!("CARGO_PKG_VERSION").to_string(),
            suite,
            variants,
            tasks,
            trials_per_task: 1,
            seed: 0,
            jobs: 1,
            host: HostInfo::current(),
            command_line: std::env::args().collect(),
            started_at: tack_protocol::time::rfc3339_of_ms(tack_protocol::time::now_ms()),
            finished_at: None,
            status: RunStatus::Running,
            price_table: None,
            fingerprint: None,
            shard: None,
            merged_from: Vec::new(),
            resumes: Vec::new(),
        }
    }

    pub fn read(run_dir: &Path) -> Result<Manifest, TraceError> {
        crate::fsutil::check_run_dirs(run_dir)?;
        let path = run_dir.join(Self::FILE_NAME);
        // Variants, resumes and merged shards are listed: a few MiB at most.
        let text =
            crate::fsutil::read_run_text(&path, 256 << 20).map_err(|e| TraceError::io(&path, e))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| TraceError::Format {
            path: path.clone(),
            message: e.to_string(),
        })?;
        // Reports and comparisons are written to directories named after
        // it: a run received from elsewhere must not name `../../x`.
        let names = std::iter::once(("run_id", &manifest.run_id)).chain(
            manifest
                .variants
                .iter()
                .map(|v| ("a variant's name", &v.name)),
        );
        for (field, name) in names {
            if !tack_protocol::is_plain_name(name) {
                return Err(TraceError::Format {
                    path,
                    message: format!(
                        "{field} {name:?} is not a plain name (no '/', '\\', '..', leading '.' \
                         or control characters): this run was not written by tack as it is"
                    ),
                });
            }
        }
        Ok(manifest)
    }

    /// Writes the manifest atomically (temporary file, then rename).
    pub fn write(&self, run_dir: &Path) -> Result<(), TraceError> {
        let path = run_dir.join(Self::FILE_NAME);
        let text = serde_json::to_string_pretty(self).map_err(|e| TraceError::Format {
            path: path.clone(),
            message: e.to_string(),
        })?;
        crate::fsutil::write_atomically(&path, text.as_bytes())
    }

    /// The suite directory this run, read from `run_dir`, names, for a
    /// resume or a replay to load. A run received from elsewhere (a bucket,
    /// a colleague) must not name a suite it ships itself: that suite's
    /// settings (`sandbox = "off"`, a reviewer script) would be the
    /// sender's, so one inside the run's directory is refused.
    pub fn suite_dir(&self, run_dir: &Path) -> Result<PathBuf, TraceError> {
        let suite = PathBuf::from(&self.suite.path);
        let real = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if real(&suite).starts_with(real(run_dir)) {
            return Err(TraceError::Format {
                path: run_dir.join(Self::FILE_NAME),
                message: format!(
                    "suite.path {} lies inside the run itself; a run never holds its suite: \
                     name the suite (tack run SUITE --resume DIR)",
                    suite.display()
                ),
            });
        }
        Ok(suite)
    }

    /// The first difference between the plans of two runs (`self` recorded,
    /// `other` asked for): the suite's content, the variants and their
    /// configuration, the tasks, the trials per task, the seed, and the
    /// shard slicing. Runs with the same plan run the same trials with the
    /// same seeds: shards that can be merged, or a run and its resume.
    pub fn plan_difference(&self, other: &Manifest) -> Option<String> {
        let variants = |m: &Manifest| -> Vec<(String, String, serde_json::Value)> {
            m.variants
                .iter()
                .map(|v| (v.name.clone(), v.model.clone(), v.config.clone()))
                .collect()
        };
        let names = |m: &Manifest| -> Vec<String> {
            m.variants
                .iter()
                .map(|v| format!("{} ({})", v.name, v.model))
                .collect()
        };
        let plan = |m: &Manifest| m.shard.as_ref().map(|s| (s.count, s.plan.clone()));
        let slicing = |m: &Manifest| match &m.shard {
            Some(shard) => format!("{} shards", shard.count),
            None => "no shards".to_string(),
        };
        if self.suite.content_hash != other.suite.content_hash {
            return Some(format!(
                "the suite's content differs (hash {} recorded, {} now): a file of the suite changed",
                short(&self.suite.content_hash),
                short(&other.suite.content_hash)
            ));
        }
        if variants(self) != variants(other) {
            let (was, now) = (names(self), names(other));
            return Some(if was == now {
                format!(
                    "the configuration of the variants differs (variants {})",
                    was.join(", ")
                )
            } else {
                format!(
                    "the variants differ: [{}] recorded, [{}] now",
                    was.join(", "),
                    now.join(", ")
                )
            });
        }
        if self.tasks != other.tasks {
            return Some(format!(
                "the tasks differ: [{}] recorded, [{}] now",
                self.tasks.join(", "),
                other.tasks.join(", ")
            ));
        }
        if self.trials_per_task != other.trials_per_task {
            return Some(format!(
                "the trials per task differ: {} recorded, {} now",
                self.trials_per_task, other.trials_per_task
            ));
        }
        if self.seed != other.seed {
            return Some(format!(
                "the seed differs: {} recorded, {} now",
                self.seed, other.seed
            ));
        }
        if plan(self) != plan(other) {
            return Some(format!(
                "the plan (its trial ids) or the shard count differs: {} recorded, {} now",
                slicing(self),
                slicing(other)
            ));
        }
        None
    }

    /// Whether any variant's results come from a built-in simulated model.
    pub fn has_simulated_models(&self) -> bool {
        self.variants.iter().any(|v| v.simulated)
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::Manifest;

    #[test]
    fn a_run_never_names_a_suite_inside_itself() {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = crate::testing::manifest("r");
        manifest.suite.path = dir.path().join("suite").display().to_string();
        std::fs::create_dir_all(dir.path().join("suite")).unwrap();
        let error = manifest.suite_dir(dir.path()).unwrap_err().to_string();
        assert!(error.contains("lies inside the run itself"), "{error}");
        let elsewhere = tempfile::tempdir().unwrap();
        manifest.suite.path = elsewhere.path().display().to_string();
        assert_eq!(manifest.suite_dir(dir.path()).unwrap(), elsewhere.path());
    }

    #[test]
    fn a_run_id_or_variant_that_would_leave_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = crate::testing::manifest("20261207-121519-demo-1e66");
        good.write(dir.path()).unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap(), good);
        for run_id in ["../../victim", "/tmp/abs", "a/../../b"] {
            let mut bad = good.clone();
            bad.run_id = run_id.to_string();
            bad.write(dir.path()).unwrap();
            let error = Manifest::read(dir.path()).unwrap_err().to_string();
            assert!(error.contains("is not a plain name"), "{error}");
            assert!(error.contains("manifest.json"), "{error}");
        }
        let mut bad = good.clone();
        bad.variants[0].name = "../x".to_string();
        bad.write(dir.path()).unwrap();
        assert!(Manifest::read(dir.path()).is_err());
    }
}
