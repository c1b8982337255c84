//! Tasks across runs: how each task fared in every run and variant, and
//! how often identical configurations disagree on it — its flakiness —
//! for `tack view`'s task pages and the quarantine list `tack gate` reads.

use polars::prelude::*;
use serde::Serialize;

use crate::attempts::IS_SCORED;
use crate::frame::Frame;
use crate::rollup::{RollupNeeds, count_where, weight};
use crate::{AnalysisError, RunTables};
use tack_protocol::TrialOutcome;
use tack_trace::schema::{TRIALS_DIR, col};

/// One task's scored trials in one run under one variant: one
/// configuration (the same harness, model and task) tried `trials` times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRun {
    pub run_id: String,
    pub started_at: String,
    /// The run's suite: tasks of one name in two suites are two tasks.
    pub suite: String,
    pub variant: String,
    pub task: String,
    pub trials: u64,
    pub passed: u64,
}

impl TaskRun {
    /// Pairs of its trials that disagree (one passed, one did not).
    fn disagreeing_pairs(&self) -> u64 {
        self.passed * (self.trials - self.passed)
    }

    fn pairs(&self) -> u64 {
        self.trials * self.trials.saturating_sub(1) / 2
    }
}

/// How often one task's identical configurations disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskFlakiness {
    pub suite: String,
    pub task: String,
    /// Configurations (run × variant) that tried it.
    pub configurations: usize,
    /// Of those, the ones whose trials did not all end alike.
    pub mixed: usize,
    pub trials: u64,
    pub passed: u64,
    /// Of every two trials of one configuration, the share that disagree;
    /// `None` when no configuration tried it twice.
    pub disagreement: Option<f64>,
}

/// Every (run, variant, task)'s scored trials, `task` alone when given, in
/// the runs' order, then by variant and task.
pub fn task_runs(runs: &[&RunTables], task: Option<&str>) -> Result<Vec<TaskRun>, AnalysisError> {
    let mut found = Vec::new();
    for run in runs {
        let rollup = run.rollup(RollupNeeds::trials_only())?;
        let mut lazy = rollup.cube().filter(col(IS_SCORED));
        if let Some(task) = task {
            lazy = lazy.filter(col(col::TASK).eq(lit(task.to_string())));
        }
        let passed = col(col::OUTCOME).eq(lit(TrialOutcome::Passed.as_str()));
        let grouped = lazy
            .group_by([col(col::VARIANT), col(col::TASK)])
            .agg([
                weight().alias("trials"),
                count_where(passed).alias("passed"),
            ])
            .sort([col::VARIANT, col::TASK], SortMultipleOptions::default());
        let frame = Frame::collect(grouped, run.trials_dir(), TRIALS_DIR)?;
        let manifest = run.manifest();
        let variants = frame.strs(col::VARIANT)?;
        let tasks = frame.strs(col::TASK)?;
        let trials = frame.u64s("trials")?;
        let passed = frame.u64s("passed")?;
        for (((variant, task), trials), passed) in
            variants.into_iter().zip(tasks).zip(trials).zip(passed)
        {
            found.push(TaskRun {
                run_id: manifest.run_id.clone(),
                started_at: manifest.started_at.clone(),
                suite: manifest.suite.name.clone(),
                variant,
                task,
                trials,
                passed,
            });
        }
    }
    Ok(found)
}

/// Each task's flakiness over `task_runs`, the flakiest first (then by name).
pub fn flakiness(task_runs: &[TaskRun]) -> Vec<TaskFlakiness> {
    let mut by_task: std::collections::BTreeMap<(&str, &str), Vec<&TaskRun>> = Default::default();
    for run in task_runs {
        by_task
            .entry((run.suite.as_str(), run.task.as_str()))
            .or_default()
            .push(run);
    }
    let mut tasks: Vec<TaskFlakiness> = by_task
        .into_iter()
        .map(|((suite, task), runs)| {
            let pairs: u64 = runs.iter().map(|r| r.pairs()).sum();
            let disagreeing: u64 = runs.iter().map(|r| r.disagreeing_pairs()).sum();
            TaskFlakiness {
                suite: suite.to_string(),
                task: task.to_string(),
                configurations: runs.len(),
                mixed: runs.iter().filter(|r| r.disagreeing_pairs() > 0).count(),
                trials: runs.iter().map(|r| r.trials).sum(),
                passed: runs.iter().map(|r| r.passed).sum(),
                disagreement: (pairs > 0).then(|| disagreeing as f64 / pairs as f64),
            }
        })
        .collect();
    tasks.sort_by(|a, b| {
        let key = |t: &TaskFlakiness| t.disagreement.unwrap_or(-1.0);
        key(b)
            .total_cmp(&key(a))
            .then_with(|| (&a.task, &a.suite).cmp(&(&b.task, &b.suite)))
    });
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: &str, task: &str, trials: u64, passed: u64) -> TaskRun {
        TaskRun {
            run_id: "r".into(),
            started_at: String::new(),
            suite: "s".into(),
            variant: variant.into(),
            task: task.into(),
            trials,
            passed,
        }
    }

    #[test]
    fn disagreement_is_the_share_of_same_configuration_pairs_that_differ() {
        let tasks = flakiness(&[
            // 2 of 4 passed: 4 of the 6 pairs disagree.
            run("a", "flaky", 4, 2),
            // All alike: 3 pairs, none disagree.
            run("b", "flaky", 3, 3),
            run("a", "steady", 3, 0),
            // Tried once: no pair to judge.
            run("a", "once", 1, 1),
        ]);
        let names: Vec<&str> = tasks.iter().map(|t| t.task.as_str()).collect();
        assert_eq!(names, ["flaky", "steady", "once"]);
        assert_eq!(tasks[0].disagreement, Some(4.0 / 9.0));
        assert_eq!((tasks[0].configurations, tasks[0].mixed), (2, 1));
        assert_eq!(tasks[1].disagreement, Some(0.0));
        assert_eq!(tasks[2].disagreement, None);
    }

    #[test]
    fn tasks_of_one_name_in_two_suites_are_two_tasks() {
        let mut other = run("a", "flaky", 2, 2);
        other.suite = "t".into();
        let tasks = flakiness(&[run("a", "flaky", 2, 1), other]);
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].suite, "s");
        assert_eq!(tasks[0].disagreement, Some(1.0));
        assert_eq!(tasks[1].disagreement, Some(0.0));
    }
}
