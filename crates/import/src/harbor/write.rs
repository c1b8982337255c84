//! Writes Harbor tasks as tasks of a tack suite (`tack import harbor`):
//! the fixture is what the Dockerfile copies into its WORKDIR, the check
//! runs `tests/test.sh` at `/tests` and reads the reward it leaves in
//! `/logs/verifier`, the solution runs `solution/solve.sh` at `/solution`,
//! and what the image would have installed becomes the task's tool list.
//! Every finding of the assessment is written into the task's file as a
//! comment, so the person running it sees what differs from the image.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::layout::{Layout, layout};
use super::toml_text::{in_comment, quote, whole_secs, write_list, write_table};
use super::{Assessment, HarborTask};
use tack_protocol::shell_quote;
use tack_suite::requirement_name as distribution;

/// Harbor's verifier timeout when task.toml gives none.
const DEFAULT_VERIFIER_SECS: u64 = 600;

/// What one `tack import harbor` did.
#[derive(Debug, Default, Serialize)]
pub struct SuiteImport {
    pub suite_dir: PathBuf,
    /// The suite.toml written, when the suite had none.
    pub suite_file_written: Option<PathBuf>,
    pub converted: Vec<ConvertedTask>,
    pub skipped: Vec<SkippedTask>,
    /// Tasks refused: their files link out of them, their build reads
    /// outside them, or they are not well-formed; the others are imported.
    pub refused: Vec<SkippedTask>,
    /// Sources that are not Harbor tasks and hold none, or cannot be read.
    pub unreadable: Vec<SkippedTask>,
}

#[derive(Debug, Serialize)]
pub struct ConvertedTask {
    pub source: PathBuf,
    pub task: String,
    pub dir: PathBuf,
    /// How its trials run.
    pub mode: TaskMode,
    /// In its image, in a container the engine starts (an `ENTRYPOINT`, a
    /// health check, compose services), not under tack's sandbox.
    pub engine: bool,
    /// Why the task can run only in its image; empty when tack runs it.
    pub container_reasons: Vec<String>,
    pub python: Vec<String>,
    pub debian: Vec<String>,
    /// What differs from the image, as written in the task's file.
    pub notes: Vec<String>,
    /// Keys of its task.toml that Harbor does not know (misspelt?).
    pub unknown_keys: Vec<String>,
}

/// How an imported task runs: in its image, built from its Dockerfile, or
/// on the host with what its image would have installed approximated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskMode {
    Image,
    Host,
}

#[derive(Debug, Serialize)]
pub struct SkippedTask {
    pub source: PathBuf,
    pub reason: String,
}

/// Why nothing could be written at all.
#[derive(Debug, thiserror::Error)]
#[error("could not write {path}: {source}")]
pub struct WriteError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_path_buf(),
        source,
    }
}

