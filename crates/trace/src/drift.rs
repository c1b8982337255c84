//! Drift: what differs between two runs besides what a comparison means to
//! vary. Pure: it reads two manifests and decides nothing; the compare
//! command chooses what blocks a pairing.
//!
//! What counts as drift:
//! - **A task** drifts when it ran on one side only, or when any part of
//!   its definition differs: `task.toml` (instruction, environment, limits,
//!   checks, solution; the `[solution]` table is also told apart), `fixture/`,
//!   `checks/`, or any other file of the task directory. The two sides of a
//!   drifted task did not attempt the same problem, so its trials cannot be
//!   paired.
//! - **The environment** drifts when the OS, kernel, distribution,
//!   architecture, tack version, tack commit, price table or the output of a
//!   toolchain command (`[suite] fingerprint`, a command declared on one side
//!   only included) differs. Tasks stay pairable, but the results may differ
//!   for reasons no variant explains.
//! - **A variant** of the same name drifts when its configuration (name and
//!   description aside), the model it asked for or the models that answered
//!   differ. Expected when two different variants are compared.
//!
//! Not drift: the run id, seed, trial counts, jobs, host name, CPU count,
//! command line, times and status: how a run was carried out, not what it
//! measured. A manifest written before fingerprints (schema version 1) has
//! no task, environment or answered-model hashes: its side is listed in
//! [`RunDrift::unfingerprinted`] and only what it does record is compared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::{Manifest, RunFingerprint, TaskFingerprint, VariantInfo};

