use std::fs;
use std::path::{Path, PathBuf};

use tack_protocol::Edit;

use crate::format::{DEFAULT_PROTECTED, SuiteFile, TaskFile};
use crate::{Suite, SuiteError, Task, Variant};

const SUITE_FILE: &str = "suite.toml";
const TASK_FILE: &str = "task.toml";

/// Loads a suite from its directory (or its `suite.toml`), checking every
/// file; the first problem found is returned, naming its file and field.
pub fn load_suite(path: &Path) -> Result<Suite, SuiteError> {
    let (root, file) = if path.is_dir() {
        (path.to_path_buf(), path.join(SUITE_FILE))
    } else {
        let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
        (root, path.to_path_buf())
    };
    if !file.exists() {
        return Err(SuiteError::invalid(
            &file,
            "file",
            "no suite here: a suite is a directory with a suite.toml and a tasks/ directory (see suites/README.md)",
        ));
    }
    let parsed: SuiteFile = parse_toml(&file)?;
    let section = parsed.suite;
    if section.name.trim().is_empty() {
        return Err(SuiteError::invalid(
            &file,
            "suite.name",
            "must not be empty",
        ));
    }
    if section.trials == 0 {
        return Err(SuiteError::invalid(
            &file,
            "suite.trials",
            "must be at least 1",
        ));
    }
    check_variants(&file, &parsed.variants)?;
    let tasks = load_tasks(&root)?;
    Ok(Suite {
        name: section.name,
        description: section.description,
        root,
        trials: section.trials,
        seed: section.seed,
        variants: parsed.variants,
        tasks,
    })
}

fn parse_toml<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, SuiteError> {
    let text = fs::read_to_string(file).map_err(|e| SuiteError::io(file, e))?;
    toml::from_str(&text).map_err(|e| SuiteError::Parse {
        path: file.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
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
            format!("`{name}` is not a usable name: use letters, digits, `-`, `_` and `.` only"),
        ))
    }
}

fn check_variants(file: &Path, variants: &[Variant]) -> Result<(), SuiteError> {
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
        if !crate::format::is_known_model(&variant.model) {
            return Err(SuiteError::invalid(
                file,
                at("model"),
                format!(
                    "unknown model `{}`: use `oracle`, `sim`, or `openai:<model>` / `anthropic:<model>`, optionally wrapped as `chaos(...)`",
                    variant.model
                ),
            ));
        }
        variant
            .sim
            .validate()
            .map_err(|message| SuiteError::invalid(file, at("sim"), message))?;
        variant
            .chaos
            .validate()
            .map_err(|message| SuiteError::invalid(file, at("chaos"), message))?;
        if variant.harness.max_steps == 0 {
            return Err(SuiteError::invalid(
                file,
                at("harness.max_steps"),
                "must be at least 1",
            ));
        }
        if variant.harness.tools.is_empty() {
            return Err(SuiteError::invalid(
                file,
                at("harness.tools"),
                "offers no tools: list at least one, e.g. [\"bash\"]",
            ));
        }
    }
    Ok(())
}

fn load_tasks(root: &Path) -> Result<Vec<Task>, SuiteError> {
    let tasks_dir = root.join("tasks");
    let entries = fs::read_dir(&tasks_dir).map_err(|e| SuiteError::io(&tasks_dir, e))?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SuiteError::io(&tasks_dir, e))?;
        if entry.path().join(TASK_FILE).is_file() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    if dirs.is_empty() {
        return Err(SuiteError::invalid(
            &tasks_dir,
            "tasks",
            "no tasks: each task is a directory tasks/<id>/ with a task.toml",
        ));
    }
    dirs.iter().map(|dir| load_task(dir)).collect()
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
    if !task.fixture_dir().is_dir() {
        return Err(SuiteError::invalid(
            file,
            "fixture",
            format!(
                "{} is missing: it holds the files the agent starts from",
                task.fixture_dir().display()
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
    if let Err(message) = crate::tamper::Protected::new(&task.protected) {
        return Err(SuiteError::invalid(file, "protected", message));
    }
    if let Some(i) = task.checks.iter().position(|c| c.run.trim().is_empty()) {
        return Err(SuiteError::invalid(
            file,
            format!("checks[{i}].run"),
            "must not be empty",
        ));
    }
    let solution = &task.solution;
    if solution.edits.is_empty() && solution.script.is_none() {
        return Err(SuiteError::invalid(
            file,
            "solution",
            "no reference solution: add [[solution.edits]] (path, old, new) or solution.script",
        ));
    }
    // Edits apply in order, each to the result of the previous ones; decoys
    // each apply alone to the untouched fixture.
    let mut files = std::collections::HashMap::<String, String>::new();
    for (i, edit) in solution.edits.iter().enumerate() {
        let text = fixture_text(
            file,
            task,
            &mut files,
            edit,
            &format!("solution.edits[{i}]"),
        )?;
        let updated = apply_edit_text(&text, edit)
            .map_err(|why| SuiteError::invalid(file, format!("solution.edits[{i}].old"), why))?;
        files.insert(edit.path.clone(), updated);
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
            .map_err(|why| SuiteError::invalid(file, format!("{field}.old"), why))?;
    }
    Ok(())
}

fn fixture_text(
    file: &Path,
    task: &Task,
    files: &mut std::collections::HashMap<String, String>,
    edit: &Edit,
    field: &str,
) -> Result<String, SuiteError> {
    if let Some(text) = files.get(&edit.path) {
        return Ok(text.clone());
    }
    let path = task.fixture_dir().join(&edit.path);
    fs::read_to_string(&path).map_err(|e| {
        SuiteError::invalid(
            file,
            format!("{field}.path"),
            format!("cannot read {} in the fixture: {e}", edit.path),
        )
    })
}

/// Applies an edit to a file's text; `old` must occur exactly once.
pub(crate) fn apply_edit_text(text: &str, edit: &Edit) -> Result<String, String> {
    match text.matches(edit.old.as_str()).count() {
        1 => Ok(text.replacen(edit.old.as_str(), &edit.new, 1)),
        0 => Err(format!(
            "the text to replace does not occur in {}",
            edit.path
        )),
        n => Err(format!(
            "the text to replace occurs {n} times in {}; it must occur once",
            edit.path
        )),
    }
}
