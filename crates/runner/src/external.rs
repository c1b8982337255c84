//! Trials of a variant whose agent is another program (`[variants.agent]`:
//! Claude Code, Codex CLI, mini-swe-agent, …). tack starts a recording
//! proxy for the trial, runs the agent in the sandbox with network only to
//! that proxy and within the wall-time limit, then runs the hidden checks as
//! for any trial. The trace holds the agent's model calls (the proxy's
//! events), one `agent` span with its exit code and output, and the checks.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use tack_harness::{ModelChoice, Upstream};
use tack_protocol::time::now_ms;
use tack_protocol::{
    CheckRecord, Event, EventSink, HarnessConfig, Provider, RunTotals, SandboxProfile, SpanStatus,
    StopReason, ToolCallRecord, ToolErrorKind, TrialFinished, TrialOutcome, VecSink,
};
use tack_proxy::{Proxy, ProxyConfig, ProxyError};
use tack_sandbox::{CommandOutput, CommandSpec, Confinement, SandboxError};
use tack_suite::{CommandSandbox, ExternalAgent, TamperWatch, Task, Variant, Viewer, run_checks};
use tack_trace::TrialRecorder;

use crate::RunContext;
use crate::trial::failed;

/// The agent's wall time when the variant sets no `max_wall_secs`.
pub const DEFAULT_AGENT_WALL_SECS: u64 = 30 * 60;

/// The span name (and call id) of the agent's process.
pub const AGENT_SPAN: &str = "agent";

/// One trial of an external agent, in a workspace already prepared.
pub(crate) struct ExternalTrial<'a> {
    pub variant: &'a Variant,
    pub agent: &'a ExternalAgent,
    pub task: &'a Task,
    pub config: &'a HarnessConfig,
    pub sandbox: &'a CommandSandbox,
}

impl ExternalTrial<'_> {
    /// Runs the agent and the checks; what the trace needs goes to
    /// `recorder`, the caller records the returned `TrialFinished`.
    pub(crate) async fn run(
        &self,
        run: &RunContext,
        workspace: &Path,
        recorder: &mut TrialRecorder,
        clock: Instant,
    ) -> TrialFinished {
        let upstream = match run.models.upstream(&ModelChoice::of_variant(self.variant)) {
            Ok(upstream) => upstream,
            Err(error) => return failed(clock, TrialOutcome::HarnessError, error.to_string()),
        };
        let mut watch = TamperWatch::start(&self.task.protected, workspace);
        let ran = run_agent(
            run,
            self.agent,
            self.task,
            self.config,
            &upstream,
            workspace,
        )
        .await;
        // The checks run in `finish`: what they write is not the agent's.
        watch.before_checks(workspace);
        let mut finished = match ran {
            Ok(agent_run) => {
                finish(
                    clock,
                    &agent_run,
                    self.sandbox,
                    self.task,
                    workspace,
                    recorder,
                )
                .await
            }
            Err(error) => failed(clock, TrialOutcome::HarnessError, error.to_string()),
        };
        finished.tampered = watch.tampered(workspace);
        finished
    }
}

/// What the agent did: its process and the proxy's recording.
struct AgentRun {
    output: CommandOutput,
    started_at_ms: i64,
    command: String,
    events: Vec<Event>,
    totals: RunTotals,
    /// Why part of the recording is missing, if it is.
    recording_error: Option<String>,
}