/// Which of the two compared runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Base,
    Candidate,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Base => "base",
            Side::Candidate => "candidate",
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunDrift {
    /// Tasks that cannot be paired, by id; tasks alike on both sides are absent.
    pub tasks: BTreeMap<String, TaskDrift>,
    /// Environment keys that differ, in [`EnvironmentKey`] order.
    pub environment: Vec<EnvironmentDrift>,
    /// Variants that differ, by name: in one run only, or configured or
    /// answered differently.
    pub variants: BTreeMap<String, VariantDrift>,
    /// Sides whose manifest predates fingerprints: their tasks could have
    /// changed unseen, unless [`RunDrift::same_suite_content`].
    pub unfingerprinted: Vec<Side>,
    /// Both runs hashed the same suite content (every file of the suite),
    /// so no task can have changed, fingerprinted or not. Never so for a
    /// run imported from another tool's log, which hashed no suite.
    pub same_suite_content: bool,
    /// Sides that hashed no suite: imported from another tool's log
    /// (Inspect, a Harbor job) or recorded by `tack proxy`; no fingerprint
    /// either.
    pub imported: Vec<Side>,
    /// The suites' names, when they differ: tasks of one name may then be
    /// different tasks (two Inspect tasks with the same sample ids).
    pub suites: Option<(String, String)>,
    /// Sides that are one shard of their plan (`--shard i/N`), with `i` and
    /// `N`: they hold a slice of its trials, not all.
    pub shards: Vec<(Side, u32, u32)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskDrift {
    /// The task ran in one run only.
    OnlyIn(Side),
    /// These parts differ; never empty.
    Changed(Vec<TaskPart>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskPart {
    TaskToml,
    /// The `[solution]` table of `task.toml`.
    Solution,
    Fixture,
    Checks,
    /// The task's container image (its id).
    Image,
    /// A file of the task directory outside `task.toml`, `fixture/` and `checks/`.
    OtherFiles,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvironmentDrift {
    pub key: EnvironmentKey,
    /// `None`: not recorded on that side.
    pub base: Option<String>,
    pub candidate: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentKey {
    Os,
    Kernel,
    Distribution,
    Arch,
    TackVersion,
    TackCommit,
    PriceTable,
    /// A `[suite] fingerprint` command.
    Toolchain(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VariantDrift {
    /// The variant ran in one run only.
    OnlyIn(Side),
    /// These differ; never empty.
    Changed(Vec<VariantChange>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VariantChange {
    /// The configuration hash (harness, model settings) differs.
    Config,
    ModelRequested {
        base: String,
        candidate: String,
    },
    ModelsAnswered {
        base: Vec<String>,
        candidate: Vec<String>,
    },
}

/// What differs between two runs (see the module documentation).
pub fn drift(base: &Manifest, candidate: &Manifest) -> RunDrift {
    let sides = [(Side::Base, base), (Side::Candidate, candidate)];
    // Two variants of one imported run share its tasks: nothing to say.
    let one_run = base.run_id == candidate.run_id;
    let imported: Vec<Side> = sides
        .iter()
        .filter(|(_, m)| m.suite.content_hash.is_empty() && !one_run)
        .map(|(side, _)| *side)
        .collect();
    let unfingerprinted = sides
        .iter()
        .filter(|(_, m)| m.fingerprint.is_none() && !m.suite.content_hash.is_empty())
        .map(|(side, _)| *side)
        .collect();
    let names: BTreeSet<&String> = base
        .variants
        .iter()
        .chain(&candidate.variants)
        .map(|v| &v.name)
        .collect();
    let variants = names
        .into_iter()
        .filter_map(|name| {
            variant_drift(base, name, candidate, name).map(|drift| (name.clone(), drift))
        })
        .collect();
    RunDrift {
        tasks: task_drift(base, candidate),
        environment: environment_drift(base, candidate),
        variants,
        unfingerprinted,
        same_suite_content: one_run
            || (imported.is_empty() && base.suite.content_hash == candidate.suite.content_hash),
        imported,
        suites: (base.suite.name != candidate.suite.name)
            .then(|| (base.suite.name.clone(), candidate.suite.name.clone())),
        shards: sides
            .iter()
            .filter(|_| !one_run)
            .filter_map(|(side, m)| Some((*side, m.shard.as_ref()?)))
            .map(|(side, shard)| (side, shard.index, shard.count))
            .collect(),
    }
}

/// How variant `base_variant` of `base` differs from `candidate_variant` of
/// `candidate`, or `None` when alike: for comparisons that pair two
/// differently named variants.
pub fn variant_drift(
    base: &Manifest,
    base_variant: &str,
    candidate: &Manifest,
    candidate_variant: &str,
) -> Option<VariantDrift> {
    let find = |m: &'_ Manifest, name: &str| -> Option<VariantInfo> {
        m.variants.iter().find(|v| v.name == name).cloned()
    };
    let (b, c) = match (find(base, base_variant), find(candidate, candidate_variant)) {
        (Some(b), Some(c)) => (b, c),
        (None, None) => return None,
        (Some(_), None) => return Some(VariantDrift::OnlyIn(Side::Base)),
        (None, Some(_)) => return Some(VariantDrift::OnlyIn(Side::Candidate)),
    };
    let print = |m: &Manifest, name: &str| {
        m.fingerprint
            .as_ref()
            .and_then(|f| f.variants.get(name).cloned())
    };
    let (base_print, candidate_print) = (
        print(base, base_variant),
        print(candidate, candidate_variant),
    );
    let mut changes = Vec::new();
    let config_differs = match (&base_print, &candidate_print) {
        (Some(b), Some(c)) => b.config_hash != c.config_hash,
        // Older manifests hold the configuration itself.
        _ => configuration(&b) != configuration(&c),
    };
    if config_differs {
        changes.push(VariantChange::Config);
    }
    if b.model != c.model {
        changes.push(VariantChange::ModelRequested {
            base: b.model,
            candidate: c.model,
        });
    }
    if let (Some(bp), Some(cp)) = (base_print, candidate_print)
        && bp.models_answered != cp.models_answered
    {
        changes.push(VariantChange::ModelsAnswered {
            base: bp.models_answered,
            candidate: cp.models_answered,
        });
    }
    (!changes.is_empty()).then_some(VariantDrift::Changed(changes))
}

/// A variant's configuration without what only names it.
fn configuration(info: &VariantInfo) -> serde_json::Value {
    let mut config = info.config.clone();
    if let Some(object) = config.as_object_mut() {
        object.remove("name");
        object.remove("description");
    }
    config
}

fn task_drift(base: &Manifest, candidate: &Manifest) -> BTreeMap<String, TaskDrift> {
    let (b_tasks, c_tasks): (BTreeSet<&String>, BTreeSet<&String>) = (
        base.tasks.iter().collect(),
        candidate.tasks.iter().collect(),
    );
    let mut out = BTreeMap::new();
    for task in b_tasks.union(&c_tasks) {
        let drift = match (b_tasks.contains(task), c_tasks.contains(task)) {
            (true, false) => Some(TaskDrift::OnlyIn(Side::Base)),
            (false, true) => Some(TaskDrift::OnlyIn(Side::Candidate)),
            _ => {
                let print = |f: &Option<RunFingerprint>| {
                    f.as_ref().and_then(|f| f.tasks.get(*task).cloned())
                };
                match (print(&base.fingerprint), print(&candidate.fingerprint)) {
                    (Some(b), Some(c)) => changed_parts(&b, &c).map(TaskDrift::Changed),
                    _ => None,
                }
            }
        };
        if let Some(drift) = drift {
            out.insert((*task).clone(), drift);
        }
    }
    out
}

fn changed_parts(b: &TaskFingerprint, c: &TaskFingerprint) -> Option<Vec<TaskPart>> {
    let mut parts = Vec::new();
    let pairs = [
        (TaskPart::TaskToml, b.task_toml != c.task_toml),
        (TaskPart::Solution, b.solution != c.solution),
        (TaskPart::Fixture, b.fixture != c.fixture),
        (TaskPart::Checks, b.checks != c.checks),
        (
            TaskPart::Image,
            b.image != c.image || b.services != c.services,
        ),
    ];
    parts.extend(
        pairs
            .into_iter()
            .filter(|(_, differs)| *differs)
            .map(|(part, _)| part),
    );
    if parts.is_empty() && b.directory != c.directory {
        parts.push(TaskPart::OtherFiles);
    }
    (!parts.is_empty()).then_some(parts)
}

fn environment_drift(base: &Manifest, candidate: &Manifest) -> Vec<EnvironmentDrift> {
    let mut pairs: Vec<(EnvironmentKey, Option<String>, Option<String>)> = vec![
        (
            EnvironmentKey::Arch,
            Some(base.host.arch.clone()),
            Some(candidate.host.arch.clone()),
        ),
        (
            EnvironmentKey::TackVersion,
            Some(base.tack_version.clone()),
            Some(candidate.tack_version.clone()),
        ),
        (
            EnvironmentKey::PriceTable,
            base.price_table.clone(),
            candidate.price_table.clone(),
        ),
    ];
    if let (Some(b), Some(c)) = (&base.fingerprint, &candidate.fingerprint) {
        let (b, c) = (&b.environment, &c.environment);
        pairs.extend([
            (EnvironmentKey::Os, Some(b.os.clone()), Some(c.os.clone())),
            (
                EnvironmentKey::Kernel,
                Some(b.kernel.clone()),
                Some(c.kernel.clone()),
            ),
            (
                EnvironmentKey::Distribution,
                b.distribution.clone(),
                c.distribution.clone(),
            ),
            (
                EnvironmentKey::TackCommit,
                Some(b.tack_commit.clone()),
                Some(c.tack_commit.clone()),
            ),
        ]);
        let commands: BTreeSet<&String> = b.toolchains.keys().chain(c.toolchains.keys()).collect();
        pairs.extend(commands.into_iter().map(|command| {
            (
                EnvironmentKey::Toolchain(command.clone()),
                b.toolchains.get(command).cloned(),
                c.toolchains.get(command).cloned(),
            )
        }));
    }
    let mut drift: Vec<EnvironmentDrift> = pairs
        .into_iter()
        .filter(|(_, b, c)| b != c)
        .map(|(key, base, candidate)| EnvironmentDrift {
            key,
            base,
            candidate,
        })
        .collect();
    drift.sort_by(|a, b| a.key.cmp(&b.key));
    drift
}

impl RunDrift {
    /// Nothing differs (and both runs were fingerprinted).
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
            && self.environment.is_empty()
            && self.variants.is_empty()
            && self.unfingerprinted.is_empty()
            && self.imported.is_empty()
            && self.suites.is_none()
            && self.shards.is_empty()
    }

    /// One line per difference, for people: `task `median-even`: fixture changed`.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        if let Some((base, candidate)) = &self.suites {
            lines.push(format!(
                "the runs are of different suites (`{base}` and `{candidate}`): tasks of one name may be different tasks"
            ));
        }
        lines.extend(self.shards.iter().map(|(side, index, count)| {
            format!(
                "the {side} run is shard {index}/{count} of its plan: it holds a slice of the \
                 plan's trials, and tasks or trials it lacks are not paired; `tack merge` its \
                 shards to compare the whole"
            )
        }));
        lines.extend(self.imported.iter().map(|side| {
            format!(
                "the {side} run hashed no suite (it was imported from another tool's log, or recorded by tack proxy): whether its tasks are the other run's is unknown"
            )
        }));
        lines.extend(self
            .unfingerprinted
            .iter()
            .map(|side| {
                let tasks = match self.same_suite_content {
                    true => "its tasks are the same (same suite content)",
                    false => "whether its tasks changed is unknown",
                };
                format!(
                    "the {side} run was recorded before fingerprints: {tasks}; its kernel, toolchains and answering models are unknown"
                )
            }));
        lines.extend(
            self.tasks
                .iter()
                .map(|(task, drift)| format!("task `{task}`: {drift}")),
        );
        lines.extend(
            self.environment
                .iter()
                .map(|drift| format!("environment: {drift}")),
        );
        lines.extend(
            self.variants
                .iter()
                .map(|(variant, drift)| format!("variant `{variant}`: {drift}")),
        );
        lines
    }
}

impl fmt::Display for TaskDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskDrift::OnlyIn(side) => write!(f, "only in the {side} run"),
            TaskDrift::Changed(parts) => {
                let names: Vec<&str> = parts
                    .iter()
                    .map(|part| match part {
                        TaskPart::TaskToml if parts.contains(&TaskPart::Solution) => {
                            "task.toml (its solution included)"
                        }
                        TaskPart::TaskToml => "task.toml",
                        TaskPart::Solution if parts.contains(&TaskPart::TaskToml) => "",
                        TaskPart::Solution => "solution",
                        TaskPart::Fixture => "fixture",
                        TaskPart::Checks => "checks",
                        TaskPart::Image => "container image",
                        TaskPart::OtherFiles => "other files of the task directory",
                    })
                    .filter(|name| !name.is_empty())
                    .collect();
                write!(f, "{} changed", names.join(", "))
            }
        }
    }
}

impl fmt::Display for EnvironmentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvironmentKey::Os => f.write_str("os"),
            EnvironmentKey::Kernel => f.write_str("kernel"),
            EnvironmentKey::Distribution => f.write_str("distribution"),
            EnvironmentKey::Arch => f.write_str("arch"),
            EnvironmentKey::TackVersion => f.write_str("tack version"),
            EnvironmentKey::TackCommit => f.write_str("tack commit"),
            EnvironmentKey::PriceTable => f.write_str("price table"),
            EnvironmentKey::Toolchain(command) => write!(f, "`{command}`"),
        }
    }
}

impl fmt::Display for EnvironmentDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = |v: &Option<String>| v.clone().unwrap_or_else(|| "(not recorded)".to_string());
        write!(
            f,
            "{} {} → {}",
            self.key,
            value(&self.base),
            value(&self.candidate)
        )
    }
}

impl fmt::Display for VariantDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VariantDrift::OnlyIn(side) => write!(f, "only in the {side} run"),
            VariantDrift::Changed(changes) => {
                let parts: Vec<String> = changes.iter().map(ToString::to_string).collect();
                f.write_str(&parts.join("; "))
            }
        }
    }
}

impl fmt::Display for VariantChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VariantChange::Config => f.write_str("configuration changed"),
            VariantChange::ModelRequested { base, candidate } => {
                write!(f, "model asked for {base} → {candidate}")
            }
            VariantChange::ModelsAnswered { base, candidate } => {
                let list = |models: &Vec<String>| match models.is_empty() {
                    true => "(none)".to_string(),
                    false => models.join(", "),
                };
                write!(
                    f,
                    "models that answered {} → {}",
                    list(base),
                    list(candidate)
                )
            }
        }
    }
}
