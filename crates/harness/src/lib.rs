//! The one place the harness is assembled. `tack run` (every trial) and
//! `tack exec` (one run on a directory) both build a [`Harness`] from a
//! [`HarnessSetup`] and run it: the tools with their sandbox, the dispatcher,
//! the permission gate and the approver, the agent session, then the checks
//! and the feedback rounds. Whatever a later feature adds to the loop
//! (context strategies, subagents, MCP tools) is wired here once.
//!
//! It must not depend on `tack-runner`, `tack-trace` or Polars: it runs one
//! agent on one workspace and reports through an event sink.

mod models;
mod permissions;
mod verify;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tack_agent::skills::{Skill, SkillError, load_skills, skills_listing};
use tack_agent::{
    AgentRun, Approver, ApproverError, Dispatcher, DispatcherError, Gatekeeper, Pricer, Subagents,
    ToolContext, approver_for,
};
use tack_mcp::{McpError, McpServers, McpSetup};
use tack_permissions::RulesError;
use tack_protocol::{
    ApproverPolicy, EventSink, HarnessConfig, StopReason, TrialOutcome, tool_names,
};
use tack_sandbox::SandboxError;
use tack_suite::{CommandSandbox, TamperWatch, TaskWalls};

pub use models::{
    ModelChoice, ModelError, Models, NamedModel, PRICES_ENV, Upstream, price_table, priced_as,
};
pub use permissions::gate_for;
pub use tack_agent::{Restored, Session};
/// The model a harness drives, and the price table its calls are charged
/// from: part of this crate's API ([`Harness::run`], [`price_table`]).
pub use tack_model::Model;
pub use tack_providers::PriceTable;
pub use verify::Verification;

/// What a harness is built from.
pub struct HarnessSetup {
    pub config: HarnessConfig,
    /// Where the agent works (a trial's fresh copy, or `tack exec`'s
    /// directory, in place).
    pub workspace: PathBuf,
    /// Variables for the agent's commands and the checks.
    pub env: Vec<(String, String)>,
    /// What no command of the run may see: the suite's tasks, the traces
    /// and reports directories in use.
    pub hidden: Vec<PathBuf>,
    /// Where a configuration's relative paths (rules files, reviewer
    /// scripts) are resolved: the suite directory, or the current one.
    pub base_dir: PathBuf,
    /// The front end's answer to `approver.policy = "interactive"` (the
    /// CLI's terminal prompt). Without one, that policy is an error.
    pub interactive: Option<Arc<dyn Approver>>,
    /// The task's own walls for the agent's commands (the workspace shown
    /// at `/app`, say); none outside a suite.
    pub walls: TaskWalls,
}

impl HarnessSetup {
    /// A harness for one directory outside any suite (`tack exec`, `tack
    /// chat`): no task walls, nothing hidden, no variables of a task;
    /// relative paths in `config` from the current directory.
    pub fn for_directory(
        config: HarnessConfig,
        workspace: PathBuf,
        interactive: Option<Arc<dyn Approver>>,
    ) -> std::io::Result<HarnessSetup> {
        Ok(HarnessSetup {
            config,
            workspace,
            env: Vec::new(),
            hidden: Vec::new(),
            base_dir: std::env::current_dir()?,
            interactive,
            walls: TaskWalls::default(),
        })
    }
}

