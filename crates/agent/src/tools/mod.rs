//! The tools the model can call. Each has a JSON Schema the model sees and
//! typed arguments; argument errors name the field that is off.

mod bash;
mod files;
mod grep;
mod list;
mod paths;
mod schema;
mod skill;
mod task;
mod todos;
mod walk;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use tack_protocol::{ToolAccess, ToolErrorKind, ToolSpec, tool_names};
use tack_sandbox::CommandOutput;

pub use bash::BashTool;
pub use files::{ReadFileTool, StrReplaceTool, WriteFileTool};
pub use grep::GrepTool;
pub use list::ListFilesTool;
pub(crate) use schema::ArgumentSchema;
pub use schema::InvalidToolSchema;
pub use skill::ReadSkillTool;
pub use task::TaskTool;
pub use todos::WriteTodosTool;

/// What every tool call may use: the trial's workspace and its limits.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub workspace: PathBuf,
    /// Variables set for the agent's commands (the task's environment).
    pub env: Vec<(String, String)>,
    pub command_timeout: Duration,
    /// Bytes kept of each output stream, and of a file read.
    pub output_limit: usize,
    /// How `bash` commands are confined.
    pub confinement: std::sync::Arc<tack_sandbox::Confinement>,
    /// The trial's sandbox, built once behind `confinement`, that `bash`
    /// commands start in; `None`: each builds its own walls.
    pub session: Option<Arc<tack_sandbox::SessionSlot>>,
    /// Where long tool results are offloaded (outside the workspace,
    /// readable by the agent, written only by the harness); `None` when the
    /// context strategy does not offload.
    pub results_dir: Option<PathBuf>,
    /// The skills `read_skill` loads (listed in the system prompt).
    pub skills: Arc<Vec<crate::skills::Skill>>,
    /// The workspace root the file tools hold open for the trial.
    pub held_workspace: tack_sandbox::HeldWorkspace,
}

/// What a tool produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOutput {
    /// A shell command's full result; the harness's result view decides what
    /// the model sees of it.
    Command(CommandOutput),
    Text {
        text: String,
        truncated: bool,
    },
}

/// Why a tool call produced no output. The message is written for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
}

impl ToolError {
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::new(ToolErrorKind::ExecutionFailed, message)
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    /// What a call with these arguments (already checked against the
    /// tool's schema) will read, write or execute. The permission engine
    /// judges this declaration, so it needs to know nothing of the tool.
    fn access(&self, arguments: &serde_json::Value) -> Vec<ToolAccess>;
    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
    /// The schema arguments must fit, when the spec offered to the model
    /// shows less of it: an MCP tool among many is offered by name and
    /// description, and its schema is shown on first use.
    fn full_parameters(&self) -> Option<serde_json::Value> {
        None
    }
    /// The MCP server the tool belongs to (spans record it).
    fn server(&self) -> Option<&str> {
        None
    }
}

/// Names of the built-in tools, in the order they are offered.
pub const BUILTIN_TOOLS: [&str; 9] = tool_names::BUILTIN;

/// Looks up a built-in tool by name.
pub fn builtin_tool(name: &str) -> Option<Arc<dyn Tool>> {
    let tools: [Arc<dyn Tool>; 9] = [
        Arc::new(BashTool),
        Arc::new(ReadFileTool),
        Arc::new(WriteFileTool),
        Arc::new(StrReplaceTool),
        Arc::new(ListFilesTool),
        Arc::new(GrepTool),
        Arc::new(WriteTodosTool),
        Arc::new(TaskTool),
        Arc::new(ReadSkillTool),
    ];
    tools.into_iter().find(|tool| tool.spec().name == name)
}

/// A string argument of a schema-checked call (`None` if absent).
pub(crate) fn string_argument<'a>(arguments: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(serde_json::Value::as_str)
}

/// Deserializes a tool's arguments, naming the field at fault:
/// `command: invalid type: integer `42`, expected a string`.
pub(crate) fn parse_arguments<T: DeserializeOwned>(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(arguments).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        // serde already names the field in these two.
        let named = inner.starts_with("unknown field") || inner.starts_with("missing field");
        let location = if path == "." || named {
            String::new()
        } else {
            format!("field `{path}`: ")
        };
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "invalid arguments for `{tool}`: {location}{inner}. Check the tool's schema and call it again."
            ),
        )
    })
}

/// Runs blocking file-system work (walks, searches) on tokio's blocking pool,
/// so a long search does not hold up the async workers other trials run on.
/// A panic in `work` is re-raised, for the dispatcher to report.
pub(crate) async fn blocking<F>(work: F) -> Result<ToolOutput, ToolError>
where
    F: FnOnce() -> Result<ToolOutput, ToolError> + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => match join.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(join) => Err(ToolError::failed(format!(
                "the search was cancelled: {join}"
            ))),
        },
    }
}
