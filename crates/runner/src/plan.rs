use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tack_agent::{Dispatcher, ToolContext};
use tack_harness::{ModelChoice, Models};
use tack_suite::{Suite, Task, Variant};
use tack_trace::RecordedAnswers;

/// What to run.
#[derive(Clone)]
pub struct RunPlan {
    pub suite: Suite,
    /// Variant names to run; empty means all.
    pub variants: Vec<String>,
    /// Task ids to run; empty means all.
    pub tasks: Vec<String>,
    pub trials_per_task: u32,
    pub jobs: usize,
    pub seed: u64,
    pub traces_root: PathBuf,
    pub run_id: String,
    pub command_line: Vec<String>,
    /// Keep the workspaces of trials that did not pass, for inspection.
    pub keep_failed_workspaces: bool,
    /// Answer with these recorded model responses instead of the variant's
    /// model (`tack replay`).
    pub replay: Option<Arc<RecordedAnswers>>,
    /// More directories no command of a trial may see: the reports
    /// directory in use (the traces root and the suite's tasks are always
    /// hidden).
    pub hidden: Vec<PathBuf>,
    /// Answers `approver.policy = "interactive"` (the CLI's terminal prompt).
    pub interactive: Option<Arc<dyn tack_agent::Approver>>,
    /// Run only this slice of the trials (`tack run --shard`).
    pub shard: Option<ShardSpec>,
    /// Run a trial that ended in `infra_error` again, up to this many
    /// times; every attempt is recorded.
    pub infra_retries: u32,
    /// Continue the stopped run `traces_root/run_id` instead of starting
    /// one: its finished trials are kept, the rest run (`tack run --resume`).
    pub resume: bool,
    /// On a resume, finished trials to run again as new attempts
    /// (`--rerun`, `--rerun-task`, `--rerun-variant`).
    pub rerun: crate::Rerun,
    /// How the images of tasks that run in one are made.
    pub images: tack_suite::ImageOptions,
    /// Make each finished trial readable in the run directory within about
    /// this long (its part is closed on a timer), for readers of the running
    /// run such as `tack run --otlp`; `None` leaves it to the trace writer's
    /// limits (a part closes after 1,000 trials or two minutes).
    pub visible_within: Option<std::time::Duration>,
}

/// Slice `index` (1-based) of `count` of a plan's trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: u32,
    pub count: u32,
}

impl ShardSpec {
    /// Whether the trial at `position` in plan order belongs to this shard.
    /// Round-robin over plan order rather than a hash of the trial id: the
    /// plan order is already a pure function of the suite and the flags, so
    /// it is as machine-independent as a hash, and round-robin keeps shards
    /// within one trial of each other in size (and mixes variants and tasks
    /// into every shard) where a hash could leave one shard empty.
    pub fn owns(&self, position: usize) -> bool {
        self.count > 0 && position % self.count as usize == (self.index as usize).wrapping_sub(1)
    }
}

/// One trial to run.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    /// 0 the first time this (variant, task, trial) runs; each rerun (after
    /// an infra error, or of a trial a crash cut off) counts up.
    pub attempt: u32,
    pub seed: u64,
    pub keep_failed_workspace: bool,
    pub replay: Option<Arc<RecordedAnswers>>,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no variant named `{name}` in suite `{suite}`; its variants are: {known}")]
    UnknownVariant {
        name: String,
        suite: String,
        known: String,
    },
    #[error("no task named `{name}` in suite `{suite}`; its tasks are: {known}")]
    UnknownTask {
        name: String,
        suite: String,
        known: String,
    },
    #[error("variant `{variant}`: {message}")]
    Variant { variant: String, message: String },
    #[error("nothing to run: --trials must be at least 1")]
    NoTrials,
    #[error(
        "task `{task}` runs only in its container image ({reasons}), and tack has no container \
         backend here; leave it out with --task (the other tasks: {others})"
    )]
    NeedsContainer {
        task: String,
        reasons: String,
        others: String,
    },
    #[error("shard {index}/{count} is out of range: the index must be between 1 and the count")]
    BadShard { index: u32, count: u32 },
}

impl TrialSpec {
    /// The same trial, run again: same seed, its own id and journal.
    pub fn next_attempt(&self) -> TrialSpec {
        self.with_attempt(self.attempt + 1)
    }

    pub fn with_attempt(&self, attempt: u32) -> TrialSpec {
        TrialSpec {
            trial_id: tack_protocol::trial_id(&self.variant, &self.task, self.trial_index, attempt),
            attempt,
            ..self.clone()
        }
    }
}

impl std::fmt::Debug for RunPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPlan")
            .field("suite", &self.suite.name)
            .field("variants", &self.variants)
            .field("tasks", &self.tasks)
            .field("trials_per_task", &self.trials_per_task)
            .field("run_id", &self.run_id)
            .field("interactive", &self.interactive.is_some())
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