impl std::fmt::Debug for HarnessSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessSetup")
            .field("workspace", &self.workspace)
            .field("hidden", &self.hidden)
            .field("base_dir", &self.base_dir)
            .field("interactive", &self.interactive.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a harness could not be assembled: each names the setting to fix.
/// `ResultsDir` and `Workspace` hold their I/O error in `error`, not as
/// `source()`: the message says it already, and the CLI prints an error's
/// sources after its message, which would say it twice.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("harness.tools: {0}")]
    Tools(#[from] DispatcherError),
    #[error("harness.permissions: {0}")]
    Permissions(#[from] RulesError),
    #[error("harness.approver: {0}")]
    Approver(#[from] ApproverError),
    #[error(
        "harness.approver: policy `interactive` needs a person at a terminal, and this run has \
         none; use `approve_all`, `deny_all`, `rules` or `script` for unattended runs"
    )]
    NoInteractiveApprover,
    #[error(
        "could not prepare the workspace's file access: cannot create a directory for offloaded \
         results under {}: {error}",
        root.display()
    )]
    ResultsDir {
        root: PathBuf,
        error: std::io::Error,
    },
    #[error("could not prepare the workspace's file access: {}: {error}", path.display())]
    Workspace {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("skills: {0}; fix the file, or set `skills = false` to run without skills")]
    Skills(#[from] SkillError),
    #[error("harness.mcp_servers: {0}")]
    Mcp(#[from] McpError),
    /// The trial's sandbox could not be built; nothing ran.
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
}

/// An assembled harness, ready to run one agent on one workspace.
pub struct Harness {
    config: HarnessConfig,
    dispatcher: Dispatcher,
    gatekeeper: Gatekeeper,
    workspace: PathBuf,
    env: Vec<(String, String)>,
    sandbox: CommandSandbox,
    /// What `task` calls start, when the variant offers `task`.
    subagents: Option<Subagents>,
    skills: Arc<Vec<Skill>>,
    /// The MCP servers whose tools the dispatcher offers; a stdio server
    /// runs as long as the harness.
    mcp: McpServers,
    /// The trial's sandbox for `bash`, closed before each verification.
    session: Option<Arc<tack_sandbox::SessionSlot>>,
    /// Offloaded tool results, removed with the harness.
    _results: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("workspace", &self.workspace)
            .field("dispatcher", &self.dispatcher)
            .field("gatekeeper", &self.gatekeeper)
            .finish_non_exhaustive()
    }
}

/// What one harness run came to.
#[derive(Debug, Clone)]
pub struct HarnessRun {
    pub agent: AgentRun,
    /// `None` when the checks could not run (see `check_error`).
    pub checks_passed: Option<bool>,
    pub check_error: Option<String>,
    /// Rounds in which failing check output went back to the model.
    pub feedback_rounds: u32,
    /// Some check judged the agent's work; without one a completed run is
    /// [`TrialOutcome::Unverified`], never passed.
    pub verified: bool,
    /// The agent changed a file the task's checks depend on (see
    /// [`TamperWatch`]); what the checks wrote themselves does not count.
    pub tampered: bool,
}

impl HarnessRun {
    pub fn outcome(&self) -> TrialOutcome {
        match TrialOutcome::decide(self.agent.stop_reason, self.checks_passed) {
            TrialOutcome::Passed if !self.verified => TrialOutcome::Unverified,
            outcome => outcome,
        }
    }

    /// What went wrong: the agent's error first, then the checks'.
    pub fn error(&self) -> Option<String> {
        self.agent.error.clone().or(self.check_error.clone())
    }
}

impl Harness {
    /// Builds the harness; MCP servers are started (stdio ones inside the
    /// agent's sandbox) and their tools listed.
    pub async fn assemble(setup: HarnessSetup) -> Result<Harness, HarnessError> {
        let mut config = setup.config;
        let skills = Arc::new(skills_for(&mut config, &setup.base_dir, &setup.workspace)?);
        let (results, results_path) = results_dir(&config)?.unzip();
        let sandbox = CommandSandbox::new(config.sandbox, setup.hidden);
        let mut confinement = setup
            .walls
            .apply(sandbox.agent_confinement(&setup.workspace));
        if let Some(dir) = &results_path {
            confinement = confinement.exposing_read_only(dir);
        }
        // One sandbox for the trial's bash commands, built once.
        let session = if config.tools.iter().any(|t| t == tool_names::BASH) {
            Some(Arc::new(
                tack_sandbox::SessionSlot::start(&confinement, &setup.workspace).await?,
            ))
        } else {
            None
        };
        let confinement = Arc::new(confinement);
        let mcp = McpServers::connect(
            &config.mcp_servers,
            &McpSetup {
                workspace: setup.workspace.clone(),
                base_dir: setup.base_dir.clone(),
                env: setup.env.clone(),
                confinement: Arc::clone(&confinement),
            },
        )
        .await?;
        let ctx = ToolContext {
            results_dir: results_path,
            skills: Arc::clone(&skills),
            held_workspace: Default::default(),
            workspace: setup.workspace.clone(),
            env: setup.env.clone(),
            command_timeout: Duration::from_secs(config.command_timeout_secs),
            output_limit: config.output_limit_bytes,
            confinement,
            session: session.clone(),
        };
        let subagents = config
            .tools
            .iter()
            .any(|tool| tool == tool_names::TASK)
            .then(|| Subagents::new(&config, ctx.clone()))
            .transpose()?;
        let dispatcher = Dispatcher::with_extra(&config.tools, mcp.tools(), ctx)?;
        let gate = gate_for(&config, &setup.base_dir, &setup.workspace)?;
        let approver = approver(&config, &setup.base_dir, setup.interactive)?;
        let gatekeeper = Gatekeeper::new(gate, config.requires_approval.clone(), approver);
        Ok(Harness {
            config,
            dispatcher,
            gatekeeper,
            workspace: setup.workspace,
            env: setup.env,
            sandbox,
            subagents,
            skills,
            mcp,
            session,
            _results: results,
        })
    }

