use async_trait::async_trait;
use serde_json::json;
use tack_protocol::tool_names::TASK;
use tack_protocol::{ToolAccess, ToolSpec};

use super::{Tool, ToolContext, ToolError, ToolOutput};

/// Starts a subagent. The tool declares the call (its schema, and that it
/// touches nothing itself: the child's own calls are judged one by one);
/// the agent session runs it, since a child needs the model.
#[derive(Debug)]
pub struct TaskTool;

#[async_trait]
impl Tool for TaskTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TASK.to_string(),
            description: "Hand a self-contained piece of work (a search across the project, reading and summarising files) to a subagent with a fresh context. It can only read, and you get back only its final answer, so say exactly what to find and what to report. Several task calls in one answer run at the same time.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A few words naming the work, for the trace."},
                    "prompt": {"type": "string", "description": "The whole task: the subagent sees nothing else."}
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
        }
    }

    fn access(&self, _arguments: &serde_json::Value) -> Vec<ToolAccess> {
        Vec::new()
    }

    async fn run(
        &self,
        _arguments: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::failed(
            "`task` needs an agent session with subagents set up, and this harness has none; do the work yourself with the other tools",
        ))
    }
}
