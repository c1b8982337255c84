//! `tack run --resume`: a run that stopped (killed, Ctrl-C, a machine
//! restart) continues where it was. Its finished trials are kept as they
//! are; trials a crash cut off keep their partial record as a `cancelled`
//! attempt and run again from the start as the next attempt; nothing that
//! finished runs twice.

use std::collections::HashMap;

use tack_protocol::TrialOutcome;
use tack_trace::{Manifest, RecordedTrial, Resume, RunStatus, RunWriter};

use crate::{RunError, RunPlan, ShardSpec, TrialSpec, rfc3339_now};

/// The run `tack run --resume DIR` names, as recorded: what it planned,
/// where its traces live, and which shard it was.
#[derive(Debug, Clone)]
pub struct ResumedRun {
    pub manifest: Manifest,
    /// The directory holding the run directory.
    pub traces_root: std::path::PathBuf,
    pub shard: Option<ShardSpec>,
}

impl ResumedRun {
    /// Reads the run in `dir`, refusing one that cannot be resumed.
    pub fn read(dir: &std::path::Path) -> Result<ResumedRun, tack_trace::RunsError> {
        let manifest = tack_trace::resumable_run(dir)?;
        let shard = manifest.shard.as_ref().map(|s| ShardSpec {
            index: s.index,
            count: s.count,
        });
        Ok(ResumedRun {
            traces_root: dir.parent().map(Into::into).unwrap_or_default(),
            manifest,
            shard,
        })
    }

    /// A choice the command line left open (`given` empty): the run's own.
    pub fn or_recorded(
        resumed: Option<&ResumedRun>,
        given: &[String],
        recorded: impl Fn(&Manifest) -> Vec<String>,
    ) -> Vec<String> {
        match resumed {
            Some(run) if given.is_empty() => recorded(&run.manifest),
            _ => given.to_vec(),
        }
    }
}

/// The id of a new run of `suite`: a shard on a shared traces volume gets a
/// directory of its own.
pub fn new_run_id_for(suite: &str, shard: Option<ShardSpec>) -> String {
    let run_id = crate::new_run_id(suite);
    match shard {
        Some(shard) => format!("{run_id}-shard{}of{}", shard.index, shard.count),
        None => run_id,
    }
}

/// Finished trials a resume runs again, as new attempts, besides those a
/// crash cut off: those whose latest attempt ended in one of `outcomes`,
/// of `tasks` and `variants` (each empty: any). Nothing when all three are
/// empty. Every attempt stays in the traces; reports count the latest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rerun {
    pub outcomes: Vec<TrialOutcome>,
    pub tasks: Vec<String>,
    pub variants: Vec<String>,
}

impl Rerun {
    fn is_empty(&self) -> bool {
        self.outcomes.is_empty() && self.tasks.is_empty() && self.variants.is_empty()
    }

    /// Whether a trial of `variant` and `task` whose latest attempt ended
    /// in `outcome` runs again.
    fn wants(&self, variant: &str, task: &str, outcome: &str) -> bool {
        !self.is_empty()
            && (self.outcomes.is_empty() || self.outcomes.iter().any(|o| o.as_str() == outcome))
            && (self.tasks.is_empty() || self.tasks.iter().any(|t| t == task))
            && (self.variants.is_empty() || self.variants.iter().any(|v| v == variant))
    }
}

pub(crate) struct Resumed {
    pub writer: RunWriter,
    /// The run's own manifest, with this resume added.
    pub manifest: Manifest,
    pub to_run: Vec<TrialSpec>,
}

/// The recorded run's manifest, once `fresh` (the manifest this invocation
/// would write; its fingerprint is not compared, so one without serves)
/// is found to plan the same run. Cheap: a resume checks it before it
/// provisions tools or builds images.
pub(crate) fn check(plan: &RunPlan, fresh: &Manifest) -> Result<Manifest, RunError> {
    let run_dir = plan.traces_root.join(&plan.run_id);
    let manifest = Manifest::read(&run_dir).map_err(|e| RunError::NotResumable {
        run_dir: run_dir.clone(),
        reason: format!("{e}; is it a run's trace directory?"),
    })?;
    // Shards of one plan differ by their index alone, which a merge allows
    // and a resume must not: the run would take another shard's slice.
    let index = |m: &Manifest| m.shard.as_ref().map(|s| (s.index, s.count));
    let difference = manifest.plan_difference(fresh).or_else(|| {
        match (index(&manifest), index(fresh)) {
            (Some((was, count)), Some((now, _))) if was != now => Some(format!(
                "the shard differs: {was}/{count} recorded, {now}/{count} now (leave --shard out \
                 to keep the run's own)"
            )),
            _ => None,
        }
    });
    match difference {
        Some(difference) => Err(RunError::PlanMismatch {
            run_dir,
            difference,
        }),
        None => Ok(manifest),
    }
}

/// Checks that `fresh` plans the same run as the recorded one ([`check`]),
/// recovers the run's journals, and works out which of `planned` still have
/// to run.
pub(crate) fn prepare(
    plan: &RunPlan,
    fresh: Manifest,
    planned: Vec<TrialSpec>,
) -> Result<Resumed, RunError> {
    let mut manifest = check(plan, &fresh)?;
    let run_dir = plan.traces_root.join(&plan.run_id);
    let not_resumable = |reason: String| RunError::NotResumable {
        run_dir: run_dir.clone(),
        reason,
    };
    let writer = tack_trace::run_writer(&run_dir);
    if writer.is_live() {
        return Err(not_resumable(format!(
            "{writer} is still writing it (see {}); resume once it has stopped",
            tack_trace::PID_FILE
        )));
    }
    tack_trace::recover_journals(&run_dir)?;
    let recorded = tack_trace::recorded_trials(&run_dir)?;
    let selection = select(planned, &recorded, &plan.rerun);
    manifest.resumes.push(Resume {
        at: rfc3339_now(),
        command_line: plan.command_line.clone(),
        trials_kept: selection.kept,
        trials_interrupted: selection.interrupted,
        trials_to_run: selection.to_run.len() as u32,
        trials_rerun: selection.rerun,
    });
    manifest.status = RunStatus::Running;
    manifest.finished_at = None;
    let writer = RunWriter::reopen(&run_dir, &manifest)?;
    Ok(Resumed {
        writer,
        manifest,
        to_run: selection.to_run,
    })
}

