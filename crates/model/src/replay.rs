//! `replay`: answers with a recorded trial's model responses, in order, so a
//! failed trace's tool side can be re-run deterministically.

use async_trait::async_trait;
use tack_protocol::{FinishReason, Message, Usage};

use crate::{Model, ModelError, ModelRequest, ModelResponse};

#[derive(Debug)]
pub struct ReplayModel {
    responses: std::vec::IntoIter<(Message, FinishReason, Usage)>,
    recorded_model: String,
}

impl ReplayModel {
    /// `responses`: the assistant messages of the recorded trial with the
    /// finish reason and usage of the call that produced each.
    pub fn new(
        recorded_model: &str,
        responses: Vec<(Message, FinishReason, Usage)>,
    ) -> ReplayModel {
        ReplayModel {
            responses: responses.into_iter(),
            recorded_model: recorded_model.to_string(),
        }
    }
}

#[async_trait]
impl Model for ReplayModel {
    fn provider(&self) -> &str {
        "replay"
    }

    fn model_name(&self) -> &str {
        &self.recorded_model
    }

    async fn complete(&mut self, _: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        match self.responses.next() {
            Some((message, finish_reason, usage)) => Ok(ModelResponse {
                message,
                finish_reason,
                usage,
                response_model: self.recorded_model.clone(),
            }),
            None => Err(ModelError::InvalidResponse(
                "the recorded trial has no more model responses: the replay diverged from the original".to_string(),
            )),
        }
    }
}