impl RunPlan {
    /// What the agents' and checks' commands must not read: the suite's
    /// tasks (hidden checks, reference solutions), and the traces and
    /// reports directories this run uses, which hold the same from earlier
    /// runs. Paths that do not exist yet are left out (nothing to hide).
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        let mut hidden = self.suite.hidden_paths();
        for dir in std::iter::once(&self.traces_root).chain(&self.hidden) {
            if let Ok(real) = dir.canonicalize() {
                hidden.push(real);
            }
        }
        hidden.dedup();
        hidden
    }

    /// Checks the whole plan before anything runs: the selection, and that
    /// every variant can run here.
    pub fn validate(&self) -> Result<(), crate::RunError> {
        self.trials(&Models::new()?)?;
        // --rerun-variant and --rerun-task name the suite's own, as -v and
        // -t do: a misspelt one would rerun nothing and say all is done.
        self.variants_named(&self.rerun.variants)?;
        self.tasks_named(&self.rerun.tasks)?;
        if let Some(shard) = self.shard
            && (shard.index == 0 || shard.index > shard.count)
        {
            return Err(PlanError::BadShard {
                index: shard.index,
                count: shard.count,
            }
            .into());
        }
        Ok(())
    }

    /// This run's trials: the whole plan, or this shard's slice of it.
    pub fn shard_trials(&self, models: &Models) -> Result<Vec<TrialSpec>, PlanError> {
        let all = self.trials(models)?;
        Ok(match self.shard {
            None => all,
            Some(shard) => all
                .into_iter()
                .enumerate()
                .filter(|(position, _)| shard.owns(*position))
                .map(|(_, spec)| spec)
                .collect(),
        })
    }

    pub fn selected_variants(&self) -> Result<Vec<&Variant>, PlanError> {
        self.variants_named(&self.variants)
    }

    /// The suite's variants `wanted` names (all when it names none).
    fn variants_named(&self, wanted: &[String]) -> Result<Vec<&Variant>, PlanError> {
        select(&self.suite.variants, wanted, |v| &v.name).map_err(|name| {
            PlanError::UnknownVariant {
                name: name.clone(),
                suite: self.suite.name.clone(),
                known: names(self.suite.variants.iter().map(|v| v.name.as_str())),
            }
        })
    }

    /// The suite's tasks `wanted` names (all when it names none).
    fn tasks_named(&self, wanted: &[String]) -> Result<Vec<&Task>, PlanError> {
        select(&self.suite.tasks, wanted, |t| &t.id).map_err(|name| PlanError::UnknownTask {
            name: name.clone(),
            suite: self.suite.name.clone(),
            known: names(self.suite.tasks.iter().map(|t| t.id.as_str())),
        })
    }

    /// The tasks named with `--task`, else every task this machine can
    /// run: a task that requires its container image is left out (and
    /// said so, [`left_out_for_container`](Self::left_out_for_container))
    /// unless named.
    pub fn selected_tasks(&self) -> Result<Vec<&Task>, PlanError> {
        let mut tasks = self.tasks_named(&self.tasks)?;
        if self.tasks.is_empty() && tasks.iter().any(|t| !t.requires_container()) {
            tasks.retain(|t| !t.requires_container());
        }
        Ok(tasks)
    }

    /// The tasks left out of a run without `--task` because they require
    /// their container image.
    pub fn left_out_for_container(&self) -> Vec<&Task> {
        if !self.tasks.is_empty() || self.suite.tasks.iter().all(|t| t.requires_container()) {
            return Vec::new();
        }
        self.suite
            .tasks
            .iter()
            .filter(|t| t.requires_container())
            .collect()
    }

    /// Every trial, variant-major, after checking that each variant can run
    /// (its tools, its sandbox profile on this machine, its model).
    pub fn trials(&self, models: &Models) -> Result<Vec<TrialSpec>, PlanError> {
        if self.trials_per_task == 0 {
            return Err(PlanError::NoTrials);
        }
        let variants = self.selected_variants()?;
        let tasks = self.selected_tasks()?;
        if let Some(task) = tasks.iter().find(|t| t.requires_container()) {
            return Err(PlanError::NeedsContainer {
                task: task.id.clone(),
                reasons: task.environment.container_reasons.join("; "),
                others: names(
                    tasks
                        .iter()
                        .filter(|t| !t.requires_container())
                        .map(|t| t.id.as_str()),
                ),
            });
        }
        for variant in &variants {
            check_variant(variant, models)?;
        }
        let mut trials = Vec::new();
        for variant in &variants {
            for task in &tasks {
                for index in 0..self.trials_per_task {
                    trials.push(TrialSpec {
                        trial_id: tack_protocol::trial_id(&variant.name, &task.id, index, 0),
                        variant: variant.name.clone(),
                        task: task.id.clone(),
                        trial_index: index,
                        attempt: 0,
                        seed: trial_seed(self.seed, &variant.name, &task.id, index),
                        keep_failed_workspace: self.keep_failed_workspaces,
                        replay: self.replay.clone(),
                    });
                }
            }
        }
        Ok(trials)
    }
}

