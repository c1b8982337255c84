use serde::Serialize;

use tack_protocol::SandboxProfile;

use crate::provision::ProvisionNote;
use crate::{
    CommandSandbox, ProvisionError, Suite, SuiteError, Task, TrialWorkspace, apply_solution,
    provision_suite, run_checks,
};

/// Whether a task can tell a fix from no fix: its checks must fail on the
/// untouched fixture and pass once the reference solution is applied.
#[derive(Debug, Clone, Serialize)]
pub struct TaskSoundness {
    pub task: String,
    /// Whether its checks ran both ways; not when the task needs its
    /// container image, nor when setting it up failed (`detail` says why).
    pub checked: bool,
    pub fails_untouched: bool,
    pub passes_with_solution: bool,
    /// Check output of the run that went the wrong way, or the error.
    pub detail: Option<String>,
    /// How the solution script ended, when it failed: said beside the
    /// verdict, which is the checks' (see [`apply_solution`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solution_failed: Option<String>,
    /// Not checked: the task runs only in its container image.
    pub requires_container: bool,
    /// The decoys (`solution.decoys`, by index) that pass every check: a
    /// wrong fix the checks would score as right.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passing_decoys: Vec<usize>,
    /// The decoys tried (each must fail a check); 0 when the task has none
    /// or was not checked.
    pub decoys: usize,
}

impl TaskSoundness {
    pub fn sound(&self) -> bool {
        self.fails_untouched && self.passes_with_solution && self.passing_decoys.is_empty()
    }
}

/// Checks one task; setup, solution and checks run confined by `sandbox`.
pub async fn check_task(task: &Task, sandbox: &CommandSandbox) -> TaskSoundness {
    if task.requires_container() {
        return TaskSoundness {
            requires_container: true,
            ..unchecked(
                task,
                format!(
                    "not checked: it runs only in its container image ({})",
                    task.environment.container_reasons.join("; ")
                ),
            )
        };
    }
    match try_check_task(task, sandbox).await {
        Ok(soundness) => soundness,
        Err(error) => unchecked(task, error.to_string()),
    }
}

fn unchecked(task: &Task, detail: String) -> TaskSoundness {
    TaskSoundness {
        task: task.id.clone(),
        checked: false,
        fails_untouched: false,
        passes_with_solution: false,
        detail: Some(detail),
        solution_failed: None,
        requires_container: false,
        passing_decoys: Vec::new(),
        decoys: 0,
    }
}

async fn try_check_task(
    task: &Task,
    sandbox: &CommandSandbox,
) -> Result<TaskSoundness, SuiteError> {
    let untouched = TrialWorkspace::prepare(task, sandbox).await?;
    let before = run_checks(task, untouched.path(), sandbox).await?;
    let fails_untouched = before.iter().any(|c| !c.passed);

    let solved = TrialWorkspace::prepare(task, sandbox).await?;
    let solution_failed = apply_solution(task, solved.path(), sandbox).await?;
    let after = run_checks(task, solved.path(), sandbox).await?;
    let passes_with_solution = after.iter().all(|c| c.passed);
    let passing_decoys = passing_decoys(task, sandbox).await?;

    let detail = if !fails_untouched {
        Some(
            "the checks pass on the untouched fixture, so they cannot detect a missing fix"
                .to_string(),
        )
    } else if !passes_with_solution {
        let failing: Vec<String> = after
            .iter()
            .filter(|c| !c.passed)
            .map(|c| {
                format!(
                    "check `{}` failed with the solution applied:\n{}",
                    c.name,
                    c.output.trim()
                )
            })
            .collect();
        Some(failing.join("\n"))
    } else if !passing_decoys.is_empty() {
        let which: Vec<String> = passing_decoys
            .iter()
            .map(|i| format!("solution.decoys[{i}]"))
            .collect();
        Some(format!(
            "{} pass every check: the checks would score a wrong fix as right \
             (make a decoy wrong, or the checks stricter)",
            which.join(", ")
        ))
    } else {
        None
    };
    Ok(TaskSoundness {
        task: task.id.clone(),
        checked: true,
        fails_untouched,
        passes_with_solution,
        detail,
        solution_failed,
        requires_container: false,
        passing_decoys,
        decoys: task.solution.decoys.len(),
    })
}

/// The decoys that pass every check, each applied alone to a fresh
/// workspace, as the sim agent applies one when it misses.
async fn passing_decoys(task: &Task, sandbox: &CommandSandbox) -> Result<Vec<usize>, SuiteError> {
    let mut passing = Vec::new();
    for (i, decoy) in task.solution.decoys.iter().enumerate() {
        let workspace = TrialWorkspace::prepare(task, sandbox).await?;
        crate::workspace::apply_edits(task, workspace.path(), std::slice::from_ref(decoy))?;
        let checks = run_checks(task, workspace.path(), sandbox).await?;
        if checks.iter().all(|c| c.passed) {
            passing.push(i);
        }
    }
    Ok(passing)
}

/// The checks of a suite being checked: stopped when the check is dropped
/// (its caller was interrupted), so that their workspaces, sandboxes and
/// containers go with them then, not when the process ends.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<TaskSoundness>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// Checks every task, `jobs` at a time, in task order, with setup,
/// solution and checks confined by `profile` (`strict`, what a trial's
/// checks get by default), after provisioning the tasks' tools and making
/// their images.
pub async fn check_suite(
    suite: &Suite,
    jobs: usize,
    profile: SandboxProfile,
    images: &crate::ImageOptions,
    note: ProvisionNote<'_>,
) -> Result<Vec<TaskSoundness>, ProvisionError> {
    let mut suite = suite.clone();
    provision_suite(&mut suite, profile != SandboxProfile::Off, note).await?;
    crate::prepare_images(&mut suite, None, images, note).await?;
    let suite = &suite;
    let sandbox = std::sync::Arc::new(CommandSandbox::new(profile, suite.hidden_paths()));
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let mut handles = AbortOnDrop(Vec::new());
    for task in suite.tasks.clone() {
        let semaphore = semaphore.clone();
        let sandbox = sandbox.clone();
        handles.0.push(tokio::spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            check_task(&task, &sandbox).await
        }));
    }
    let mut results = Vec::with_capacity(handles.0.len());
    for (handle, task) in handles.0.iter_mut().zip(&suite.tasks) {
        results.push(
            handle
                .await
                .unwrap_or_else(|join| unchecked(task, format!("the check crashed: {join}"))),
        );
    }
    Ok(results)
}
