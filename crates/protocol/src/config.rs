use serde::{Deserialize, Serialize};

/// How a command's result is shown to the model. The trace always keeps all
/// of it; this only decides what the model gets to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultView {
    /// Exit code, stdout and stderr, each labelled.
    Full,
    /// Stdout alone: failures reported on stderr or by exit code stay hidden.
    StdoutOnly,
}

impl ResultView {
    pub fn as_str(self) -> &'static str {
        match self {
            ResultView::Full => "full",
            ResultView::StdoutOnly => "stdout_only",
        }
    }
}

/// How the agent's commands are confined by the kernel. `strict` (the
/// default) confines writes to the workspace and a private temporary
/// directory and cuts the network; `workspace_write` keeps the network;
/// `off` runs commands unconfined, and reports say so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxProfile {
    #[default]
    Strict,
    /// Also spelled as the command line spells it (`--sandbox workspace-write`).
    #[serde(alias = "workspace-write")]
    WorkspaceWrite,
    Off,
}

impl SandboxProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxProfile::Strict => "strict",
            SandboxProfile::WorkspaceWrite => "workspace_write",
            SandboxProfile::Off => "off",
        }
    }
}

pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a coding agent working in a software project. \
Use the tools to inspect the files, make the change the user asks for, and run the project's tests to check it. \
When the work is done, answer with a short summary and no tool call.";

/// A harness configuration: everything about the agent's runtime that a
/// variant can change, apart from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HarnessConfig {
    pub system_prompt: String,
    /// Tools offered to the model, by name.
    pub tools: Vec<String>,
    pub tool_results: ResultView,
    /// Model calls before the loop stops with `step_limit`.
    pub max_steps: u32,
    /// Per-command timeout of the `bash` tool.
    pub command_timeout_secs: u64,
    /// Bytes kept of each output stream and of a file read.
    pub output_limit_bytes: usize,
    /// Wall-clock seconds for the agent loop before it stops with `time_limit`.
    pub max_wall_secs: Option<u64>,
    /// Tokens (input + output, all calls) before the loop stops with `token_limit`.
    pub max_tokens: Option<u64>,
    /// Dollars before the loop stops with `cost_limit` (priced calls only).
    pub max_cost_usd: Option<f64>,
    /// Attempts per model call for transient failures (1 = no retries).
    pub model_attempts: u32,
    /// After a failed verification, the failing check output goes back to the
    /// model for up to this many more rounds.
    pub feedback_rounds: u32,
    /// Permission rules: absent = every call allowed; `"default"` = the
    /// built-in profile; otherwise a rules file (relative to the suite).
    pub permissions: Option<String>,
    /// Tools that always need an approver's decision, whatever the rules say.
    pub requires_approval: Vec<String>,
    /// Who decides when a call needs approval.
    pub approver: ApproverConfig,
    /// How the agent's commands are confined: `strict` (writes only in the
    /// workspace, no network), `workspace_write` (network allowed), `off`.
    pub sandbox: SandboxProfile,
    /// Whether `AGENTS.md` at the workspace root goes into the context,
    /// after the system prompt (on by default; left out of a recorded
    /// configuration when on, as before the setting existed).
    #[serde(skip_serializing_if = "is_true")]
    pub agents_md: bool,
    /// Whether skills (`skills/*/SKILL.md` of the suite and the workspace)
    /// are listed in the system prompt, with `read_skill` to load one (on
    /// by default; left out of a recorded configuration when on).
    #[serde(skip_serializing_if = "is_true")]
    pub skills: bool,
    /// How the conversation is kept inside the model's context window.
    /// Left out when off, so a configuration recorded before strategies
    /// existed reads as the same plan (a resume compares them).
    #[serde(skip_serializing_if = "ContextConfig::is_off")]
    pub context: ContextConfig,
    /// What the children started by the `task` tool may do (left out when
    /// default, as for `context`).
    #[serde(skip_serializing_if = "SubagentConfig::is_default")]
    pub subagents: SubagentConfig,
    /// MCP servers whose tools are offered beside the built-in ones, as
    /// `<server>__<tool>` (left out when none, as for `context`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::McpServerConfig>,
    /// Where the trials of tasks with a container image run: in the image's
    /// filesystem under tack's sandbox, or (`engine`) in a container the
    /// engine starts (left out when `sandbox`, as for `context`).
    #[serde(skip_serializing_if = "ImageMode::is_sandbox")]
    pub image_tasks: ImageMode,
}

/// Where an image task's trials run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageMode {
    /// The image's filesystem, each command under tack's own sandbox (a
    /// fork inside walls built once per trial).
    #[default]
    Sandbox,
    /// A container the engine (podman, docker) starts for the trial, with
    /// the image's `ENTRYPOINT`; each command through the engine's `exec`.
    /// For what the sandbox cannot give: services the entrypoint starts,
    /// the engine's networking.
    Engine,
}

impl ImageMode {
    pub fn is_sandbox(&self) -> bool {
        *self == ImageMode::Sandbox
    }