fn check_variant(variant: &Variant, models: &Models) -> Result<(), PlanError> {
    let ctx = ToolContext {
        workspace: PathBuf::new(),
        env: Vec::new(),
        command_timeout: std::time::Duration::from_secs(1),
        output_limit: 1,
        confinement: std::sync::Arc::new(tack_sandbox::Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    };
    Dispatcher::builtin(&variant.harness.tools, ctx).map_err(|e| PlanError::Variant {
        variant: variant.name.clone(),
        message: e.to_string(),
    })?;
    // A profile this machine cannot enforce stops the run before it starts,
    // with what is missing and how to enable it or opt out.
    tack_sandbox::check_profile(variant.harness.sandbox, tack_sandbox::probe()).map_err(|e| {
        PlanError::Variant {
            variant: variant.name.clone(),
            message: e.to_string(),
        }
    })?;
    // The tasks' checks and setup commands run under `strict` whatever the
    // agent's profile (their network is theirs to declare): a machine that
    // can give the agent `workspace_write` but not `strict` stops here, not
    // after every trial's agent has run.
    if variant.harness.sandbox == tack_protocol::SandboxProfile::WorkspaceWrite {
        tack_sandbox::check_profile(tack_protocol::SandboxProfile::Strict, tack_sandbox::probe())
            .map_err(|e| PlanError::Variant {
            variant: variant.name.clone(),
            message: format!(
                "the tasks' checks and setup commands run under strict (the network only \
                     where a task declares it): {e}"
            ),
        })?;
    }
    // An external agent is confined to its proxy's port: a machine that
    // cannot narrow the network that way stops the run here.
    if variant.agent.is_some() && variant.harness.sandbox != tack_protocol::SandboxProfile::Off {
        let narrowed =
            tack_sandbox::Confinement::for_profile(variant.harness.sandbox, Path::new("/"))
                .allowing_tcp_connect_only([1]);
        tack_sandbox::check_confinement(&narrowed, tack_sandbox::probe()).map_err(|e| {
            PlanError::Variant {
                variant: variant.name.clone(),
                message: format!(
                    "{e}; an external agent runs with network only to its recording proxy (or set harness.sandbox = \"off\" to run it unconfined)"
                ),
            }
        })?;
    }
    models
        .check(&ModelChoice::of_variant(variant))
        .map_err(|e| PlanError::Variant {
            variant: variant.name.clone(),
            message: e.to_string(),
        })
}

/// The items of `all` named in `wanted` (every one when none is); `Err`
/// holds the first wanted name that no item has.
fn select<'a, 'w, T>(
    all: &'a [T],
    wanted: &'w [String],
    name: impl Fn(&T) -> &String,
) -> Result<Vec<&'a T>, &'w String> {
    if wanted.is_empty() {
        return Ok(all.iter().collect());
    }
    if let Some(missing) = wanted
        .iter()
        .find(|w| !all.iter().any(|item| name(item) == *w))
    {
        return Err(missing);
    }
    Ok(all
        .iter()
        .filter(|item| wanted.contains(name(item)))
        .collect())
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// A trial's seed: stable across runs and machines, distinct per trial, and
/// independent of which other variants or tasks were selected.
pub fn trial_seed(run_seed: u64, variant: &str, task: &str, index: u32) -> u64 {
    let digest = Sha256::digest(format!("{run_seed}/{variant}/{task}/{index}"));
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(bytes)
}

/// The identity of a whole plan: sha256 over its sorted trial ids. Shards
/// of one plan share it whichever slice each ran.
pub fn plan_identity(trials: &[TrialSpec]) -> String {
    let mut ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    ids.sort_unstable();
    let mut hasher = Sha256::new();
    for id in ids {
        hasher.update(id.as_bytes());
        hasher.update([0u8]);
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::ShardSpec;

    #[test]
    fn every_unit_falls_in_exactly_one_shard() {
        for count in 1..=7u32 {
            for units in [0usize, 1, 5, 12, 50] {
                for position in 0..units {
                    let owners = (1..=count)
                        .filter(|&index| ShardSpec { index, count }.owns(position))
                        .count();
                    assert_eq!(owners, 1, "unit {position} with {count} shards");
                }
                let sizes: Vec<usize> = (1..=count)
                    .map(|index| {
                        (0..units)
                            .filter(|&p| ShardSpec { index, count }.owns(p))
                            .count()
                    })
                    .collect();
                let (min, max) = (sizes.iter().min(), sizes.iter().max());
                assert!(max.zip(min).is_some_and(|(max, min)| max - min <= 1));
            }
        }
    }

    #[test]
    fn an_index_outside_the_count_owns_nothing() {
        assert!(!(0..10).any(|p| ShardSpec { index: 0, count: 3 }.owns(p)));
        assert!(!(0..10).any(|p| ShardSpec { index: 4, count: 3 }.owns(p)));
    }
}
