//! What an import did, for people (`tack import`'s account on stderr): what
//! was converted and how, what was skipped and why, and what to run next.

use std::fmt::Write as _;

use crate::harbor::{SuiteImport, TaskMode};
use crate::harbor_job::JobImport;
use crate::inspect::LogImport;

/// The Harbor import, one line per task (and its reasons, installs and
/// differences from the image), then the skipped and unreadable sources.
pub fn harbor_summary(import: &SuiteImport) -> String {
    let mut out = String::new();
    if let Some(path) = &import.suite_file_written {
        let _ = writeln!(
            out,
            "wrote {} (an oracle variant; add your models)",
            path.display()
        );
    }
    for task in &import.converted {
        let status = match (task.mode, task.container_reasons.is_empty()) {
            (TaskMode::Image, _) if task.engine => "imported (its image, in engine mode)",
            (TaskMode::Image, _) => "imported (its image)",
            (TaskMode::Host, true) => "imported (on the host)",
            (TaskMode::Host, false) => "imported, requires container",
        };
        let _ = writeln!(
            out,
            "{status}: {} from {}",
            task.task,
            task.source.display()
        );
        for reason in &task.container_reasons {
            let _ = writeln!(out, "  needs its image: {reason}");
        }
        if !task.python.is_empty() {
            let _ = writeln!(out, "  python: {}", task.python.join(" "));
        }
        if !task.debian.is_empty() {
            let _ = writeln!(out, "  debian (from the host): {}", task.debian.join(" "));
        }
        for key in &task.unknown_keys {
            let _ = writeln!(out, "  {}", crate::harbor::unknown_key_line(key));
        }
        let noted = match (task.mode, task.notes.len()) {
            (_, 0) => continue,
            (TaskMode::Image, 1) => "1 setting tack does not enforce".to_string(),
            (TaskMode::Image, n) => format!("{n} settings tack does not enforce"),
            (TaskMode::Host, 1) => "1 difference from the image".to_string(),
            (TaskMode::Host, n) => format!("{n} differences from the image"),
        };
        let _ = writeln!(
            out,
            "  {noted} noted in {}",
            task.dir.join("task.toml").display()
        );
    }
    let listed = [
        ("skipped", &import.skipped),
        ("refused", &import.refused),
        ("error:", &import.unreadable),
    ];
    for (what, tasks) in listed {
        for task in tasks {
            let _ = writeln!(out, "{what} {}: {}", task.source.display(), task.reason);
        }
    }
    out
}

/// One Inspect log's import: its trials, the samples skipped, token counts
/// that disagree with Inspect's, the event kinds not imported, and how to
/// report on the run.
pub fn inspect_summary(import: &LogImport) -> String {
    let mut out = String::new();
    let passed = import
        .trials
        .iter()
        .filter(|t| t.outcome == "passed")
        .count();
    let _ = match &import.run_dir {
        Some(dir) => writeln!(
            out,
            "{}: {} ({passed} passed) of task {} on {} into {}",
            import.log.display(),
            tack_protocol::count(import.trials.len(), "trial"),
            import.task,
            import.model,
            dir.display()
        ),
        None if import.no_samples => writeln!(
            out,
            "{}: nothing imported, no run written: the log holds no samples (Inspect writes \
             none with --no-log-samples, or before the first finishes); import a log with them",
            import.log.display()
        ),
        None => writeln!(
            out,
            "{}: nothing imported, no run written",
            import.log.display()
        ),
    };
    if import.run_dir.is_some() && import.log_status != "success" {
        let _ = writeln!(
            out,
            "  note: the log's status is `{}`: Inspect did not finish this eval, so the run \
             holds the samples it wrote and is marked interrupted",
            import.log_status
        );
    }
    for skipped in &import.skipped {
        let _ = writeln!(out, "  skipped {}: {}", skipped.sample, skipped.reason);
    }
    for trial in &import.trials {
        if trial.usage != trial.inspect_usage {
            let _ = writeln!(
                out,
                "  note: {}: the model events count {} tokens, Inspect's total says {} \
                 (calls nested inside tool events are not imported)",
                trial.trial_id,
                trial.usage.total(),
                trial.inspect_usage.total()
            );
        }
    }
    if !import.ignored_events.is_empty() {
        let _ = writeln!(
            out,
            "  not imported (no tack counterpart): {}",
            counted(&import.ignored_events)
        );
    }
    if let Some(dir) = &import.run_dir {
        let _ = writeln!(out, "  tack report {}", dir.display());
    }
    out
}