/// Imports every Harbor task in `sources` (task directories, or
/// directories of them) into the suite at `suite_dir`, each task as `mode`
/// says, and writes the suite's suite.toml if it has none once a task is
/// in it (an import of nothing leaves nothing behind). A task already in
/// the suite is skipped, never overwritten; a task that links out of
/// itself or builds from outside itself is refused before any of it is
/// read.
pub fn import_tasks(
    sources: &[PathBuf],
    suite_dir: &Path,
    mode: TaskMode,
) -> Result<SuiteImport, WriteError> {
    let mut report = SuiteImport {
        suite_dir: suite_dir.to_path_buf(),
        ..SuiteImport::default()
    };
    let mut tasks = Vec::new();
    for source in sources {
        match task_dirs(source) {
            Ok(dirs) => tasks.extend(dirs),
            Err(reason) => report.unreadable.push(SkippedTask {
                source: source.clone(),
                reason: reason.to_string(),
            }),
        }
    }
    let tasks_dir = suite_dir.join("tasks");
    // The images the imported tasks start from, for the suite file's map.
    let mut bases = std::collections::BTreeSet::new();
    for source in tasks {
        let refuse = |report: &mut SuiteImport, source: PathBuf, reason: String| {
            report.refused.push(SkippedTask { source, reason });
        };
        if let Some(reason) = super::image_task::links_out(&source) {
            refuse(&mut report, source, reason);
            continue;
        }
        let task = match HarborTask::load(&source) {
            Ok(task) => task,
            Err(error) => {
                refuse(&mut report, source, error.to_string());
                continue;
            }
        };
        if let Some(reason) = super::image_task::build_escapes(&task) {
            refuse(&mut report, source, reason);
            continue;
        }
        let id = task_id(&source);
        let dir = tasks_dir.join(&id);
        if let Some(first) = report.converted.iter().find(|t| t.task == id) {
            report.skipped.push(SkippedTask {
                reason: format!(
                    "{} has the same directory name, so the same task id `{id}`, and was \
                     imported first; import this one into another suite",
                    first.source.display()
                ),
                source,
            });
            continue;
        }
        if dir.exists() {
            report.skipped.push(SkippedTask {
                reason: format!(
                    "{} already exists; remove it to import the task again",
                    dir.display()
                ),
                source,
            });
            continue;
        }
        std::fs::create_dir_all(&tasks_dir).map_err(io(&tasks_dir))?;
        if mode == TaskMode::Image {
            bases.extend(super::suite_file::base_image(&task));
        }
        report.converted.push(write_task(&task, id, &dir, mode)?);
    }
    if !report.converted.is_empty() {
        report.suite_file_written = super::suite_file::write_suite_file(suite_dir, &bases)?;
    }
    Ok(report)
}

/// Why a source gives no task to import; the other sources go on.
#[derive(Debug, thiserror::Error)]
enum SourceError {
    #[error("cannot read it: {0}")]
    Unreadable(#[source] std::io::Error),
    #[error(
        "is not a Harbor task and holds none: a task is a directory with task.toml, \
         instruction.md, environment/ and tests/"
    )]
    NoTask,
}

/// `source` itself when it is a task, else its subdirectories that are.
fn task_dirs(source: &Path) -> Result<Vec<PathBuf>, SourceError> {
    if source.join("task.toml").is_file() {
        return Ok(vec![source.to_path_buf()]);
    }
    let entries = std::fs::read_dir(source).map_err(SourceError::Unreadable)?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("task.toml").is_file())
        .collect();
    if dirs.is_empty() {
        return Err(SourceError::NoTask);
    }
    dirs.sort();
    Ok(dirs)
}

/// The directory's name in the alphabet tack's task ids use.
pub(super) fn task_id(source: &Path) -> String {
    let name = source
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "task".to_string());
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '-',
        })
        .collect()
}

/// Writes the task into a directory beside `dir` and renames it into
/// place when complete, so a failed import leaves no half-written task.
fn write_task(
    task: &HarborTask,
    id: String,
    dir: &Path,
    mode: TaskMode,
) -> Result<ConvertedTask, WriteError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{id}-"))
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let converted = match mode {
        TaskMode::Image => super::image_task::write_image_task(task, id, staging.path(), dir)?,
        TaskMode::Host => write_host_task(task, id, staging.path(), dir)?,
    };
    let built = staging.keep();
    std::fs::rename(&built, dir).map_err(io(dir))?;
    Ok(converted)
}