/// Why an external agent did not run to the end; the trial's harness error.
#[derive(Debug, thiserror::Error)]
enum AgentError {
    #[error("provider.base_url `{base_url}`: {source}")]
    BaseUrl {
        base_url: String,
        source: url::ParseError,
    },
    #[error("could not start the recording proxy: {0}")]
    StartProxy(#[source] ProxyError),
    #[error("could not make the agent's home directory: {0}")]
    Home(#[source] std::io::Error),
    #[error("the agent's setup could not run: {0}")]
    SetupRun(#[source] SandboxError),
    /// The setup ran and failed: what it printed is the reason.
    #[error("the agent's setup `{setup}` failed ({exit}): {stderr}")]
    SetupFailed {
        setup: String,
        exit: String,
        stderr: String,
    },
    #[error("the recording proxy failed: {0}")]
    Proxy(#[source] ProxyError),
    #[error("the agent could not run: {0}")]
    Run(#[source] SandboxError),
}

/// Starts the proxy, runs the setup step and the agent, stops the proxy.
async fn run_agent(
    run: &RunContext,
    agent: &ExternalAgent,
    task: &Task,
    config: &HarnessConfig,
    upstream: &Upstream,
    workspace: &Path,
) -> Result<AgentRun, AgentError> {
    let mut proxy_config = ProxyConfig::new(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        upstream_origin(&upstream.base_url)?,
    );
    proxy_config.prices = run.models.prices().clone();
    // The agent gets a stand-in for the key: its output is recorded, and
    // an agent that prints its environment must not put the key there.
    proxy_config.key = upstream.key.clone().map(tack_proxy::KeyStandIn::new);
    let stand_in = proxy_config.key.as_ref().map(|key| key.stand_in.clone());
    let proxy = Proxy::start(proxy_config, VecSink::default())
        .await
        .map_err(AgentError::StartProxy)?;
    let port = proxy.addr().port();
    // The agent's home: settings it writes stay with the trial, outside
    // the workspace the checks look at, and go when the trial ends.
    let home = home_dir().map_err(AgentError::Home)?;
    let confinement = task.walls(workspace, Viewer::Agent).apply(confinement(
        config.sandbox,
        workspace,
        &run.hidden,
        home.path(),
        port,
    ));
    let mut env = task.env_pairs();
    env.extend(agent_env(
        agent,
        task,
        upstream,
        stand_in.as_deref(),
        port,
        home.path(),
    ));
    let wall = Duration::from_secs(config.max_wall_secs.unwrap_or(DEFAULT_AGENT_WALL_SECS));
    let command = |script, timeout| CommandSpec {
        script,
        cwd: workspace,
        env: &env,
        timeout,
        output_limit: config.output_limit_bytes,
        confinement: &confinement,
    };
    if let Some(setup) = &agent.setup {
        let timeout = Duration::from_secs(config.command_timeout_secs);
        let output = tack_sandbox::run(&command(setup, timeout))
            .await
            .map_err(AgentError::SetupRun)?;
        if !output.success() {
            let _ = proxy.shutdown().await;
            return Err(AgentError::SetupFailed {
                setup: setup.clone(),
                exit: output.ending(),
                stderr: output.stderr.trim().to_string(),
            });
        }
    }
    let started_at_ms = now_ms();
    let output = tack_sandbox::run(&command(&agent.command, wall)).await;
    let stopped = proxy.shutdown().await.map_err(AgentError::Proxy)?;
    let output = output.map_err(AgentError::Run)?;
    Ok(AgentRun {
        output,
        started_at_ms,
        command: agent.command.clone(),
        events: stopped.sink.events,
        totals: stopped.totals,
        recording_error: stopped.sink_error.map(|e| e.to_string()),
    })
}

/// What the proxy forwards to: the variant's base URL without the `/v1`
/// that clients add themselves.
fn upstream_origin(base_url: &str) -> Result<url::Url, AgentError> {
    let origin = base_url.trim_end_matches('/');
    let origin = origin.strip_suffix("/v1").unwrap_or(origin);
    url::Url::parse(origin).map_err(|source| AgentError::BaseUrl {
        base_url: base_url.to_string(),
        source,
    })
}

fn home_dir() -> std::io::Result<tempfile::TempDir> {
    let root = tack_suite::workspaces_root();
    std::fs::create_dir_all(&root)?;
    tempfile::Builder::new()
        .prefix("agent-home-")
        .tempdir_in(&root)
}

/// The agent's walls: those of tack's own agent, its home writable, and,
/// when confined, TCP connects to the proxy's port and nothing else.
fn confinement(
    profile: SandboxProfile,
    workspace: &Path,
    hidden: &[std::path::PathBuf],
    home: &Path,
    proxy_port: u16,
) -> Confinement {
    let mut confinement =
        CommandSandbox::new(profile, hidden.to_vec()).agent_confinement(workspace);
    if profile == SandboxProfile::Off {
        return confinement;
    }
    confinement.writable.push(home.to_path_buf());
    confinement.allowing_tcp_connect_only([proxy_port])
}

/// What the agent is told: the task, the model, where the API is (the
/// proxy) and the key to send it (the proxy's stand-in for the real one);
/// then the variant's own variables.
fn agent_env(
    agent: &ExternalAgent,
    task: &Task,
    upstream: &Upstream,
    stand_in: Option<&str>,
    port: u16,
    home: &Path,
) -> Vec<(String, String)> {
    let proxy = format!("http://127.0.0.1:{port}");
    let mut env = vec![
        ("TACK_INSTRUCTION".to_string(), task.instruction.clone()),
        ("TACK_MODEL".to_string(), upstream.model.clone()),
        ("OPENAI_BASE_URL".to_string(), format!("{proxy}/v1")),
        ("ANTHROPIC_BASE_URL".to_string(), proxy),
        ("HOME".to_string(), home.to_string_lossy().into_owned()),
    ];
    if let Some(stand_in) = stand_in {
        let variable = Provider::key_var(upstream.provider);
        env.push((variable.to_string(), stand_in.to_string()));
    }
    env.extend(agent.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// Records the proxy's events and the agent's span, runs the checks, and
/// decides the outcome.
async fn finish(
    clock: Instant,
    agent: &AgentRun,
    sandbox: &CommandSandbox,
    task: &Task,
    workspace: &Path,
    recorder: &mut TrialRecorder,
) -> TrialFinished {
    let mut next_span = 1;
    for event in &agent.events {
        if let Event::ModelCall(call) = event {
            next_span = next_span.max(call.span_id + 1);
        }
        if let Err(error) = recorder.record(event.clone()) {
            return failed(clock, TrialOutcome::HarnessError, error.to_string());
        }
    }
    if let Err(error) = recorder.record(Event::ToolCall(agent_span(next_span, agent))) {
        return failed(clock, TrialOutcome::HarnessError, error.to_string());
    }
    let stop = if agent.output.timed_out {
        StopReason::TimeLimit
    } else {
        StopReason::Completed
    };
    let checked = match stop {
        StopReason::Completed => run_checks(task, workspace, sandbox)
            .await
            .map_err(|e| e.to_string()),
        _ => Ok(Vec::new()),
    };
    let mut error = agent.recording_error.clone();
    let checks_passed = match checked {
        Ok(results) if stop == StopReason::Completed => {
            for (i, result) in results.iter().enumerate() {
                let record = CheckRecord {
                    span_id: next_span + 1 + i as u32,
                    ..result.clone()
                };
                if let Err(e) = recorder.record(Event::Check(record)) {
                    return failed(clock, TrialOutcome::HarnessError, e.to_string());
                }
            }
            Some(results.iter().all(|r| r.passed))
        }
        Ok(_) => None,
        Err(check_error) => {
            error = error.or(Some(check_error));
            None
        }
    };
    if error.is_none() && !agent.output.success() {
        error = Some(format!("the agent {}", agent.output.ending()));
    }
    TrialFinished {
        outcome: TrialOutcome::decide(stop, checks_passed),
        stop_reason: stop,
        totals: agent.totals.clone(),
        feedback_rounds: 0,
        tampered: false,
        checks_passed,
        duration_ms: clock.elapsed().as_millis() as u64,
        finished_at_ms: now_ms(),
        error,
    }
}

/// The agent's process as a span: its command, exit code and output.
fn agent_span(span_id: u32, agent: &AgentRun) -> ToolCallRecord {
    let output = &agent.output;
    ToolCallRecord {
        span_id,
        parent_span_id: 0,
        step: 0,
        call_id: AGENT_SPAN.to_string(),
        tool_name: AGENT_SPAN.to_string(),
        arguments: agent.command.clone(),
        result: output.ending(),
        exit_code: output.exit_code,
        stdout: Some(output.stdout.clone()),
        stderr: Some(output.stderr.clone()),
        truncated: output.truncated(),
        started_at_ms: agent.started_at_ms,
        duration_ms: output.duration.as_millis() as u64,
        status: if output.success() {
            SpanStatus::Ok
        } else {
            SpanStatus::Error
        },
        error_kind: output.timed_out.then_some(ToolErrorKind::Timeout),
        permission: None,
        permission_rule: None,
        permission_part: None,
        sandbox_profile: Some(output.profile.as_str().to_string()),
        sandbox_denials: output.denials.clone(),
        mcp_server: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_is_the_origin_clients_add_v1_to() {
        let origin = |base: &str| {
            upstream_origin(base)
                .map(|u| u.to_string())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            origin("http://127.0.0.1:9000/v1"),
            Ok("http://127.0.0.1:9000/".to_string())
        );
        assert_eq!(
            origin("https://api.openai.com/v1/"),
            Ok("https://api.openai.com/".to_string())
        );
        assert_eq!(
            origin("https://api.anthropic.com"),
            Ok("https://api.anthropic.com/".to_string())
        );
        assert!(origin("not a url").unwrap_or_default().is_empty());
    }
}
