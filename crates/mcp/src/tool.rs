//! A server's tool as the harness offers it: `<server>__<tool>`, its schema,
//! and what its annotations say for the permission engine.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::Tool as ListedTool;
use tack_agent::{Tool, ToolContext, ToolError, ToolOutput};
use tack_protocol::{ToolAccess, ToolErrorKind, ToolHint, ToolSpec, mcp_tool_name};

use crate::McpServer;
use crate::content::render;

pub struct McpTool {
    server: Arc<McpServer>,
    /// The tool's own name, as its server knows it.
    remote_name: String,
    spec: ToolSpec,
    /// The schema, when the offered spec leaves it out.
    withheld: Option<serde_json::Value>,
    hint: ToolHint,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .field("hint", &self.hint)
            .finish_non_exhaustive()
    }
}

/// An object schema that takes any arguments: what a lazily loaded tool
/// is offered with.
fn any_object() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}

impl McpTool {
    pub(crate) fn new(server: Arc<McpServer>, listed: ListedTool, lazy: bool) -> McpTool {
        let schema = serde_json::Value::Object((*listed.input_schema).clone());
        let mut description = listed
            .description
            .as_deref()
            .unwrap_or_default()
            .to_string();
        if description.is_empty() {
            description = format!(
                "The `{}` tool of the `{}` MCP server.",
                listed.name,
                server.name()
            );
        }
        let (parameters, withheld) = if lazy {
            description.push_str(
                " (Its parameters are not listed here: call it with your best guess, and if they do not fit, the error shows its schema.)",
            );
            (any_object(), Some(schema))
        } else {
            (schema, None)
        };
        McpTool {
            spec: ToolSpec {
                name: mcp_tool_name(server.name(), &listed.name),
                description,
                parameters,
            },
            remote_name: listed.name.to_string(),
            hint: hint(&listed),
            server,
            withheld,
        }
    }
}

impl McpTool {
    /// The name the model sees.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    pub fn server_name(&self) -> &str {
        self.server.name()
    }
}

/// What the annotations say, with the protocol's defaults: not read-only,
/// and destructive unless it says otherwise.
fn hint(listed: &ListedTool) -> ToolHint {
    let annotations = listed.annotations.as_ref();
    let read_only = annotations.and_then(|a| a.read_only_hint).unwrap_or(false);
    let destructive = annotations.and_then(|a| a.destructive_hint).unwrap_or(true);
    match (read_only, destructive) {
        (true, _) => ToolHint::ReadOnly,
        (false, true) => ToolHint::Destructive,
        (false, false) => ToolHint::Additive,
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn access(&self, _arguments: &serde_json::Value) -> Vec<ToolAccess> {
        vec![ToolAccess::Hinted(self.hint)]
    }

    fn full_parameters(&self) -> Option<serde_json::Value> {
        self.withheld.clone()
    }

    fn server(&self) -> Option<&str> {
        Some(self.server.name())
    }

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let serde_json::Value::Object(arguments) = arguments else {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                "the arguments must be a JSON object",
            ));
        };
        let result = self.server.call(&self.remote_name, arguments).await?;
        let text = render(&result);
        if result.is_error == Some(true) {
            return Err(ToolError::failed(if text.is_empty() {
                format!("`{}` failed and said nothing more", self.spec.name)
            } else {
                text
            }));
        }
        let truncated = text.len() > ctx.output_limit;
        let text = if truncated {
            let mut end = ctx.output_limit;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].to_string()
        } else {
            text
        };
        Ok(ToolOutput::Text { text, truncated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(annotations: serde_json::Value) -> ListedTool {
        serde_json::from_value(serde_json::json!({
            "name": "t",
            "inputSchema": {"type": "object"},
            "annotations": annotations,
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn annotations_follow_the_protocol_defaults() {
        assert_eq!(
            hint(&listed(serde_json::json!({"readOnlyHint": true}))),
            ToolHint::ReadOnly
        );
        assert_eq!(hint(&listed(serde_json::json!({}))), ToolHint::Destructive);
        assert_eq!(
            hint(&listed(serde_json::json!({"destructiveHint": false}))),
            ToolHint::Additive
        );
        assert_eq!(
            hint(&listed(
                serde_json::json!({"readOnlyHint": false, "destructiveHint": true})
            )),
            ToolHint::Destructive
        );
    }
}
