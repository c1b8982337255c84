//! Waiting for a trial's environment to be up: the task's health check,
//! run like its other commands, and its services' (engine mode), run in
//! each service's container. Both follow Docker's rules ([`Healthcheck`]).

use std::future::Future;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tack_image::ContainerState;
use tack_sandbox::{CommandSpec, Confinement};

use crate::container::TrialContainer;
use crate::{Healthcheck, SuiteError, Task};

/// How a failed try of a health check ended: its exit and what it printed.
struct Failed {
    exit: String,
    output: String,
}

/// Tries the task's health check until it succeeds; an environment that
/// never becomes healthy fails the trial's setup with the last try's words.
pub(crate) async fn wait_healthy(
    task: &Task,
    health: &Healthcheck,
    cwd: &Path,
    env: &[(String, String)],
    confinement: &Confinement,
) -> Result<(), SuiteError> {
    until_healthy(task, "the environment", health, || async {
        let spec = CommandSpec {
            script: &health.command,
            cwd,
            env,
            timeout: Duration::from_secs_f64(health.timeout_secs),
            output_limit: 4 * 1024,
            confinement,
        };
        let output = tack_sandbox::run(&spec)
            .await
            .map_err(|error| SuiteError::Sandbox {
                task: task.id.clone(),
                error,
            })?;
        Ok((!output.success()).then(|| Failed {
            exit: output
                .exit_code
                .map_or("none".to_string(), |c| c.to_string()),
            output: format!("{}{}", output.stdout, output.stderr),
        }))
    })
    .await
}

/// Waits for each of the trial's services to pass its health check (in
/// the task's order), then finds every service still running: one that
/// ended fails the trial's setup with its exit and its log's tail.
pub(crate) async fn wait_services(
    task: &Task,
    container: &TrialContainer,
) -> Result<(), SuiteError> {
    let program = container.engine.program();
    for (service, name) in &container.services {
        let declared = task
            .environment
            .services
            .iter()
            .find(|s| s.name == *service);
        let Some(health) = declared.and_then(|s| s.healthcheck.as_ref()) else {
            continue;
        };
        let what = format!("service `{service}`");
        let attempt = || async {
            let failed = exec_try(program, name, health).await?;
            if failed.is_some()
                && let ContainerState::Exited(code) = state(task, container, name).await?
            {
                return Err(SuiteError::Environment {
                    task: task.id.clone(),
                    message: format!(
                        "service `{service}` ended (exit {code}) before it was healthy"
                    ),
                });
            }
            Ok(failed)
        };
        let waited = until_healthy(task, &what, health, attempt).await;
        if let Err(SuiteError::Environment { task, message }) = waited {
            let log = service_log(container, name).await;
            return Err(SuiteError::Environment {
                task,
                message: format!("{message}\nits log ends:\n{log}"),
            });
        }
        waited?;
    }
    for (service, name) in &container.services {
        if let ContainerState::Exited(code) = state(task, container, name).await? {
            return Err(SuiteError::Environment {
                task: task.id.clone(),
                message: format!(
                    "service `{service}` ended (exit {code}) before the trial started; its log \
                     ends:\n{}",
                    service_log(container, name).await
                ),
            });
        }
    }
    Ok(())
}

/// Whether the service container `name` runs.
async fn state(
    task: &Task,
    container: &TrialContainer,
    name: &str,
) -> Result<ContainerState, SuiteError> {
    let (engine, probe) = (container.engine.clone(), name.to_string());
    let fail = |message: String| SuiteError::Environment {
        task: task.id.clone(),
        message,
    };
    match tokio::task::spawn_blocking(move || engine.container_state(&probe)).await {
        Ok(Ok(state)) => Ok(state),
        Ok(Err(error)) => Err(fail(format!(
            "service container {name} cannot be found: {error}"
        ))),
        Err(join) => Err(fail(format!(
            "service container {name} could not be looked at: {join}"
        ))),
    }
}

/// The last lines a service's container printed.
async fn service_log(container: &TrialContainer, name: &str) -> String {
    let (engine, name) = (container.engine.clone(), name.to_string());
    tokio::task::spawn_blocking(move || engine.container_log(&name, 20))
        .await
        .unwrap_or_else(|join| format!("(its log could not be read: {join})"))
}

/// One try of a service's health check: `sh -c` in its container.
async fn exec_try(
    program: &str,
    container: &str,
    health: &Healthcheck,
) -> Result<Option<Failed>, SuiteError> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(["exec", container, "sh", "-c", &health.command])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let limit = Duration::from_secs_f64(health.timeout_secs);
    Ok(match tokio::time::timeout(limit, command.output()).await {
        Err(_) => Some(Failed {
            exit: "none".into(),
            output: format!("no answer within {}s", health.timeout_secs),
        }),
        Ok(Err(error)) => Some(Failed {
            exit: "none".into(),
            output: format!("`{program} exec` could not run: {error}"),
        }),
        Ok(Ok(out)) if out.status.success() => None,
        Ok(Ok(out)) => Some(Failed {
            exit: out.status.code().map_or("none".into(), |c| c.to_string()),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }),
    })
}

/// Tries `attempt` until it succeeds, by `health`'s rules: every
/// `start_interval_secs` during the start period, whose failures do not
/// count, then every `interval_secs`; after `retries` more failures,
/// `what` did not become healthy.
async fn until_healthy<F, Fut>(
    task: &Task,
    what: &str,
    health: &Healthcheck,
    mut attempt: F,
) -> Result<(), SuiteError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<Failed>, SuiteError>>,
{
    let started = Instant::now();
    let start_period = Duration::from_secs_f64(health.start_period_secs);
    let mut failures = 0;
    loop {
        let Some(failed) = attempt().await? else {
            return Ok(());
        };
        let starting = started.elapsed() < start_period;
        if !starting {
            failures += 1;
        }
        if failures > health.retries {
            return Err(SuiteError::Environment {
                task: task.id.clone(),
                message: format!(
                    "{what} did not become healthy: `{}` failed {failures} times after {:.0}s \
                     (exit {}): {}",
                    health.command,
                    started.elapsed().as_secs_f64(),
                    failed.exit,
                    failed.output.trim()
                ),
            });
        }
        let pause = if starting {
            health.start_interval_secs
        } else {
            health.interval_secs
        };
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
    }
}
