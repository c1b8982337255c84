//! The simulated agent as a subagent (what its `task` calls start): it
//! lists the project, reads the files its task names, and answers with
//! what it saw, through the real read-only tools.

use async_trait::async_trait;
use serde_json::json;
use tack_protocol::{FinishReason, Message, Role};

use crate::calls::{CallWriter, offers};
use crate::tool_names::{LIST_FILES, READ_FILE};
use crate::{Model, ModelError, ModelRequest, ModelResponse};

/// Bytes of what it saw that go into its answer.
const ANSWER_LIMIT: usize = 1500;

#[derive(Debug, Default)]
pub struct SimSubagent {
    writer: CallWriter,
}

#[async_trait]
impl Model for SimSubagent {
    fn provider(&self) -> &str {
        "tack"
    }

    fn model_name(&self) -> &str {
        "sim"
    }

    async fn complete(&mut self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let messages = request.messages;
        let task = messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .unwrap_or_default();
        let seen: Vec<&Message> = messages.iter().filter(|m| m.role == Role::Tool).collect();
        let named = named_files(task);
        let (text, calls) = if seen.is_empty() && offers(request.tools, LIST_FILES) {
            let call = self.writer.call(LIST_FILES, json!({ "path": "." }));
            ("Listing the project.".to_string(), vec![call])
        } else if seen.len() <= 1 && !named.is_empty() && offers(request.tools, READ_FILE) {
            let calls = named
                .iter()
                .map(|path| self.writer.read_file(path))
                .collect();
            ("Reading the files named.".to_string(), calls)
        } else {
            (answer(&seen), vec![])
        };
        let finish = if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        let answer = Message::assistant(text, calls);
        Ok(self.writer.respond(request, answer, finish, "sim"))
    }
}

/// Words of the task that look like file paths (`src/calc.py`).
fn named_files(task: &str) -> Vec<String> {
    task.split_whitespace()
        .map(|w| w.trim_matches(|c: char| "`'\",:;()".contains(c)))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| {
            w.rsplit_once('.')
                .is_some_and(|(stem, ext)| stem.len() > 1 && (1..=4).contains(&ext.len()))
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        })
        .map(str::to_string)
        .collect()
}

/// Its report: what the tools showed, cut to fit.
fn answer(seen: &[&Message]) -> String {
    if seen.is_empty() {
        return "I had no tool to look with, so I found nothing.".to_string();
    }
    let mut text = String::from("Here is what I found.\n");
    for result in seen {
        text.push_str(result.content.trim_end());
        text.push('\n');
    }
    if text.len() > ANSWER_LIMIT {
        let mut cut = ANSWER_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[…]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_files_but_not_sentences() {
        assert_eq!(
            named_files("Read `src/calc.py` and tests/test_calc.py, then e.g. report."),
            vec!["src/calc.py", "tests/test_calc.py"]
        );
        assert!(named_files("Find the bug. Report it.").is_empty());
    }
}
