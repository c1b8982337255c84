use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tack_protocol::CheckRecord;
use tack_protocol::time::now_ms;
use tack_sandbox::held::HeldDir;
use tack_sandbox::{CommandSpec, Confinement};

use crate::copy::copy_tree;
use crate::reward::{Reward, read_reward};
use crate::walls::{TaskWalls, Viewer};
use crate::{Check, CommandSandbox, SuiteError, Task, checks_root};

const CHECK_OUTPUT_LIMIT: usize = 16 * 1024;

/// Where checks run and what they see besides the workspace.
struct CheckScene<'a> {
    workspace: &'a Path,
    env: &'a [(String, String)],
    sandbox: &'a CommandSandbox,
    walls: TaskWalls,
    /// The trial's copy of the task's `checks/`, for `checks_at`.
    checks_copy: Option<&'a Path>,
}

/// Runs the task's hidden checks against a workspace, confined by
/// `sandbox`: a check imports and runs the agent's code. The checks
/// directory is copied to a fresh place only now, after the agent has
/// stopped, below [`checks_root`], which agents' commands never see.
pub async fn run_checks(
    task: &Task,
    workspace: &Path,
    sandbox: &CommandSandbox,
) -> Result<Vec<CheckRecord>, SuiteError> {
    let hidden = scratch_dir(&task.id)?;
    if task.checks_dir().is_dir() {
        copy_tree(&task.checks_dir(), hidden.path(), &task.dir)
            .map_err(|e| SuiteError::io(&task.checks_dir(), e))?;
    }
    let walls = task.walls(workspace, Viewer::Checks);
    let shown = walls.apply(sandbox.confinement(workspace, false));
    refuse_over_workspace(task, &shown.guest_path(workspace))?;
    let mut env = task.env_pairs();
    env.push((
        "TACK_CHECKS".to_string(),
        hidden.path().display().to_string(),
    ));
    env.push((
        "TACK_WORKSPACE".to_string(),
        shown.guest_path(workspace).display().to_string(),
    ));
    let scene = CheckScene {
        workspace,
        env: &env,
        sandbox,
        walls,
        checks_copy: Some(hidden.path()),
    };
    run_in_scene(&task.checks, &scene, &task.id).await
}