    pub fn config(&self) -> &HarnessConfig {
        &self.config
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The skills listed to the agent.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The MCP servers the harness connected to.
    pub fn mcp_servers(&self) -> &McpServers {
        &self.mcp
    }

    /// Runs the agent on `instruction`, then the checks; while they fail and
    /// feedback rounds are left, their output goes back to the model and the
    /// agent goes on. Every event goes to `sink`.
    pub async fn run(
        &self,
        model: &mut dyn Model,
        pricer: Option<Pricer>,
        instruction: &str,
        checks: &Verification<'_>,
        sink: &mut dyn EventSink,
    ) -> HarnessRun {
        self.run_from(model, pricer, Start::Fresh(instruction), checks, sink)
            .await
    }

    /// Carries on a session from its event log (see [`Restored`]), then
    /// runs the checks as [`Harness::run`] does.
    pub async fn resume(
        &self,
        model: &mut dyn Model,
        pricer: Option<Pricer>,
        restored: Restored,
        checks: &Verification<'_>,
        sink: &mut dyn EventSink,
    ) -> HarnessRun {
        self.run_from(model, pricer, Start::Resume(restored), checks, sink)
            .await
    }

    /// The agent session every run uses (its tools, gate, subagents and
    /// the workspace's `AGENTS.md`), for a front end that drives the turns
    /// itself (`tack chat`).
    pub fn session<'h>(
        &'h self,
        sink: &'h mut dyn EventSink,
        pricer: Option<Pricer>,
    ) -> Session<'h> {
        let project = self
            .config
            .agents_md
            .then(|| project_instructions(&self.workspace))
            .flatten();
        Session::new(&self.config, &self.dispatcher, &self.gatekeeper, sink)
            .with_pricer(pricer)
            .with_subagents(self.subagents.as_ref())
            .with_project_instructions(project)
    }

    async fn run_from(
        &self,
        model: &mut dyn Model,
        pricer: Option<Pricer>,
        start: Start<'_>,
        checks: &Verification<'_>,
        sink: &mut dyn EventSink,
    ) -> HarnessRun {
        // The files the checks depend on, as the agent finds them.
        let mut watch = match checks {
            Verification::Task(task) => Some(TamperWatch::start(&task.protected, &self.workspace)),
            Verification::Commands(_) => None,
        };
        let mut session = self.session(sink, pricer);
        let mut stop = match start {
            Start::Fresh(instruction) => session.run(model, instruction).await,
            Start::Resume(restored) => session.resume(model, restored).await,
        };
        let mut rounds = 0;
        let checked = loop {
            // The checks see none of the agent's processes (one left in the
            // background could change the workspace while they run), its MCP
            // servers' included.
            if let Some(slot) = &self.session {
                slot.close().await;
            }
            self.mcp.stop().await;
            if let Some(watch) = &mut watch {
                watch.before_checks(&self.workspace);
            }
            let verdict = checks
                .run(&self.workspace, &self.env, &self.sandbox, &mut session)
                .await;
            let Ok(Some(feedback)) = &verdict else {
                break verdict.map(|failed| failed.is_none());
            };
            if stop != StopReason::Completed || rounds >= self.config.feedback_rounds {
                break Ok(false);
            }
            // What the checks left is not the agent's doing.
            if let Some(watch) = &mut watch {
                watch.after_checks(&self.workspace);
            }
            rounds += 1;
            stop = session.run(model, feedback).await;
        };
        let (checks_passed, check_error) = match checked {
            Ok(passed) => (Some(passed), None),
            Err(error) => (None, Some(error.to_string())),
        };
        HarnessRun {
            agent: session.outcome(),
            checks_passed,
            check_error,
            feedback_rounds: rounds,
            verified: !checks.is_empty(),
            tampered: watch.is_some_and(|mut watch| watch.tampered(&self.workspace)),
        }
    }
}

