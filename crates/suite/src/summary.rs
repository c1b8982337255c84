//! A suite and its soundness check for people (`tack suite show`, `tack
//! suite check`): the text the CLI prints.

use std::fmt::Write as _;

use crate::{Suite, Task, TaskSoundness};

/// How a suite check came out. A task that runs only in its container image
/// is not checked here: said, but not counted against the suite. Nor is one
/// that could not be checked (its image did not build, its setup failed):
/// that says nothing of its checks, but the suite is not shown sound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoundnessTally {
    pub checked: usize,
    pub unsound: usize,
    /// Tasks left unchecked (they need their container image).
    pub unchecked: usize,
    /// Tasks whose check could not run (`TaskSoundness::detail` says why).
    pub failed: usize,
}

impl SoundnessTally {
    pub fn of(results: &[TaskSoundness]) -> SoundnessTally {
        let count = |keep: fn(&TaskSoundness) -> bool| results.iter().filter(|r| keep(r)).count();
        SoundnessTally {
            checked: count(|r| r.checked),
            unsound: count(|r| r.checked && !r.sound()),
            unchecked: count(|r| r.requires_container),
            failed: count(|r| !r.checked && !r.requires_container),
        }
    }

    /// Every task that could be checked was, and is sound.
    pub fn sound(&self) -> bool {
        self.unsound == 0 && self.failed == 0
    }
}

