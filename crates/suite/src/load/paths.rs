//! Checks of what a task adds for scripts written for a container: the
//! absolute paths its directories appear at, the tools it asks the host
//! for, and what marks it as needing its image.

use std::path::{Component, Path};

use crate::{SuiteError, Task};

/// Directories the sandbox mounts itself; a task's files cannot go there.
const RESERVED: [&str; 3] = ["/proc", "/dev", "/sys"];

pub(super) fn check_container_settings(file: &Path, task: &Task) -> Result<(), SuiteError> {
    check_places(file, task)?;
    check_check_paths(file, task)?;
    if let Some(at) = &task.solution.files_at {
        check_guest_path(file, "solution.files_at", at)?;
        if !task.solution_dir().is_dir() {
            return Err(SuiteError::invalid(
                file,
                "solution.files_at",
                format!(
                    "shows the task's solution/ directory, but {} is not a directory: add it or remove files_at",
                    task.solution_dir().display()
                ),
            ));
        }
    }
    check_tools(file, task)
}

/// The workdir and the places: each a path of its own.
fn check_places(file: &Path, task: &Task) -> Result<(), SuiteError> {
    let env = &task.environment;
    let mut shown: Vec<(String, &str)> = Vec::new();
    if let Some(at) = &env.workdir {
        check_guest_path(file, "environment.workdir", at)?;
        shown.push(("environment.workdir".to_string(), at));
    }
    for (i, place) in env.places.iter().enumerate() {
        let field = format!("environment.places[{i}]");
        check_guest_path(file, &format!("{field}.at"), &place.at)?;
        check_task_dir(file, task, &format!("{field}.from"), &place.from)?;
        shown.push((format!("{field}.at"), &place.at));
    }
    for (i, (field, at)) in shown.iter().enumerate() {
        if let Some((other, _)) = shown[..i].iter().find(|(_, seen)| seen == at) {
            return Err(SuiteError::invalid(
                file,
                field,
                format!("`{at}` is already where {other} appears: give each its own path"),
            ));
        }
    }
    Ok(())
}

fn check_check_paths(file: &Path, task: &Task) -> Result<(), SuiteError> {
    for (i, check) in task.checks.iter().enumerate() {
        for (name, at) in [
            ("checks_at", &check.checks_at),
            ("reward_dir", &check.reward_dir),
        ] {
            if let Some(at) = at {
                check_guest_path(file, &format!("checks[{i}].{name}"), at)?;
                // Over the workspace it would cover the agent's work (an
                // image's own WORKDIR is checked when the checks run).
                if let Some(workdir) = &task.environment.workdir
                    && crate::walls::covers_workspace(Path::new(at), Path::new(workdir))
                {
                    return Err(SuiteError::invalid(
                        file,
                        format!("checks[{i}].{name}"),
                        format!(
                            "`{at}` is where the workspace is shown (environment.workdir \
                             `{workdir}`), which it would cover; give it a path of its own \
                             (e.g. /logs/verifier, /tests)"
                        ),
                    ));
                }
            }
        }
        // The checks' copy lives under the host's temporary directory,
        // which a task with a workdir does not see (its /tmp is its own).
        let unshown = check.checks_at.is_none() && check.run.contains("TACK_CHECKS");
        if task.environment.workdir.is_some() && unshown {
            return Err(SuiteError::invalid(
                file,
                format!("checks[{i}].checks_at"),
                "is needed: the check uses $TACK_CHECKS, and a task with a workdir sees the \
                 checks' files only where checks_at shows them (e.g. \"/tests\"; \
                 $TACK_CHECKS then names that path)",
            ));
        }
    }
    Ok(())
}

fn check_tools(file: &Path, task: &Task) -> Result<(), SuiteError> {
    let env = &task.environment;
    for (i, requirement) in env.python.iter().enumerate() {
        let field = format!("environment.python[{i}]");
        let requirement = requirement.trim();
        if requirement.is_empty() || requirement.starts_with('-') {
            return Err(SuiteError::invalid(
                file,
                field,
                "must be a requirement such as `pytest==8.4.1`, not empty or a pip option",
            ));
        }
    }
    for (i, package) in env.debian.iter().enumerate() {
        let fine = package.len() >= 2
            && package.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && package
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c));
        if !fine {
            return Err(SuiteError::invalid(
                file,
                format!("environment.debian[{i}]"),
                format!(
                    "`{package}` is not a Debian package name: lower-case letters, digits, `+`, `-` and `.`, without a version"
                ),
            ));
        }
    }
    if env.requires.is_none() && !env.container_reasons.is_empty() {
        return Err(SuiteError::invalid(
            file,
            "environment.container_reasons",
            "explains `requires = \"container\"`, which the task does not set: set it or remove the reasons",
        ));
    }
    Ok(())
}

/// A path a task's directory appears at inside the sandbox: absolute,
/// normal, and not one the sandbox itself owns.
fn check_guest_path(file: &Path, field: &str, at: &str) -> Result<(), SuiteError> {
    let path = Path::new(at);
    let normal = path.is_absolute()
        && path
            .components()
            .skip(1)
            .all(|c| matches!(c, Component::Normal(_)));
    if !normal || path.components().count() < 2 {
        return Err(SuiteError::invalid(
            file,
            field,
            format!("`{at}` must be an absolute path below `/`, without `.` or `..` (e.g. `/app`)"),
        ));
    }
    if let Some(reserved) = RESERVED.iter().find(|r| path.starts_with(r)) {
        return Err(SuiteError::invalid(
            file,
            field,
            format!(
                "`{at}` is under {reserved}, which the sandbox mounts itself: choose another path"
            ),
        ));
    }
    Ok(())
}

/// A directory of the task, named relative to it.
fn check_task_dir(file: &Path, task: &Task, field: &str, from: &str) -> Result<(), SuiteError> {
    let inside = !from.trim().is_empty()
        && Path::new(from)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Err(SuiteError::invalid(
            file,
            field,
            format!("`{from}` must be a directory of the task, relative to it, without `..`"),
        ));
    }
    if !task.dir.join(from).is_dir() {
        return Err(SuiteError::invalid(
            file,
            field,
            format!(
                "{} is not a directory of the task: create it or fix the path",
                task.dir.join(from).display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_guest_path;
    use std::path::Path;

    #[test]
    fn guest_paths_are_absolute_normal_and_not_the_sandboxes() {
        let file = Path::new("task.toml");
        assert!(check_guest_path(file, "f", "/app").is_ok());
        assert!(check_guest_path(file, "f", "/logs/verifier").is_ok());
        for bad in ["app", "/", "/app/../etc", "/proc/x", "/dev", "/sys/fs", ""] {
            assert!(check_guest_path(file, "f", bad).is_err(), "{bad}");
        }
    }
}
