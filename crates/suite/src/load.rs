use std::fs;
use std::path::Path;

use tack_protocol::Edit;

use crate::format::{DEFAULT_PROTECTED, SuiteFile, TaskFile};
use crate::{Suite, SuiteError, Task, Variant};

mod files;
mod fingerprint;
mod harness;
mod image;
mod paths;
mod task;

use harness::VariantAt;

const SUITE_FILE: &str = "suite.toml";
const TASK_FILE: &str = "task.toml";

/// Loads a suite from its directory (or its `suite.toml`), checking every
/// file and everything a variant or task names (rules files, approvers,
/// limits, check files), so that a run never starts on a suite whose
/// trials could not run; the first problem found is returned, naming its
/// file and field and what to do.
pub fn load_suite(path: &Path) -> Result<Suite, SuiteError> {
    let (root, file) = if path.is_dir() {
        (path.to_path_buf(), path.join(SUITE_FILE))
    } else {
        let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
        (root, path.to_path_buf())
    };
    if fs::symlink_metadata(&file).is_err() {
        // A task directory given for its suite: say where the suite is.
        if root.join(TASK_FILE).is_file()
            && let Some(suite) = root.parent().and_then(Path::parent)
        {
            return Err(SuiteError::file(
                &file,
                format!(
                    "does not exist: {} is a task, not a suite; its suite is {} (name the task \
                     with -t {})",
                    root.display(),
                    if suite.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        suite
                    }
                    .display(),
                    root.file_name().unwrap_or_default().to_string_lossy()
                ),
            ));
        }
        return Err(SuiteError::file(
            &file,
            "does not exist: no suite here; a suite is a directory with a suite.toml and a tasks/ directory (see suites/README.md)",
        ));
    }
    // Before any file is read: a suite.toml or task.toml linked out of the
    // suite would otherwise be parsed, and its lines quoted in an error.
    let top = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &root
    };
    files::check_tree(top, top, TASK_FILE)?;
    let parsed: SuiteFile = parse_toml(&file)?;
    let section = parsed.suite;
    // The name is part of the run id, which names the run's directories.
    check_name(&file, "suite.name", &section.name)?;
    if section.trials == 0 {
        return Err(SuiteError::invalid(
            &file,
            "suite.trials",
            "must be at least 1",
        ));
    }
    fingerprint::check_fingerprint(&file, &section.fingerprint)?;
    check_variants(&file, &root, &parsed.variants)?;
    let tasks = files::task_dirs(&root, TASK_FILE)?
        .iter()
        .map(|dir| load_task(dir))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Suite {
        name: section.name,
        description: section.description,
        root,
        trials: section.trials,
        seed: section.seed,
        fingerprint: section.fingerprint,
        images: parsed.images,
        variants: parsed.variants,
        tasks,
    })
}

fn parse_toml<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, SuiteError> {
    let text = files::read_text(file)?;
    toml::from_str(&text).map_err(|e| SuiteError::Parse {
        path: file.to_path_buf(),
        error: Box::new(e),
    })
}

/// Names end up in trial ids and file names, so they keep to a safe alphabet.
fn check_name(file: &Path, field: &str, name: &str) -> Result<(), SuiteError> {
    let fine = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if fine {
        Ok(())
    } else {
        Err(SuiteError::invalid(
            file,
            field,
            format!(
                "`{}` is not a usable name: use letters, digits, `-`, `_` and `.` only",
                tack_protocol::printable(name)
            ),
        ))
    }
}

fn check_variants(file: &Path, root: &Path, variants: &[Variant]) -> Result<(), SuiteError> {
    if variants.is_empty() {
        return Err(SuiteError::invalid(
            file,
            "variants",
            "the suite has no variants: add a [[variants]] table with at least `name` and `model`",
        ));
    }
    for (i, variant) in variants.iter().enumerate() {
        let at = |field: &str| format!("variants[{i}].{field}");
        check_name(file, &at("name"), &variant.name)?;
        if variants[..i].iter().any(|v| v.name == variant.name) {
            return Err(SuiteError::invalid(
                file,
                at("name"),
                format!("`{}` is used by two variants", variant.name),
            ));
        }
        let place = VariantAt {
            file,
            index: i,
            name: &variant.name,
        };
        variant
            .sim
            .validate()
            .map_err(|error| place.params("sim", error))?;
        variant
            .chaos
            .validate()
            .map_err(|error| place.params("chaos", error))?;
        harness::check_harness(&place, root, &variant.harness)?;
        harness::check_provider(&place, &variant.provider)?;
        harness::check_model_tables(&place, variant)?;
        if let Some(agent) = &variant.agent {
            harness::check_agent(&place, variant, agent)?;
        }
    }
    Ok(())
}

