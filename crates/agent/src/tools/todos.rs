//! `write_todos`: the agent's plan as a checklist it rewrites as it goes.
//! The tool keeps nothing: each call carries the whole list, so the list
//! is in the trace (the call's arguments) and in the conversation (its
//! result), and a compacted or resumed session still has the latest one.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use tack_protocol::tool_names::WRITE_TODOS;
use tack_protocol::{ToolAccess, ToolSpec};

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_arguments};

#[derive(Debug)]
pub struct WriteTodosTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TodosArgs {
    todos: Vec<Todo>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Todo {
    content: String,
    status: Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Pending,
    InProgress,
    Completed,
}

impl Status {
    fn mark(self) -> &'static str {
        match self {
            Status::Pending => "[ ]",
            Status::InProgress => "[~]",
            Status::Completed => "[x]",
        }
    }
}

#[async_trait]
impl Tool for WriteTodosTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: WRITE_TODOS.to_string(),
            description: "Write your plan as a checklist, replacing the previous one. Give every item with its status; keep one item in_progress at a time and update the list as you finish items.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1, "description": "What to do, in a few words."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
        }
    }

    /// The list lives in the conversation: nothing on the machine is read,
    /// written or run.
    fn access(&self, _arguments: &serde_json::Value) -> Vec<ToolAccess> {
        Vec::new()
    }

    async fn run(
        &self,
        arguments: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: TodosArgs = parse_arguments(WRITE_TODOS, arguments)?;
        Ok(ToolOutput::Text {
            text: render(&args.todos),
            truncated: false,
        })
    }
}

/// The list as the model reads it back: a count by status, then the items.
fn render(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "Todo list cleared.".to_string();
    }
    let count = |status| todos.iter().filter(|t| t.status == status).count();
    let mut text = format!(
        "Todo list updated: {} completed, {} in progress, {} pending.\n",
        count(Status::Completed),
        count(Status::InProgress),
        count(Status::Pending)
    );
    for todo in todos {
        text.push_str(&format!("{} {}\n", todo.status.mark(), todo.content.trim()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_list_with_a_count_by_status() {
        let args: TodosArgs = serde_json::from_value(json!({"todos": [
            {"content": "read the failing test", "status": "completed"},
            {"content": "fix the parser", "status": "in_progress"},
            {"content": "run the tests", "status": "pending"},
        ]}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            render(&args.todos),
            "Todo list updated: 1 completed, 1 in progress, 1 pending.\n\
             [x] read the failing test\n[~] fix the parser\n[ ] run the tests\n"
        );
        assert_eq!(render(&[]), "Todo list cleared.");
    }
}