/// The skills of the suite (or, outside one, the current directory) and of
/// the workspace, each `skills/<name>/SKILL.md`. When there are any, the
/// system prompt lists them and `read_skill` is offered.
fn skills_for(
    config: &mut HarnessConfig,
    base_dir: &Path,
    workspace: &Path,
) -> Result<Vec<Skill>, HarnessError> {
    if !config.skills {
        return Ok(Vec::new());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in [base_dir.join("skills"), workspace.join("skills")] {
        // A directory, not a link to one elsewhere (see load_skills).
        if !dir.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        if !dirs.contains(&real) {
            dirs.push(real);
        }
    }
    let skills = load_skills(&dirs)?;
    if !skills.is_empty() {
        config.system_prompt.push_str(&skills_listing(&skills));
        if !config.tools.iter().any(|t| t == tool_names::READ_SKILL) {
            config.tools.push(tool_names::READ_SKILL.to_string());
        }
    }
    Ok(skills)
}

/// A fresh directory for offloaded results when the strategy offloads.
/// It sits beside the trials' workspaces, under the same seal, so no other
/// trial's agent can read it; this one's sees it read-only.
/// Comes with its real path: the one the agent is told, and read_file
/// matches.
fn results_dir(
    config: &HarnessConfig,
) -> Result<Option<(tempfile::TempDir, PathBuf)>, HarnessError> {
    if config.context.offload_results_over.is_none() {
        return Ok(None);
    }
    let root = tack_suite::workspaces_root();
    let made = std::fs::create_dir_all(&root).and_then(|()| {
        tempfile::Builder::new()
            .prefix("results-")
            .tempdir_in(&root)
    });
    let dir = match made {
        Ok(dir) => dir,
        Err(error) => return Err(HarnessError::ResultsDir { root, error }),
    };
    let real = dir
        .path()
        .canonicalize()
        .map_err(|error| HarnessError::Workspace {
            path: dir.path().to_path_buf(),
            error,
        })?;
    Ok(Some((dir, real)))
}

/// Where the agent starts: a task, or a recorded session.
enum Start<'s> {
    Fresh(&'s str),
    Resume(Restored),
}

/// Bytes of `AGENTS.md` sent to the model; as much as Codex sends.
const AGENTS_MD_LIMIT: usize = 32 * 1024;

/// The workspace's `AGENTS.md`, as the message that carries it; `None` when
/// there is none. A file that cannot be read is said so to the model (it
/// would find the file anyway) rather than passed over in silence. tack
/// reads it itself, outside the sandbox, so as the file tools read: beneath
/// the workspace (a link to CLAUDE.md is followed, one to `~/.ssh/id_rsa`
/// is not), a regular file only (a FIFO is not waited on).
fn project_instructions(workspace: &Path) -> Option<String> {
    let limit = AGENTS_MD_LIMIT as u64 + 1;
    let mut bytes = match tack_sandbox::read_beneath(workspace, "AGENTS.md", limit) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return None,
        Err(error) => {
            return Some(format!(
                "This project has an AGENTS.md at the workspace root, but the harness did not read it: {error}"
            ));
        }
    };
    let cut = bytes.len() > AGENTS_MD_LIMIT;
    bytes.truncate(AGENTS_MD_LIMIT);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        text.push_str(&format!(
            "\n[AGENTS.md cut at {AGENTS_MD_LIMIT} bytes; read the file for the rest]"
        ));
    }
    Some(format!(
        "Instructions for this project, from AGENTS.md at the workspace root:\n\n{text}"
    ))
}

/// The approver the configuration names; `interactive` is the front end's.
fn approver(
    config: &HarnessConfig,
    base_dir: &Path,
    interactive: Option<Arc<dyn Approver>>,
) -> Result<Box<dyn Approver>, HarnessError> {
    if config.approver.policy == ApproverPolicy::Interactive {
        let front_end = interactive.ok_or(HarnessError::NoInteractiveApprover)?;
        return Ok(Box::new(Shared(front_end)));
    }
    Ok(approver_for(&config.approver, base_dir.to_path_buf())?)
}

/// One front-end approver shared by every trial of a run.
struct Shared(Arc<dyn Approver>);

#[async_trait::async_trait]
impl Approver for Shared {
    async fn decide(&self, request: &tack_agent::ApprovalRequest) -> tack_agent::ApprovalDecision {
        self.0.decide(request).await
    }
}
