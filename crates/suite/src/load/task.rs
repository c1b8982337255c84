//! Checks of a task's settings beyond its solution: the harness limits it
//! overrides, its checks and the files they name, its environment, and the
//! paths its edits touch.

use std::path::{Component, Path};

use tack_protocol::Edit;

use crate::{SuiteError, Task};

/// A task's `[limits]` replace the variant's (see `Task::harness_for`), so
/// they obey the same rules.
pub(super) fn check_limits(file: &Path, task: &Task) -> Result<(), SuiteError> {
    if task.limits.max_steps == Some(0) {
        return Err(SuiteError::invalid(
            file,
            "limits.max_steps",
            "must be at least 1, got 0: it counts model calls, and with 0 no trial gets one; leave it out to use the variant's",
        ));
    }
    if task.limits.command_timeout_secs == Some(0) {
        return Err(SuiteError::invalid(
            file,
            "limits.command_timeout_secs",
            "must be at least 1, got 0: every bash command would time out at once; leave it out to use the variant's",
        ));
    }
    if task.limits.memory_mb == Some(0) {
        return Err(SuiteError::invalid(
            file,
            "limits.memory_mb",
            "must be at least 1, got 0: no command could start; leave it out for 4096",
        ));
    }
    if task.limits.max_wall_secs == Some(0) {
        return Err(SuiteError::invalid(
            file,
            "limits.max_wall_secs",
            "must be at least 1, got 0: the agent would be stopped at once; leave it out to use the variant's",
        ));
    }
    if let Some(cpus) = task.environment.cpus
        && !(cpus.is_finite() && cpus > 0.0)
    {
        return Err(SuiteError::invalid(
            file,
            "environment.cpus",
            format!("must be a number of CPUs above 0 (e.g. 1 or 1.5), got {cpus}"),
        ));
    }
    // The engines refuse less than 6 MiB for a container.
    if let Some(memory) = task.environment.memory_mb.filter(|mb| *mb < 6) {
        return Err(SuiteError::invalid(
            file,
            "environment.memory_mb",
            format!("must be at least 6 (MiB; the engines' least), got {memory}"),
        ));
    }
    Ok(())
}