fn load_task(dir: &Path) -> Result<Task, SuiteError> {
    let file = dir.join(TASK_FILE);
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    check_name(&file, "task directory name", &id)?;
    let parsed: TaskFile = parse_toml(&file)?;
    let task = Task {
        id,
        dir: dir.to_path_buf(),
        instruction: parsed.instruction,
        tags: parsed.tags,
        test_command: parsed.test_command,
        environment: parsed.environment,
        limits: parsed.limits,
        checks: parsed.checks,
        solution: parsed.solution,
        protected: parsed
            .protected
            .unwrap_or_else(|| DEFAULT_PROTECTED.map(String::from).to_vec()),
        tool_path: Vec::new(),
        image: None,
    };
    check_task(&file, &task)?;
    Ok(task)
}

fn check_task(file: &Path, task: &Task) -> Result<(), SuiteError> {
    if task.instruction.trim().is_empty() {
        return Err(SuiteError::invalid(
            file,
            "instruction",
            "must not be empty",
        ));
    }
    if !task.fixture_dir().is_dir() && !task.wants_image() {
        return Err(SuiteError::file(
            &task.fixture_dir(),
            format!(
                "is missing or not a directory: every task needs fixture/, the files the agent starts from (the task is {})",
                file.display()
            ),
        ));
    }
    if task.checks.is_empty() {
        return Err(SuiteError::invalid(
            file,
            "checks",
            "no hidden checks: add a [[checks]] entry with `name` and `run`, or nothing can tell a pass from a fail",
        ));
    }
    if let Err(error) = crate::tamper::Protected::new(&task.protected) {
        return Err(SuiteError::Protected {
            path: file.to_path_buf(),
            error,
        });
    }
    task::check_checks(file, task)?;
    task::check_limits(file, task)?;
    task::check_environment(file, task)?;
    paths::check_container_settings(file, task)?;
    image::check_image(file, task)?;
    check_solution(file, task)
}

fn check_solution(file: &Path, task: &Task) -> Result<(), SuiteError> {
    let solution = &task.solution;
    if solution.edits.is_empty() && solution.script.is_none() {
        return Err(SuiteError::invalid(
            file,
            "solution",
            "no reference solution: add [[solution.edits]] (path, old, new) or solution.script",
        ));
    }
    if solution
        .script
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        return Err(SuiteError::invalid(
            file,
            "solution.script",
            "is empty: give the commands that solve the task, or remove it",
        ));
    }
    // Edits apply in order, each to the result of the previous ones; decoys
    // each apply alone to the untouched fixture.
    let mut edited = std::collections::HashMap::<String, String>::new();
    for (i, edit) in solution.edits.iter().enumerate() {
        let text = fixture_text(
            file,
            task,
            &mut edited,
            edit,
            &format!("solution.edits[{i}]"),
        )?;
        let updated = apply_edit_text(&text, edit)
            .map_err(|error| SuiteError::edit(file, format!("solution.edits[{i}].old"), error))?;
        edited.insert(edit.path.clone(), updated);
    }
    for (i, decoy) in solution.decoys.iter().enumerate() {
        let field = format!("solution.decoys[{i}]");
        let text = fixture_text(
            file,
            task,
            &mut std::collections::HashMap::new(),
            decoy,
            &field,
        )?;
        apply_edit_text(&text, decoy)
            .map_err(|error| SuiteError::edit(file, format!("{field}.old"), error))?;
    }
    Ok(())
}

fn fixture_text(
    file: &Path,
    task: &Task,
    edited: &mut std::collections::HashMap<String, String>,
    edit: &Edit,
    field: &str,
) -> Result<String, SuiteError> {
    task::check_edit_path(file, field, edit)?;
    if let Some(text) = edited.get(&edit.path) {
        return Ok(text.clone());
    }
    let path = task.fixture_dir().join(&edit.path);
    files::read_text(&path).map_err(|e| {
        SuiteError::invalid(
            file,
            format!("{field}.path"),
            format!("cannot read {} in the fixture: {e}", edit.path),
        )
    })
}

/// Why a solution edit does not apply: its `old` text must occur once.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("the text to replace does not occur in {path}")]
    NotFound { path: String },
    #[error("the text to replace occurs {count} times in {path}; it must occur once")]
    Repeated { path: String, count: usize },
}

/// Applies an edit to a file's text; `old` must occur exactly once.
pub(crate) fn apply_edit_text(text: &str, edit: &Edit) -> Result<String, EditError> {
    let path = || edit.path.clone();
    match text.matches(edit.old.as_str()).count() {
        1 => Ok(text.replacen(edit.old.as_str(), &edit.new, 1)),
        0 => Err(EditError::NotFound { path: path() }),
        count => Err(EditError::Repeated {
            path: path(),
            count,
        }),
    }
}