/// The task approximated on the host (`--approximate`): its fixture is
/// what the Dockerfile copies, its tools what the image would install.
fn write_host_task(
    task: &HarborTask,
    id: String,
    root: &Path,
    dir: &Path,
) -> Result<ConvertedTask, WriteError> {
    let assessment = task.assessment();
    let dockerfile = task.environment.dockerfile.as_ref();
    let workdir = task.workdir();
    let files = layout(&assessment.placements, workdir.unwrap_or("/"));
    let mut plan = TaskPlan::new(task, &assessment, &files);
    // Without a Dockerfile the assessment already says why.
    if workdir.is_none() && dockerfile.is_some() {
        plan.container_reasons.push(
            "the Dockerfile sets no WORKDIR, so the agent would work in the base image's \
             (`/`); tack needs a directory of its own for the workspace"
                .to_string(),
        );
    }
    let fixture = root.join("fixture");
    std::fs::create_dir_all(&fixture).map_err(io(&fixture))?;
    for (source, to) in &files.files {
        copy(source, &beneath(root, to)?, &task.dir)?;
    }
    for (dir, _) in &files.places {
        let path = beneath(root, Path::new(dir))?;
        std::fs::create_dir_all(&path).map_err(io(&path))?;
    }
    copy(&task.tests.dir, &root.join("checks"), &task.dir)?;
    if let Some(solution) = &task.solution {
        copy(&solution.dir, &root.join("solution"), &task.dir)?;
    }
    let task_file = root.join("task.toml");
    let text = plan.task_toml(task, workdir, &files);
    std::fs::write(&task_file, text).map_err(io(&task_file))?;
    Ok(ConvertedTask {
        source: task.dir.clone(),
        task: id,
        dir: dir.to_path_buf(),
        mode: TaskMode::Host,
        engine: false,
        container_reasons: plan.container_reasons,
        python: plan.python,
        debian: plan.debian,
        notes: plan.notes,
        unknown_keys: task.config.unknown_keys.clone(),
    })
}

/// An imported task protects no file of its workspace: Harbor's tests are
/// copied in at `/tests` after the agent stops, and tack's default globs
/// (`tests/`, `test_*`) name files such a task may ask the agent to write,
/// which would flag its own solution as tampering.
pub(super) const NOTHING_PROTECTED: &str = "# Harbor's tests are copied in at /tests after the agent \
stops: no file of the workspace is theirs.\nprotected = []\n";

/// The keys of the task's task.toml that Harbor does not know, as a
/// comment: what the author meant may be missing from both.
pub(super) fn unknown_keys_note(out: &mut String, task: &HarborTask) {
    for key in &task.config.unknown_keys {
        let _ = writeln!(out, "# {}", in_comment(&unknown_key_line(key)));
    }
}

/// What the import says of a key Harbor does not know, in its account and
/// in the task's file.
pub fn unknown_key_line(key: &str) -> String {
    format!("task.toml: {key} (Harbor ignores it, and so did the import)")
}

/// `relative` (a path the layout made of the Dockerfile's destinations)
/// beneath `root`, the task's directory in the suite. The Dockerfile's
/// paths are made clean as they are read; this holds should one ever not
/// be: nothing of a task is written above its own directory.
fn beneath(root: &Path, relative: &Path) -> Result<PathBuf, WriteError> {
    use std::path::Component;
    if relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Ok(root.join(relative));
    }
    Err(WriteError {
        path: root.join(relative),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "leads out of the task's directory: refused, nothing written there",
        ),
    })
}

