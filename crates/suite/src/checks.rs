use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tack_sandbox::CommandSpec;

use crate::copy::copy_tree;
use crate::{Check, CommandSandbox, SuiteError, Task, checks_root};

const CHECK_OUTPUT_LIMIT: usize = 16 * 1024;

/// What one hidden check said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
    /// stdout then stderr, capped.
    pub output: String,
    pub started_at_ms: i64,
    pub duration_ms: u64,
}

/// Runs the task's hidden checks against a workspace, confined by
/// `sandbox`: a check imports and runs the agent's code. The checks
/// directory is copied to a fresh place only now, after the agent has
/// stopped, below [`checks_root`], which agents' commands never see.
pub async fn run_checks(
    task: &Task,
    workspace: &Path,
    sandbox: &CommandSandbox,
) -> Result<Vec<CheckResult>, SuiteError> {
    let root = checks_root();
    std::fs::create_dir_all(&root).map_err(|e| SuiteError::io(&root, e))?;
    let hidden = tempfile::Builder::new()
        .prefix(&format!("{}-", task.id))
        .tempdir_in(&root)
        .map_err(|e| SuiteError::io(&root, e))?;
    if task.checks_dir().is_dir() {
        copy_tree(&task.checks_dir(), hidden.path())
            .map_err(|e| SuiteError::io(&task.checks_dir(), e))?;
    }
    let mut env = task.env_pairs();
    env.push((
        "TACK_CHECKS".to_string(),
        hidden.path().display().to_string(),
    ));
    env.push((
        "TACK_WORKSPACE".to_string(),
        workspace.display().to_string(),
    ));
    run_check_commands(&task.checks, workspace, &env, sandbox).await
}

/// Runs check commands in `workspace` with `env`, in order, each to its
/// timeout and confined by `sandbox`. A check that cannot start at all is
/// an error, not a failure.
pub async fn run_check_commands(
    checks: &[Check],
    workspace: &Path,
    env: &[(String, String)],
    sandbox: &CommandSandbox,
) -> Result<Vec<CheckResult>, SuiteError> {
    let mut results = Vec::with_capacity(checks.len());
    for check in checks {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let confinement = sandbox.confinement(workspace, check.network);
        let spec = CommandSpec {
            script: &check.run,
            cwd: workspace,
            env,
            timeout: Duration::from_secs(check.timeout_secs),
            output_limit: CHECK_OUTPUT_LIMIT,
            confinement: &confinement,
        };
        let output = tack_sandbox::run(&spec)
            .await
            .map_err(|e| SuiteError::Environment {
                task: workspace.display().to_string(),
                message: format!("check `{}` could not run: {e}", check.name),
            })?;
        let mut text = format!("{}{}", output.stdout, output.stderr);
        if output.timed_out {
            text.push_str(&format!(
                "\n[check timed out after {}s]",
                check.timeout_secs
            ));
        }
        results.push(CheckResult {
            name: check.name.clone(),
            command: check.run.clone(),
            exit_code: output.exit_code,
            passed: output.success(),
            output: text,
            started_at_ms,
            duration_ms: clock.elapsed().as_millis() as u64,
        });
    }
    Ok(results)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
