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
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            tools: ["bash", "read_file", "write_file", "str_replace"]
                .map(String::from)
                .to_vec(),
            tool_results: ResultView::Full,
            max_steps: 30,
            command_timeout_secs: 60,
            output_limit_bytes: 32 * 1024,
        }
    }
}