/// Copies a file or directory of the task at `task` (links as
/// [`tack_suite::copy_tree`] takes them).
pub(super) fn copy(source: &Path, to: &Path, task: &Path) -> Result<(), WriteError> {
    if source.is_dir() {
        return tack_suite::copy_tree(source, to, task).map_err(io(source));
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::copy(source, to).map(|_| ()).map_err(io(source))
}

/// The settings of the imported task, gathered from the analysis.
struct TaskPlan {
    container_reasons: Vec<String>,
    notes: Vec<String>,
    python: Vec<String>,
    debian: Vec<String>,
    stand_ins: bool,
    env: BTreeMap<String, String>,
}

impl TaskPlan {
    fn new(task: &HarborTask, assessment: &Assessment, files: &Layout) -> TaskPlan {
        let provisioning = &assessment.provisioning;
        let mut notes = assessment.toolchain_differences.clone();
        notes.extend(assessment.notes.iter().cloned());
        notes.extend(files.notes.iter().cloned());
        let mut container_reasons = assessment.container_reasons.clone();
        container_reasons.extend(files.container_reasons.iter().cloned());
        let python = python_requirements(
            provisioning
                .python_packages
                .iter()
                .chain(&provisioning.uv_with),
            &mut notes,
        );
        let scripts =
            std::iter::once(&task.tests.script).chain(task.solution.as_ref().map(|s| &s.script));
        let runs_apt = scripts
            .clone()
            .any(|s| s.programs.contains("apt-get") || s.programs.contains("apt"));
        if let Some(version) = provisioning
            .uv_python
            .as_ref()
            .or(provisioning.python_version.as_ref())
        {
            notes.push(format!(
                "asks for Python {version}; tack runs the host's python3 (see the run's fingerprint)"
            ));
        }
        let mut env = task.config.environment_env.clone();
        let image_env = task
            .environment
            .dockerfile
            .iter()
            .flat_map(|file| &file.env);
        for (name, value) in image_env {
            if name == "PATH" || value.contains('$') {
                notes.push(format!(
                    "Dockerfile ENV {name}={value} refers to the image's own variables; not carried over"
                ));
            } else {
                env.insert(name.clone(), value.clone());
            }
        }
        // In its container the task runs as root with a home it may write
        // (`source $HOME/.local/bin/env` after the uv installer); on the
        // host, strict hides the home: the trial's own /tmp stands in.
        if !env.contains_key("HOME") {
            env.insert("HOME".to_string(), "/tmp".to_string());
            notes.push("HOME is /tmp, the trial's own: the host's home is hidden".to_string());
        }
        resource_notes(task, &mut notes);
        TaskPlan {
            container_reasons,
            notes,
            python,
            debian: provisioning.debian_packages.clone(),
            stand_ins: provisioning.uv || runs_apt,
            env,
        }
    }

    fn task_toml(&self, task: &HarborTask, workdir: Option<&str>, files: &Layout) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Imported by `tack import harbor` from {} (Harbor task `{}`).",
            in_comment(&task.dir.display().to_string()),
            in_comment(&task.name)
        );
        if !self.notes.is_empty() {
            out.push_str("# How running it here differs from its container image:\n");
            for note in &self.notes {
                let _ = writeln!(out, "#   - {}", in_comment(note));
            }
        }
        unknown_keys_note(&mut out, task);
        out.push('\n');
        let _ = writeln!(out, "instruction = {}", quote(&task.instruction));
        out.push_str(NOTHING_PROTECTED);
        out.push_str("tags = [\"harbor\"]\n\n[environment]\n");
        if let Some(workdir) = workdir {
            let _ = writeln!(out, "workdir = {}", quote(workdir));
        }
        if !files.places.is_empty() {
            out.push_str("places = [\n");
            for (from, at) in &files.places {
                let _ = writeln!(out, "  {{ from = {}, at = {} }},", quote(from), quote(at));
            }
            out.push_str("]\n");
        }
        write_table(&mut out, "env", &self.env);
        write_list(&mut out, "python", &self.python);
        write_list(&mut out, "debian", &self.debian);
        if self.stand_ins {
            out.push_str(
                "# The scripts install tools as they run (apt-get, the uv installer, uvx);\n\
                 # stand-ins provide them offline from the lists above.\nstand_ins = true\n",
            );
        }
        if !self.container_reasons.is_empty() {
            out.push_str("requires = \"container\"\n");
            write_list(&mut out, "container_reasons", &self.container_reasons);
        }
        limits(&mut out, task);
        check(&mut out, task, false);
        solution(&mut out, task);
        out
    }
}

fn limits(out: &mut String, task: &HarborTask) {
    let wall = task.config.timeouts.agent.map(whole_secs);
    let memory = task.config.resources.memory_mb;
    if wall.is_none() && memory.is_none() {
        return;
    }
    out.push_str("\n[limits]\n");
    if let Some(wall) = wall {
        let _ = writeln!(out, "max_wall_secs = {wall}");
    }
    if let Some(memory) = memory {
        let _ = writeln!(out, "memory_mb = {memory}");
    }
}

