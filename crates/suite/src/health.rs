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
use crate::{Healthcheck, Service, ServiceWait, SuiteError, Task};

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

/// Waits for what the trial waits for of `service` (its container `name`)
/// before the next service starts: its health check to pass, or it to end
/// with exit 0; one that ends too soon, or badly, fails the trial's setup
/// with its exit and its log's tail.
pub(crate) async fn wait_service(
    task: &Task,
    container: &TrialContainer,
    service: &Service,
    name: &str,
) -> Result<(), SuiteError> {
    let waited = match (service.waits_for(), &service.healthcheck) {
        (ServiceWait::Completed, _) => wait_completed(task, container, service, name).await,
        (ServiceWait::Healthy, Some(health)) => {
            let program = container.engine.program();
            let attempt = || async {
                let failed = exec_try(program, name, health).await?;
                if failed.is_some()
                    && let ContainerState::Exited(code) = state(task, container, name).await?
                {
                    return Err(SuiteError::Environment {
                        task: task.id.clone(),
                        message: format!(
                            "service `{}` ended (exit {code}) before it was healthy",
                            service.name
                        ),
                    });
                }
                Ok(failed)
            };
            let what = format!("service `{}`", service.name);
            until_healthy(task, &what, health, attempt).await
        }
        (ServiceWait::Healthy | ServiceWait::Started, _) => Ok(()),
    };
    match waited {
        Err(SuiteError::Environment { task, message }) => {
            let log = service_log(container, name).await;
            Err(SuiteError::Environment {
                task,
                message: format!("{message}\nits log ends:\n{log}"),
            })
        }
        other => other,
    }
}

/// How often a job's container is looked at while the trial waits for it
/// to end.
const JOB_POLL: Duration = Duration::from_millis(200);
/// How long a job may run before the trial stops waiting for it (compose
/// waits forever; a seed or a migration takes seconds).
const JOB_LIMIT: Duration = Duration::from_secs(600);

/// Waits for `service`, a job, to end: with exit 0 the trial goes on; with
/// another, or still running after [`JOB_LIMIT`], its setup fails.
async fn wait_completed(
    task: &Task,
    container: &TrialContainer,
    service: &Service,
    name: &str,
) -> Result<(), SuiteError> {
    let started = Instant::now();
    loop {
        match state(task, container, name).await? {
            ContainerState::Exited(0) => return Ok(()),
            ContainerState::Exited(code) => {
                return Err(SuiteError::Environment {
                    task: task.id.clone(),
                    message: format!(
                        "service `{}` ended with exit {code}; the trial waits for it to complete \
                         successfully (exit 0)",
                        service.name
                    ),
                });
            }
            ContainerState::Running if started.elapsed() >= JOB_LIMIT => {
                return Err(SuiteError::Environment {
                    task: task.id.clone(),
                    message: format!(
                        "service `{}` still runs after {}s; the trial waits for it to complete",
                        service.name,
                        JOB_LIMIT.as_secs()
                    ),
                });
            }
            ContainerState::Running => tokio::time::sleep(JOB_POLL).await,
        }
    }
}

/// Finds every service the trial does not wait to end still running: one
/// that ended fails the trial's setup with its exit and its log's tail.
pub(crate) async fn services_running(
    task: &Task,
    container: &TrialContainer,
) -> Result<(), SuiteError> {
    for (service, name) in &container.services {
        let job = (task.environment.services.iter())
            .any(|s| s.name == *service && s.waits_for() == ServiceWait::Completed);
        if job {
            continue;
        }
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
