use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use tack_protocol::tool_names::READ_SKILL;
use tack_protocol::{ToolAccess, ToolSpec};

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_arguments};

/// Loads a skill's instructions; the system prompt lists the skills.
#[derive(Debug)]
pub struct ReadSkillTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillArgs {
    name: String,
}

#[async_trait]
impl Tool for ReadSkillTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: READ_SKILL.to_string(),
            description: "Load the instructions of a skill listed in the system prompt, by its name, when it applies to what you are doing.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill's name, as listed."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }

    /// The harness's own instructions: nothing of the workspace is touched.
    fn access(&self, _arguments: &serde_json::Value) -> Vec<ToolAccess> {
        Vec::new()
    }

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: SkillArgs = parse_arguments(READ_SKILL, arguments)?;
        let name = args.name.trim();
        match ctx.skills.iter().find(|s| s.name == name) {
            Some(skill) => Ok(ToolOutput::Text {
                text: format!("Skill `{}`:\n\n{}", skill.name, skill.body),
                truncated: false,
            }),
            None => {
                let names: Vec<&str> = ctx.skills.iter().map(|s| s.name.as_str()).collect();
                Err(ToolError::failed(if names.is_empty() {
                    format!("there is no skill named `{name}`: this project has no skills")
                } else {
                    format!(
                        "there is no skill named `{name}`; the skills are: {}",
                        names.join(", ")
                    )
                }))
            }
        }
    }
}