/// Harbor's verifier as the task's check; `network`: it may reach the
/// network (Harbor's tests install their tools as they run).
pub(super) fn check(out: &mut String, task: &HarborTask, network: bool) {
    let timeout = task
        .config
        .timeouts
        .verifier
        .map_or(DEFAULT_VERIFIER_SECS, whole_secs);
    let reward = match &task.tests.reward {
        super::RewardKind::Text => "reward.txt".to_string(),
        super::RewardKind::Json { keys } if keys.is_empty() => "reward.json".to_string(),
        super::RewardKind::Json { keys } => format!("reward.json ({})", keys.join(", ")),
        super::RewardKind::ExitCode => "its exit code".to_string(),
    };
    let _ = writeln!(
        out,
        "\n# Harbor's verifier: tests/ at /tests, the reward in /logs/verifier (test.sh reports {reward})."
    );
    out.push_str("[[checks]]\nname = \"harbor-tests\"\nrun = \"bash /tests/test.sh\"\n");
    let _ = writeln!(out, "timeout_secs = {timeout}");
    out.push_str("checks_at = \"/tests\"\nreward_dir = \"/logs/verifier\"\n");
    if network {
        out.push_str("network = true\n");
    }
    write_table(out, "env", &task.config.verifier_env);
}

pub(super) fn solution(out: &mut String, task: &HarborTask) {
    if task.solution.is_none() {
        out.push_str(
            "\n# The task ships no solution/solve.sh: write one, or `tack suite check` \
                 cannot prove the task can be passed.\n[solution]\nscript = \"false\"\n",
        );
        return;
    }
    let mut script = String::new();
    for (name, value) in &task.config.solution_env {
        let _ = write!(script, "{name}={} ", shell_quote(value));
    }
    script.push_str("bash /solution/solve.sh");
    let _ = writeln!(
        out,
        "\n[solution]\nscript = {}\nfiles_at = \"/solution\"",
        quote(&script)
    );
}

/// The requirements, one per distribution: a pinned one wins over an
/// unpinned one, and two different pins keep the first, noted.
fn python_requirements<'a>(
    requirements: impl Iterator<Item = &'a String>,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut chosen: Vec<(String, String)> = Vec::new();
    for requirement in requirements {
        let name = distribution(requirement);
        match chosen.iter_mut().find(|(have, _)| *have == name) {
            None => chosen.push((name, requirement.clone())),
            Some((_, kept)) if kept == requirement => {}
            Some((_, kept)) if distribution(kept) == *kept => *kept = requirement.clone(),
            Some((_, kept)) => {
                if distribution(requirement) != *requirement {
                    notes.push(format!(
                        "{requirement} is also asked for; {kept} is installed"
                    ));
                }
            }
        }
    }
    chosen.into_iter().map(|(_, r)| r).collect()
}

fn resource_notes(task: &HarborTask, notes: &mut Vec<String>) {
    if let Some(memory) = task.config.resources.memory_mb {
        notes.push(format!(
            "memory_mb = {memory} limits each process's address space here, not the container's resident memory"
        ));
    }
    if let Some(cpus) = task.config.resources.cpus {
        notes.push(format!("cpus = {cpus} is not enforced on the host"));
    }
    unenforced_notes(task, notes);
}

/// What of the task's settings tack does not carry out, in either mode:
/// a prebuilt image, GPUs, skills, MCP servers, artifacts.
pub(super) fn unenforced_notes(task: &HarborTask, notes: &mut Vec<String>) {
    if let Some(image) = &task.config.docker_image
        && task.environment.dockerfile.is_some()
    {
        notes.push(format!(
            "docker_image {image} is not pulled: the task's image is built from \
             environment/Dockerfile, the recipe of the same image"
        ));
    }
    let resources = &task.config.resources;
    if resources.gpus.is_some_and(|g| g > 0) {
        notes.push("the task asks for GPUs, which tack does not provide".to_string());
    }
    if let Some(skills) = &task.config.skills_dir {
        notes.push(format!("skills_dir {skills} is not loaded as tack skills"));
    }
    if task.config.mcp_servers > 0 {
        notes.push(format!(
            "declares {} MCP servers; configure them on a variant ([[variants.harness.mcp_servers]])",
            task.config.mcp_servers
        ));
    }
    if !task.config.artifacts.is_empty() {
        notes.push(format!(
            "artifacts {} stay in the trial's workspace",
            task.config.artifacts.join(", ")
        ));
    }
}