/// One line per task (ok, FAIL or SKIP, and what went the wrong way), then
/// how many of the checked tasks are sound.
pub fn soundness_text(suite: &str, results: &[TaskSoundness]) -> String {
    let yes = |value: bool| if value { "yes" } else { "no" };
    let mut out = String::new();
    for result in results {
        let mark = match (result.sound(), result.requires_container, result.checked) {
            (true, _, _) => "ok  ",
            (false, true, _) => "SKIP",
            (false, false, false) => "ERR ",
            (false, false, true) => "FAIL",
        };
        if result.requires_container {
            let _ = writeln!(out, "{mark} {:<28} not checked", result.task);
        } else if !result.checked {
            let _ = writeln!(out, "{mark} {:<28} could not be checked", result.task);
        } else {
            // Decoys that fail a check are what a sound task's are: said,
            // so that `suite check` shows it tried them.
            let decoys = match result.decoys {
                0 => String::new(),
                n => format!(
                    "  decoys fail: {} of {n}",
                    n.saturating_sub(result.passing_decoys.len())
                ),
            };
            let line = format!(
                "{mark} {:<28} fails untouched: {:<3}  passes with solution: {:<3}{decoys}",
                result.task,
                yes(result.fails_untouched),
                yes(result.passes_with_solution)
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let notes = result.detail.iter().chain(&result.solution_failed);
        for line in notes.flat_map(|d| d.lines()) {
            let _ = writeln!(out, "       {line}");
        }
    }
    let tally = SoundnessTally::of(results);
    let skipped = match tally.unchecked {
        0 => String::new(),
        1 => "; 1 not checked (it needs its container image)".to_string(),
        n => format!("; {n} not checked (they need their container image)"),
    };
    let failed = match tally.failed {
        0 => String::new(),
        n => format!("; {n} could not be checked (ERR: the error is above)"),
    };
    let _ = writeln!(
        out,
        "\n{} of {} sound in suite `{suite}`{skipped}{failed}",
        tally.checked - tally.unsound,
        // Those that could not be checked were meant to be: "0 of 0 sound"
        // said nothing of them.
        tack_protocol::count(tally.checked + tally.failed, "task")
    );
    // Check output and errors quote the task's own commands: shown, not
    // obeyed by the terminal.
    tack_protocol::printable(&out).into_owned()
}

/// The suite's variants and tasks, one line each, the variants' columns as
/// wide as their longest name and model.
pub fn suite_text(suite: &Suite) -> String {
    let about = if suite.description.is_empty() {
        String::new()
    } else {
        format!(" — {}", suite.description)
    };
    let mut out = format!(
        "suite {}{about}\n{} per task, seed {}\n\nvariants:\n",
        suite.name,
        tack_protocol::count(suite.trials, "trial"),
        suite.seed
    );
    let models: Vec<String> = suite.variants.iter().map(|v| v.model.to_string()).collect();
    let name_width = suite
        .variants
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(0);
    let model_width = models.iter().map(String::len).max().unwrap_or(0);
    for (v, model) in suite.variants.iter().zip(&models) {
        let _ = writeln!(
            out,
            "  {:<name_width$}  model {:<model_width$}  results {:<12} max steps {:<3} sandbox {:<15} {}",
            v.name,
            model,
            v.harness.tool_results.as_str(),
            v.harness.max_steps,
            v.harness.sandbox.as_str(),
            v.description
        );
    }
    out.push_str("\ntasks:\n");
    for t in &suite.tasks {
        let needs = network_needs(t);
        let network = if needs.is_empty() {
            String::new()
        } else {
            format!("  network for: {}", needs.join(", "))
        };
        let env = &t.environment;
        let runs_in = match (&env.image, &env.dockerfile, env.mode) {
            (None, None, _) if t.requires_container() => "needs its container image",
            (None, None, _) => "host",
            (_, _, tack_protocol::ImageMode::Engine) => "image, engine mode",
            _ => "image",
        };
        let tags = match t.tags.is_empty() {
            true => String::new(),
            false => format!("  [{}]", t.tags.join(", ")),
        };
        let _ = writeln!(out, "  {:<28} {runs_in}{tags}{network}", t.id);
    }
    // Descriptions and tags are the suite author's (an imported suite's
    // come from elsewhere): shown, not obeyed by the terminal.
    tack_protocol::printable(&out).into_owned()
}

/// The steps of a task that declared they need the network (and so run
/// with `workspace_write` instead of `strict`): shown, so that no task
/// gets more than its variant's sandbox without anyone seeing it.
pub fn network_needs(task: &Task) -> Vec<String> {
    let setup = task.environment.setup_network.then(|| "setup".to_string());
    let checks = task
        .checks
        .iter()
        .filter(|c| c.network)
        .map(|c| format!("check `{}`", c.name));
    setup.into_iter().chain(checks).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, sound: bool, container: bool) -> TaskSoundness {
        TaskSoundness {
            task: name.into(),
            checked: !container,
            fails_untouched: true,
            passes_with_solution: sound,
            detail: (!sound).then(|| "line 1\nline 2".to_string()),
            solution_failed: None,
            requires_container: container,
            passing_decoys: Vec::new(),
            decoys: 0,
        }
    }

    #[test]
    fn the_decoys_tried_are_said() {
        let tried = TaskSoundness {
            decoys: 2,
            ..task("a", true, false)
        };
        let caught = TaskSoundness {
            decoys: 2,
            passing_decoys: vec![1],
            ..task("b", true, false)
        };
        let text = soundness_text("s", &[tried, caught]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with("solution: yes  decoys fail: 2 of 2"),
            "{text}"
        );
        assert!(lines[1].ends_with("decoys fail: 1 of 2"), "{text}");
    }

    #[test]
    fn unchecked_tasks_are_said_but_not_counted() {
        let results = [
            task("a", true, false),
            task("b", false, false),
            task("c", false, true),
        ];
        let tally = SoundnessTally::of(&results);
        assert_eq!(
            tally,
            SoundnessTally {
                checked: 2,
                unsound: 1,
                unchecked: 1,
                failed: 0,
            }
        );
        let text = soundness_text("s", &results);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("ok   a ") && lines[0].ends_with("solution: yes"));
        assert!(lines[1].starts_with("FAIL b ") && lines[1].ends_with("solution: no"));
        assert_eq!(lines[2], "       line 1");
        assert!(lines[4].starts_with("SKIP c ") && lines[4].ends_with("not checked"));
        assert_eq!(
            lines.last().copied(),
            Some("1 of 2 tasks sound in suite `s`; 1 not checked (it needs its container image)")
        );
    }

    fn broken_again() -> TaskSoundness {
        TaskSoundness {
            checked: false,
            fails_untouched: false,
            passes_with_solution: false,
            ..task("b", false, false)
        }
    }

    #[test]
    fn a_failed_solution_script_is_said_and_an_unchecked_task_says_so() {
        let solved_anyway = TaskSoundness {
            solution_failed: Some("the solution script exited with code 1".into()),
            ..task("a", true, false)
        };
        let text = soundness_text("s", &[solved_anyway, broken_again()]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("ok   a ") && lines[0].ends_with("solution: yes"));
        assert_eq!(lines[1], "       the solution script exited with code 1");
        assert_eq!(
            lines[2].trim_end(),
            "ERR  b                            could not be checked"
        );
        assert_eq!(
            lines.last().copied(),
            Some(
                "1 of 2 tasks sound in suite `s`; 1 could not be checked (ERR: the error is above)"
            )
        );
        let tally = SoundnessTally::of(&[broken_again()]);
        assert_eq!((tally.checked, tally.failed, tally.sound()), (0, 1, false));
    }
}