    /// The mode of two settings (a task's and a variant's): the engine if
    /// either asks for it, since a task that needs it runs nowhere else.
    pub fn either(self, other: ImageMode) -> ImageMode {
        if self == ImageMode::Engine || other == ImageMode::Engine {
            ImageMode::Engine
        } else {
            ImageMode::Sandbox
        }
    }
}

/// Where a trial ran, as its record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialEnvironment {
    /// On the host's filesystem, under tack's sandbox.
    Host,
    /// In its image's filesystem, under tack's sandbox.
    Image,
    /// In a container the engine ran.
    Engine,
}

impl TrialEnvironment {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialEnvironment::Host => "host",
            TrialEnvironment::Image => "image",
            TrialEnvironment::Engine => "engine",
        }
    }
}

pub const SUBAGENT_SYSTEM_PROMPT: &str = "You are a subagent of a coding agent. \
Another agent gave you the task below; do it with the tools you have (they may only read), then answer with what you found, \
briefly and specifically (file paths, line numbers, names), and no tool call. Your answer is all the other agent will see.";

/// The child sessions the `task` tool starts: each has a fresh context, its
/// own tools and limits, and returns only its final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubagentConfig {
    pub system_prompt: String,
    /// The child's tools; by default those that only read. Its commands
    /// run under a read-only sandbox whatever the list says.
    pub tools: Vec<String>,
    /// Model calls per child.
    pub max_steps: u32,
    /// Tokens per child (input + output, all its calls).
    pub max_tokens: Option<u64>,
    /// `task` calls of one turn that run at once; the rest wait.
    pub max_concurrent: usize,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        SubagentConfig {
            system_prompt: SUBAGENT_SYSTEM_PROMPT.to_string(),
            tools: crate::tool_names::READ_ONLY
                .iter()
                .map(|t| t.to_string())
                .collect(),
            max_steps: 15,
            max_tokens: None,
            max_concurrent: 4,
        }
    }
}

impl SubagentConfig {
    pub fn is_default(&self) -> bool {
        self == &SubagentConfig::default()
    }

    /// What is wrong with these settings, in words for the suite's author.
    pub fn problem(&self) -> Option<String> {
        if self.tools.iter().any(|t| t == crate::tool_names::TASK) {
            return Some(
                "subagents.tools may not include `task`: a subagent does not start subagents"
                    .to_string(),
            );
        }
        if self.max_concurrent == 0 {
            return Some("subagents.max_concurrent = 0: give at least 1".to_string());
        }
        if self.max_steps == 0 {
            return Some("subagents.max_steps = 0: give at least 1".to_string());
        }
        None
    }
}

fn is_true(value: &bool) -> bool {
    *value
}

/// A context strategy: what the harness does so that a long task fits the
/// model's window. Every setting is off by default, so the model is sent
/// the whole conversation, as a plain loop would.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// The model's context window in tokens, counted by the tokenizer
    /// before each call; needed by `compact_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Tool results older than this many steps are replaced, in what the
    /// model is sent, by a one-line stub saying what was dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strip_results_after: Option<u32>,
    /// Past this fraction of the window (0 < f ≤ 1), a model call
    /// summarises the older history; the system prompt, the task, the
    /// summary and the last `keep_last_steps` steps stay verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_at: Option<f64>,
    /// Steps kept verbatim by a compaction (default 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_last_steps: Option<u32>,
    /// A tool result longer than this many bytes is written to a file
    /// outside the workspace that the agent can read, and the model is
    /// shown its head and tail with the file's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload_results_over: Option<u64>,
}

impl ContextConfig {
    pub const DEFAULT_KEEP_LAST_STEPS: u32 = 4;
    /// Below this an offloaded result's preview would be longer than the
    /// result itself.
    pub const MIN_OFFLOAD_BYTES: u64 = 512;

    /// No strategy: the whole conversation is sent on every call.
    pub fn is_off(&self) -> bool {
        self == &ContextConfig::default()
    }

    pub fn keep_last_steps(&self) -> u32 {
        self.keep_last_steps
            .unwrap_or(Self::DEFAULT_KEEP_LAST_STEPS)
    }

    /// What is wrong with these settings, in words for the suite's author.
    pub fn problem(&self) -> Option<String> {
        if let Some(at) = self.compact_at {
            if !(at > 0.0 && at <= 1.0) {
                return Some(format!(
                    "compact_at = {at}: give a fraction of the window above 0 and at most 1, e.g. 0.8"
                ));
            }
            if self.context_window.is_none() {
                return Some(
                    "compact_at needs context_window: set the model's window in tokens, e.g. context_window = 128000"
                        .to_string(),
                );
            }
        }
        if self.context_window == Some(0) {
            return Some("context_window = 0: give the model's window in tokens".to_string());
        }
        if self
            .offload_results_over
            .is_some_and(|bytes| bytes < Self::MIN_OFFLOAD_BYTES)
        {
            return Some(format!(
                "offload_results_over must be at least {} bytes, room for the preview the model is shown instead; e.g. offload_results_over = 8192",
                Self::MIN_OFFLOAD_BYTES
            ));
        }
        None
    }
}

