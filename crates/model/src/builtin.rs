use tack_protocol::Solution;

use crate::{Model, OracleModel, SimAgent, SimParams};

/// What a built-in model knows about the task it works on. Real models get
/// only the instruction; the built-in ones also get the reference solution
/// (the oracle applies it, the simulated agent finds it with some skill).
#[derive(Debug, Clone, Default)]
pub struct TaskBrief {
    pub instruction: String,
    pub solution: Solution,
    /// The visible test command the agent may run, if the task has one.
    pub test_command: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BuiltinModelError {
    #[error(
        "unknown model `{0}`: the built-in models are `oracle` and `sim` (provider models such as `openai:<model>` are not available in this build)"
    )]
    Unknown(String),
}

pub fn is_builtin_model(id: &str) -> bool {
    matches!(unwrap_chaos(id).1, "oracle" | "sim")
}

/// `chaos(inner)` → `(true, "inner")`; anything else → `(false, id)`.
pub fn unwrap_chaos(id: &str) -> (bool, &str) {
    match id
        .strip_prefix("chaos(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(inner) => (true, inner.trim()),
        None => (false, id),
    }
}

/// Builds a built-in model for one trial.
pub fn builtin_model(
    id: &str,
    brief: TaskBrief,
    params: SimParams,
    seed: u64,
) -> Result<Box<dyn Model>, BuiltinModelError> {
    match id {
        "oracle" => Ok(Box::new(OracleModel::new(brief))),
        "sim" => Ok(Box::new(SimAgent::new(brief, params, seed))),
        other => Err(BuiltinModelError::Unknown(other.to_string())),
    }
}