pub(super) fn check_checks(file: &Path, task: &Task) -> Result<(), SuiteError> {
    let checks_dir = task.checks_dir();
    if checks_dir.exists() && !checks_dir.is_dir() {
        return Err(SuiteError::file(
            &checks_dir,
            "is not a directory: checks/ holds the hidden files the checks use ($TACK_CHECKS); make it a directory or remove it",
        ));
    }
    for (i, check) in task.checks.iter().enumerate() {
        let field = |name: &str| format!("checks[{i}].{name}");
        if check.name.trim().is_empty() {
            return Err(SuiteError::invalid(
                file,
                field("name"),
                "must not be empty: it names the check in reports",
            ));
        }
        if let Some(first) = task.checks[..i].iter().position(|c| c.name == check.name) {
            return Err(SuiteError::invalid(
                file,
                field("name"),
                format!(
                    "`{}` is also the name of checks[{first}]: reports tell checks apart by name; rename one",
                    check.name
                ),
            ));
        }
        if check.run.trim().is_empty() {
            return Err(SuiteError::invalid(file, field("run"), "must not be empty"));
        }
        if check.timeout_secs == 0 {
            return Err(SuiteError::invalid(
                file,
                field("timeout_secs"),
                "must be at least 1, got 0: the check would time out at once; leave it out for 60",
            ));
        }
        // Where the check is shown its files (`/tests`), they are named
        // there too (`bash /tests/test.sh`): an image task's check must not
        // wait for its first trial to find one missing.
        let shown = check
            .checks_at
            .as_deref()
            .map(|at| format!("{}/", at.trim_end_matches('/')));
        for (prefix, name) in checks_files(&check.run, shown.as_deref()) {
            if !checks_dir.join(name).exists() {
                return Err(SuiteError::invalid(
                    file,
                    field("run"),
                    format!(
                        "runs `{prefix}{name}`, but {} does not exist: add it to the task's checks/ directory",
                        checks_dir.join(name).display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The files a command names under `$TACK_CHECKS/` (or `shown`, where the
/// check is shown them: `/tests/`), each with the prefix it was named by,
/// where the name is literal (no globs or variables, which only the shell
/// can resolve).
fn checks_files<'c>(command: &'c str, shown: Option<&'c str>) -> Vec<(&'c str, &'c str)> {
    let mut found = Vec::new();
    let prefixes = ["$TACK_CHECKS/", "${TACK_CHECKS}/"]
        .into_iter()
        .chain(shown);
    for prefix in prefixes {
        for (at, _) in command.match_indices(prefix) {
            // `/tests/` inside a longer path (`/app/tests/x`) is not it.
            let inside_a_word = command[..at]
                .chars()
                .next_back()
                .is_some_and(|c| !(c.is_whitespace() || "\"'=(".contains(c)));
            if shown == Some(prefix) && inside_a_word {
                continue;
            }
            let rest = &command[at + prefix.len()..];
            let end = rest
                .find(|c: char| c.is_whitespace() || "\"';|&)<>".contains(c))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            if !name.is_empty() && !name.contains(['$', '*', '?', '[', '{', '`', '\\']) {
                found.push((prefix, name));
            }
        }
    }
    found
}

pub(super) fn check_environment(file: &Path, task: &Task) -> Result<(), SuiteError> {
    check_variables(file, "environment.env", &task.environment.env)?;
    for (i, command) in task.environment.setup.iter().enumerate() {
        if command.trim().is_empty() {
            return Err(SuiteError::invalid(
                file,
                format!("environment.setup[{i}]"),
                "must not be empty: remove it or give the command",
            ));
        }
    }
    if let Some(health) = &task.environment.healthcheck {
        check_healthcheck(file, "environment.healthcheck", health)?;
    }
    Ok(())
}

/// Variables of the table `table`: names a shell can use, values any
/// environment can hold.
pub(super) fn check_variables(
    file: &Path,
    table: &str,
    variables: &std::collections::BTreeMap<String, String>,
) -> Result<(), SuiteError> {
    for (name, value) in variables {
        let field = format!("{table}.{name}");
        let fine = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !fine {
            return Err(SuiteError::invalid(
                file,
                field,
                format!(
                    "`{name}` is not a usable variable name: use letters, digits and `_`, not starting with a digit"
                ),
            ));
        }
        if value.contains('\0') {
            return Err(SuiteError::invalid(
                file,
                field,
                "contains a NUL character, which no environment variable can hold",
            ));
        }
    }
    Ok(())
}

/// A health check (the task's, a service's at `field`): a command, and
/// times a person would write.
pub(super) fn check_healthcheck(
    file: &Path,
    field: &str,
    health: &crate::Healthcheck,
) -> Result<(), SuiteError> {
    if health.command.trim().is_empty() {
        return Err(SuiteError::invalid(
            file,
            format!("{field}.command"),
            "must not be empty: give the command that succeeds once the environment is up",
        ));
    }
    for (name, value, least) in [
        ("interval_secs", health.interval_secs, 0.1),
        ("timeout_secs", health.timeout_secs, 0.1),
        ("start_interval_secs", health.start_interval_secs, 0.1),
        ("start_period_secs", health.start_period_secs, 0.0),
    ] {
        if !(value.is_finite() && (least..=86_400.0).contains(&value)) {
            return Err(SuiteError::invalid(
                file,
                format!("{field}.{name}"),
                format!("is {value}: give seconds from {least} to 86400"),
            ));
        }
    }
    Ok(())
}

/// Edits name files of the workspace: a path that is absolute or climbs out
/// with `..` would read (and, applied, write) outside it.
pub(super) fn check_edit_path(file: &Path, field: &str, edit: &Edit) -> Result<(), SuiteError> {
    let path = Path::new(&edit.path);
    let inside = !edit.path.trim().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if inside {
        Ok(())
    } else {
        Err(SuiteError::invalid(
            file,
            format!("{field}.path"),
            format!(
                "`{}` is not a path inside the workspace: give it relative to the fixture, without `..`",
                edit.path
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::checks_files;

    fn names<'c>(command: &'c str, shown: Option<&'c str>) -> Vec<&'c str> {
        checks_files(command, shown)
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    }

    #[test]
    fn finds_literal_files_under_tack_checks() {
        assert_eq!(
            names(
                "python3 \"$TACK_CHECKS/check.py\" && sh ${TACK_CHECKS}/run.sh",
                None
            ),
            ["check.py", "run.sh"]
        );
        assert!(names("cp -r $TACK_CHECKS/* . && ./x", None).is_empty());
        assert!(names("ls $TACK_CHECKS", None).is_empty());
    }

    #[test]
    fn finds_literal_files_where_the_checks_are_shown() {
        let shown = Some("/tests/");
        assert_eq!(names("bash /tests/test.sh", shown), ["test.sh"]);
        assert_eq!(
            names("pytest '/tests/test_outputs.py' -rA", shown),
            ["test_outputs.py"]
        );
        assert!(names("ls /app/tests/x.py && cat /tests/*.txt", shown).is_empty());
        assert!(names("bash /tests/test.sh", None).is_empty());
    }
}