/// Who answers an `ask`. Unattended runs use a fixed policy so they stay
/// reproducible; `interactive` asks on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApproverPolicy {
    ApproveAll,
    DenyAll,
    /// Approve calls whose command (or tool name) matches one of `approve`.
    Rules,
    /// Run `script` with the request as JSON on stdin; exit 0 approves.
    Script,
    Interactive,
}

impl ApproverPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ApproverPolicy::ApproveAll => "approve_all",
            ApproverPolicy::DenyAll => "deny_all",
            ApproverPolicy::Rules => "rules",
            ApproverPolicy::Script => "script",
            ApproverPolicy::Interactive => "interactive",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApproverConfig {
    pub policy: ApproverPolicy,
    /// For `rules`: globs over the command (bash) or the tool name.
    pub approve: Vec<String>,
    /// For `script`: the reviewer command.
    pub script: Option<String>,
}

impl Default for ApproverConfig {
    fn default() -> Self {
        ApproverConfig {
            policy: ApproverPolicy::DenyAll,
            approve: Vec::new(),
            script: None,
        }
    }
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            tools: crate::tool_names::DEFAULT.map(String::from).to_vec(),
            tool_results: ResultView::Full,
            max_steps: 30,
            command_timeout_secs: 60,
            output_limit_bytes: 32 * 1024,
            max_wall_secs: None,
            max_tokens: None,
            max_cost_usd: None,
            model_attempts: 4,
            feedback_rounds: 0,
            permissions: None,
            requires_approval: Vec::new(),
            approver: ApproverConfig::default(),
            sandbox: SandboxProfile::default(),
            agents_md: true,
            context: ContextConfig::default(),
            subagents: SubagentConfig::default(),
            skills: true,
            mcp_servers: Vec::new(),
            image_tasks: ImageMode::Sandbox,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_write_is_spelled_either_way() {
        for text in ["\"workspace_write\"", "\"workspace-write\""] {
            let profile: Option<SandboxProfile> = serde_json::from_str(text).ok();
            assert_eq!(profile, Some(SandboxProfile::WorkspaceWrite), "{text}");
        }
        let written = serde_json::to_string(&SandboxProfile::WorkspaceWrite).unwrap_or_default();
        assert_eq!(written, "\"workspace_write\"");
    }

    #[test]
    fn a_configuration_without_a_context_strategy_reads_as_before_strategies() {
        let plain = serde_json::to_value(HarnessConfig::default()).unwrap_or_default();
        assert!(plain.get("context").is_none(), "{plain}");
        assert!(plain.get("agents_md").is_none(), "{plain}");
        assert!(plain.get("subagents").is_none(), "{plain}");
        assert!(plain.get("skills").is_none(), "{plain}");
        let without: HarnessConfig =
            serde_json::from_value(serde_json::json!({"agents_md": false})).unwrap_or_default();
        assert!(!without.agents_md);
        let stripping = HarnessConfig {
            context: ContextConfig {
                strip_results_after: Some(3),
                ..ContextConfig::default()
            },
            ..HarnessConfig::default()
        };
        let value = serde_json::to_value(&stripping).unwrap_or_default();
        assert_eq!(
            value["context"],
            serde_json::json!({"strip_results_after": 3})
        );
        let back: HarnessConfig = serde_json::from_value(value).unwrap_or_default();
        assert_eq!(back, stripping);
    }

    #[test]
    fn subagent_settings_say_what_is_wrong() {
        assert_eq!(SubagentConfig::default().problem(), None);
        let nested = SubagentConfig {
            tools: vec!["task".to_string()],
            ..SubagentConfig::default()
        };
        assert!(nested.problem().unwrap().contains("may not include `task`"));
        let none_at_once = SubagentConfig {
            max_concurrent: 0,
            ..SubagentConfig::default()
        };
        assert!(none_at_once.problem().unwrap().contains("max_concurrent"));
        let tiny = ContextConfig {
            offload_results_over: Some(10),
            ..ContextConfig::default()
        };
        assert!(tiny.problem().unwrap().contains("at least 512"));
    }

    #[test]
    fn the_engine_wins_when_a_task_or_a_variant_asks_for_it() {
        use ImageMode::{Engine, Sandbox};
        assert_eq!(Sandbox.either(Sandbox), Sandbox);
        assert_eq!(Sandbox.either(Engine), Engine);
        assert_eq!(Engine.either(Sandbox), Engine);
        let plain = serde_json::to_value(HarnessConfig::default()).unwrap_or_default();
        assert!(plain.get("image_tasks").is_none(), "{plain}");
        let engine: HarnessConfig =
            serde_json::from_value(serde_json::json!({"image_tasks": "engine"}))
                .unwrap_or_default();
        assert_eq!(engine.image_tasks, Engine);
    }
}