/// A check's `checks_at` or `reward_dir` where the workspace is shown
/// (`/app`, or above or below it) would cover the agent's work with an
/// empty directory, and the check would judge that: refused, naming both.
fn refuse_over_workspace(task: &Task, workspace: &Path) -> Result<(), SuiteError> {
    let workspace: std::path::PathBuf = workspace.components().collect();
    for check in &task.checks {
        let places = [
            ("checks_at", &check.checks_at),
            ("reward_dir", &check.reward_dir),
        ];
        for (field, at) in places {
            let Some(at) = at else { continue };
            let at = Path::new(at);
            if crate::walls::covers_workspace(at, &workspace) {
                return Err(SuiteError::Environment {
                    task: task.id.clone(),
                    message: format!(
                        "check `{}`: {field} {} is where the workspace is shown ({}), which it \
                         would cover; give it a path of its own (e.g. /logs/verifier, /tests)",
                        check.name,
                        at.display(),
                        workspace.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Runs check commands in `workspace` with `env`, in order, each to its
/// timeout and confined by `sandbox`. A check that cannot start at all is
/// an error, not a failure.
pub async fn run_check_commands(
    checks: &[Check],
    workspace: &Path,
    env: &[(String, String)],
    sandbox: &CommandSandbox,
) -> Result<Vec<CheckRecord>, SuiteError> {
    let scene = CheckScene {
        workspace,
        env,
        sandbox,
        walls: TaskWalls::default(),
        checks_copy: None,
    };
    run_in_scene(checks, &scene, "checks").await
}

async fn run_in_scene(
    checks: &[Check],
    scene: &CheckScene<'_>,
    label: &str,
) -> Result<Vec<CheckRecord>, SuiteError> {
    let mut results = Vec::with_capacity(checks.len());
    for check in checks {
        results.push(run_one(check, scene, label).await?);
    }
    Ok(results)
}

/// A check's walls: the scene's, its checks shown where it asks, a fresh
/// reward directory (kept while the check runs and read after it), and
/// its network as the task declares it.
fn check_walls(
    check: &Check,
    scene: &CheckScene<'_>,
    label: &str,
) -> Result<(Confinement, Option<Scratch>), SuiteError> {
    let mut walls = scene.walls.clone();
    if let (Some(at), Some(copy)) = (&check.checks_at, scene.checks_copy) {
        walls = walls.with_read_only(copy, at);
    } else if check.checks_at.is_some() {
        return Err(SuiteError::Environment {
            task: scene.workspace.display().to_string(),
            message: format!(
                "check `{}` names `checks_at`, but only a task's checks have a checks directory",
                check.name
            ),
        });
    }
    // Each check gets its reward directory fresh: a reward left by the one
    // before must not decide this one.
    let reward_dir = match &check.reward_dir {
        Some(at) => {
            let dir = scratch_dir(&format!("{label}-reward"))?;
            if let Some(image) = &walls.image {
                image
                    .give(dir.path())
                    .map_err(|e| SuiteError::io(dir.path(), e))?;
            }
            walls = walls.with_writable(dir.path(), at);
            Some(dir)
        }
        None => None,
    };
    // A task's check has what it declares; `tack exec --check` commands
    // are the session's own and share its walls.
    let base = match scene.checks_copy {
        Some(_) => scene.sandbox.declared(scene.workspace, check.network),
        None => scene.sandbox.confinement(scene.workspace, check.network),
    };
    let mut confinement = walls.apply(base);
    if let (None, Some(copy)) = (&check.checks_at, scene.checks_copy) {
        // Read where it is ($TACK_CHECKS), inside the sealed checks root.
        confinement = confinement.exposing_read_only(copy);
    }
    Ok((confinement, reward_dir))
}

async fn run_one(
    check: &Check,
    scene: &CheckScene<'_>,
    label: &str,
) -> Result<CheckRecord, SuiteError> {
    let started_at_ms = now_ms();
    let clock = Instant::now();
    let (confinement, reward_dir) = check_walls(check, scene, label)?;
    let mut env = scene.env.to_vec();
    // Where the check is shown its files, $TACK_CHECKS names them there.
    if let (Some(at), Some(_)) = (&check.checks_at, scene.checks_copy) {
        env.retain(|(name, _)| name != "TACK_CHECKS");
        env.push(("TACK_CHECKS".to_string(), at.clone()));
    }
    env.extend(check.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let spec = CommandSpec {
        script: &check.run,
        cwd: scene.workspace,
        env: &env,
        timeout: Duration::from_secs(check.timeout_secs),
        output_limit: CHECK_OUTPUT_LIMIT,
        confinement: &confinement,
    };
    let output = tack_sandbox::run(&spec)
        .await
        .map_err(SuiteError::check(scene.workspace, &check.name))?;
    let mut text = format!("{}{}", output.stdout, output.stderr);
    if output.timed_out {
        text.push_str(&format!(
            "\n[check timed out after {}s]",
            check.timeout_secs
        ));
    }
    let mut passed = output.success();
    if let Some(dir) = &reward_dir {
        match read_reward(dir.path()) {
            Reward::Absent => text.push_str("\n[no reward file: the exit code decides]"),
            Reward::Values(values) => {
                // A check that timed out has not finished: its reward is not
                // its verdict.
                passed = !output.timed_out && values.iter().all(|(_, v)| *v >= 1.0);
                text.push_str(&format!("\n[reward: {}]", Reward::describe(&values)));
            }
            Reward::Unreadable(why) => {
                passed = false;
                text.push_str(&format!("\n[reward unreadable: {why}]"));
            }
        }
    }
    Ok(CheckRecord {
        // Given when the harness records the check among the trial's spans.
        span_id: 0,
        name: check.name.clone(),
        command: check.run.clone(),
        exit_code: output.exit_code,
        passed,
        output: text,
        started_at_ms,
        duration_ms: clock.elapsed().as_millis() as u64,
    })
}

/// A fresh directory below [`checks_root`], which agents never see,
/// removed when dropped.
struct Scratch {
    /// Held while the checks run: what a run killed while verifying left
    /// is swept by the next ([`tack_sandbox::held`]).
    _held: HeldDir,
    /// The directory the checks are given, in the held one (whose lock
    /// file they are not shown).
    path: PathBuf,
}

impl Scratch {
    fn path(&self) -> &Path {
        &self.path
    }
}

fn scratch_dir(prefix: &str) -> Result<Scratch, SuiteError> {
    let root = checks_root();
    let dir = HeldDir::new_in_swept(&root, &format!("{prefix}-"))
        .map_err(|e| SuiteError::io(&root, e))?;
    let path = dir.path().join("checks");
    std::fs::create_dir(&path).map_err(|e| SuiteError::io(&path, e))?;
    Ok(Scratch { _held: dir, path })
}