struct Selection {
    to_run: Vec<TrialSpec>,
    kept: u32,
    interrupted: u32,
    /// Finished trials run again because `rerun` asked.
    rerun: u32,
}

/// A planned trial is done once any attempt of it ended other than
/// `cancelled`, unless `rerun` wants it again for how its latest attempt
/// ended; otherwise it runs as the attempt after the last recorded.
fn select(planned: Vec<TrialSpec>, recorded: &[RecordedTrial], rerun: &Rerun) -> Selection {
    let mut attempts: HashMap<(&str, &str, u32), Vec<&RecordedTrial>> = HashMap::new();
    for trial in recorded {
        attempts
            .entry((&trial.variant, &trial.task, trial.trial_index))
            .or_default()
            .push(trial);
    }
    let cancelled = tack_protocol::TrialOutcome::Cancelled.as_str();
    let mut selection = Selection {
        to_run: Vec::new(),
        kept: 0,
        interrupted: 0,
        rerun: 0,
    };
    for spec in planned {
        let key = (spec.variant.as_str(), spec.task.as_str(), spec.trial_index);
        let earlier = attempts.get(&key).map(Vec::as_slice).unwrap_or_default();
        let latest = earlier.iter().max_by_key(|t| t.attempt);
        if let Some(latest) = latest.filter(|t| rerun.wants(&t.variant, &t.task, &t.outcome)) {
            selection.rerun += 1;
            selection.to_run.push(spec.with_attempt(latest.attempt + 1));
            continue;
        }
        if earlier.iter().any(|t| t.outcome != cancelled) {
            selection.kept += 1;
            continue;
        }
        if !earlier.is_empty() {
            selection.interrupted += 1;
        }
        let next = earlier.iter().map(|t| t.attempt + 1).max().unwrap_or(0);
        selection.to_run.push(spec.with_attempt(next));
    }
    selection
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(index: u32) -> TrialSpec {
        TrialSpec {
            trial_id: format!("v--t--{index}"),
            variant: "v".to_string(),
            task: "t".to_string(),
            trial_index: index,
            attempt: 0,
            seed: 1,
            keep_failed_workspace: false,
            replay: None,
        }
    }

    fn recorded(index: u32, attempt: u32, outcome: &str) -> RecordedTrial {
        RecordedTrial {
            trial_id: spec(index).with_attempt(attempt).trial_id,
            variant: "v".to_string(),
            task: "t".to_string(),
            trial_index: index,
            attempt,
            outcome: outcome.to_string(),
        }
    }

    #[test]
    fn finished_trials_are_kept_and_cut_off_ones_run_as_the_next_attempt() {
        let recorded = [
            recorded(0, 0, "passed"),
            recorded(1, 0, "cancelled"),
            recorded(2, 0, "cancelled"),
            recorded(2, 1, "infra_error"),
            recorded(3, 0, "cancelled"),
            recorded(3, 1, "cancelled"),
        ];
        let selection = select((0..5).map(spec).collect(), &recorded, &Rerun::default());
        assert_eq!((selection.kept, selection.interrupted), (2, 2));
        let ids: Vec<&str> = selection
            .to_run
            .iter()
            .map(|s| s.trial_id.as_str())
            .collect();
        assert_eq!(ids, ["v--t--1--attempt1", "v--t--3--attempt2", "v--t--4"]);
        assert_eq!(selection.to_run[1].attempt, 2);
    }

    #[test]
    fn a_rerun_runs_finished_trials_again_by_how_their_latest_attempt_ended() {
        let recorded = [
            recorded(0, 0, "passed"),
            recorded(1, 0, "infra_error"),
            recorded(2, 0, "infra_error"),
            // Its latest attempt passed: not run again.
            recorded(2, 1, "passed"),
            recorded(3, 0, "verification_failed"),
            recorded(4, 0, "cancelled"),
        ];
        let rerun = Rerun {
            outcomes: vec![TrialOutcome::InfraError, TrialOutcome::Cancelled],
            ..Rerun::default()
        };
        let selection = select((0..5).map(spec).collect(), &recorded, &rerun);
        let ids: Vec<&str> = selection
            .to_run
            .iter()
            .map(|s| s.trial_id.as_str())
            .collect();
        assert_eq!(ids, ["v--t--1--attempt1", "v--t--4--attempt1"]);
        assert_eq!((selection.kept, selection.rerun), (3, 2));
        // Narrowed to another task: nothing of task `t` runs again.
        let elsewhere = Rerun {
            tasks: vec!["u".to_string()],
            ..rerun.clone()
        };
        let selection = select((0..5).map(spec).collect(), &recorded, &elsewhere);
        assert_eq!(selection.rerun, 0);
        // A task alone reruns every finished trial of it.
        let whole_task = Rerun {
            tasks: vec!["t".to_string()],
            ..Rerun::default()
        };
        let selection = select((0..5).map(spec).collect(), &recorded, &whole_task);
        assert_eq!(selection.rerun, 5);
    }
}
