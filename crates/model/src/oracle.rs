use async_trait::async_trait;
use tack_protocol::{FinishReason, Message};

use crate::calls::{CallWriter, offers};
use crate::tool_names::{BASH, STR_REPLACE};
use crate::{Model, ModelError, ModelRequest, ModelResponse, TaskBrief};

/// Applies the task's reference solution through the harness's own tools in
/// one turn, then says it is done. A suite whose oracle does not score 100%
/// has a broken task or a broken harness.
#[derive(Debug)]
pub struct OracleModel {
    brief: TaskBrief,
    writer: CallWriter,
    applied: bool,
}

impl OracleModel {
    pub fn new(brief: TaskBrief) -> Self {
        OracleModel {
            brief,
            writer: CallWriter::default(),
            applied: false,
        }
    }
}

#[async_trait]
impl Model for OracleModel {
    fn provider(&self) -> &str {
        "tack"
    }

    fn model_name(&self) -> &str {
        "oracle"
    }

    async fn complete(&mut self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if self.applied {
            let done = Message::assistant("Applied the reference solution.", vec![]);
            return Ok(self
                .writer
                .respond(request, done, FinishReason::Stop, "oracle"));
        }
        self.applied = true;
        let solution = &self.brief.solution;
        let missing: Vec<&str> = [
            (!solution.edits.is_empty() && !offers(request.tools, STR_REPLACE))
                .then_some(STR_REPLACE),
            (solution.script.is_some() && !offers(request.tools, BASH)).then_some(BASH),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !missing.is_empty() {
            let text = format!(
                "I cannot apply the reference solution: the harness does not offer {}.",
                missing.join(", ")
            );
            let answer = Message::assistant(text, vec![]);
            return Ok(self
                .writer
                .respond(request, answer, FinishReason::Stop, "oracle"));
        }
        let mut calls: Vec<_> = solution
            .edits
            .iter()
            .map(|edit| self.writer.str_replace(&edit.path, &edit.old, &edit.new))
            .collect();
        if let Some(script) = &solution.script {
            calls.push(self.writer.bash(script));
        }
        let answer = Message::assistant("Applying the reference solution.", calls);
        Ok(self
            .writer
            .respond(request, answer, FinishReason::ToolCalls, "oracle"))
    }
}