/// One Harbor job's import: its trials by variant, the trial directories
/// skipped, what had no place in a tack run, and how to report on it.
pub fn harbor_job_summary(import: &JobImport) -> String {
    let mut out = String::new();
    let passed = import
        .trials
        .iter()
        .filter(|t| t.outcome == "passed")
        .count();
    let with_trajectory = import.trials.iter().filter(|t| t.trajectory).count();
    let _ = match &import.run_dir {
        Some(dir) => writeln!(
            out,
            "{}: {} ({passed} passed, {with_trajectory} with a trajectory) into {}",
            import.job_dir.display(),
            tack_protocol::count(import.trials.len(), "trial"),
            dir.display()
        ),
        None => writeln!(
            out,
            "{}: nothing imported, no run written",
            import.job_dir.display()
        ),
    };
    for skipped in &import.skipped {
        let _ = writeln!(
            out,
            "  skipped {}: {}",
            skipped.path.display(),
            skipped.reason
        );
    }
    if !import.not_carried.is_empty() {
        let _ = writeln!(out, "  not carried over: {}", counted(&import.not_carried));
    }
    if let Some(dir) = &import.run_dir {
        let _ = writeln!(out, "  tack report {}", dir.display());
    }
    out
}

/// `kind ×count, …`: what an import left out, by kind.
fn counted(kinds: &std::collections::BTreeMap<String, u64>) -> String {
    let kinds: Vec<String> = kinds
        .iter()
        .map(|(kind, count)| format!("{kind} ×{count}"))
        .collect();
    kinds.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harbor::{ConvertedTask, SkippedTask};
    use std::collections::BTreeMap;

    #[test]
    fn a_harbor_import_lists_each_task_and_why_one_needs_its_image() {
        let import = SuiteImport {
            suite_file_written: Some("s/suite.toml".into()),
            converted: vec![ConvertedTask {
                source: "h/t".into(),
                task: "t".into(),
                dir: "s/tasks/t".into(),
                mode: crate::harbor::TaskMode::Host,
                engine: false,
                container_reasons: vec!["RUN make".into()],
                python: vec!["pytest==8".into()],
                debian: vec![],
                notes: vec!["a".into()],
                unknown_keys: vec![
                    "`environment.memroy_mb` is not a Harbor setting: did you mean `memory_mb`?"
                        .into(),
                ],
            }],
            refused: vec![SkippedTask {
                source: "h/l".into(),
                reason: "h/l/tests links to /etc, outside the task".into(),
            }],
            unreadable: vec![SkippedTask {
                source: "h/x".into(),
                reason: "no task.toml".into(),
            }],
            ..SuiteImport::default()
        };
        assert_eq!(
            harbor_summary(&import),
            "wrote s/suite.toml (an oracle variant; add your models)\n\
             imported, requires container: t from h/t\n\
             \x20 needs its image: RUN make\n\
             \x20 python: pytest==8\n\
             \x20 task.toml: `environment.memroy_mb` is not a Harbor setting: did you mean `memory_mb`? (Harbor ignores it, and so did the import)\n\
             \x20 1 difference from the image noted in s/tasks/t/task.toml\n\
             refused h/l: h/l/tests links to /etc, outside the task\n\
             error: h/x: no task.toml\n"
        );
    }

    #[test]
    fn an_inspect_import_without_a_run_says_so() {
        let import = LogImport {
            log: "logs/a.eval".into(),
            run_dir: None,
            run_id: "r".into(),
            task: "t".into(),
            model: "m".into(),
            variant: "m".into(),
            trials: vec![],
            skipped: vec![],
            ignored_events: BTreeMap::from([("state".to_string(), 3)]),
            log_status: "success".into(),
            no_samples: false,
        };
        assert_eq!(
            inspect_summary(&import),
            "logs/a.eval: nothing imported, no run written\n\
             \x20 not imported (no tack counterpart): state ×3\n"
        );
    }
}
