//! The vocabulary every tack crate speaks: conversation messages, tool calls,
//! token usage, stop reasons, trial outcomes, the ordered event stream that
//! the harness emits and the trace stores and the totals folded from it, the
//! harness configuration, providers, time stamps, shell quoting and counts
//! with their nouns.
//!
//! It depends on no workspace crate and on nothing heavy (serde only): every
//! crate builds on it.

mod access;
mod config;
mod count;
mod event;
mod mcp;
mod message;
mod model_params;
mod model_spec;
mod name;
mod nearest;
mod outcome;
mod printable;
mod shell;
mod solution;
pub mod time;
mod usage;

pub use access::{ToolAccess, ToolHint, tool_names};
pub use config::{
    ApproverConfig, ApproverPolicy, ContextConfig, DEFAULT_SYSTEM_PROMPT, HarnessConfig, ImageMode,
    ResultView, SUBAGENT_SYSTEM_PROMPT, SandboxProfile, SubagentConfig, TrialEnvironment,
};
pub use count::count;
pub use event::{
    ApprovalRecord, ApprovalRequestedRecord, COMPACTION_PROMPT, COMPACTION_PURPOSE, CheckRecord,
    Event, EventSink, ModelCallRecord, RunTotals, SUBAGENT_PURPOSE, SinkError, SpanStatus,
    ToolCallRecord, ToolErrorKind, TrialFinished, TrialStarted, VecSink, trial_id,
};
pub use mcp::{MCP_TOOL_SEPARATOR, McpServerConfig, McpTransport, mcp_tool_name};
pub use message::{COMPACTION_SUMMARY_START, FinishReason, Message, Role, ToolCall, ToolSpec};
pub use model_params::{ChaosParams, ParamsError, SimParams};
pub use model_spec::{BuiltinModel, ModelSpec, ModelSpecError, Provider};
pub use name::is_plain_name;
pub use nearest::nearest;
pub use outcome::{StopReason, TrialOutcome};
pub use printable::{printable, printable_line};
pub use shell::shell_quote;
pub use solution::{Edit, Solution};
pub use usage::Usage;
