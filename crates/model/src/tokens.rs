use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use tack_protocol::{Message, ToolSpec, Usage};
use tiktoken_rs::CoreBPE;

/// Tokens the chat format adds around each message and before the reply, as
/// in OpenAI's published counting recipe.
const PER_MESSAGE_OVERHEAD: u64 = 4;
const REPLY_PRIMING: u64 = 3;

/// Counts tokens of real requests and answers with a real tokenizer
/// (`o200k_base`), so that what a harness puts into the context shows up in
/// the token figures. Each distinct message is tokenized once: conversations
/// only grow, and re-tokenizing the whole history on every call is quadratic.
pub struct TokenCounter {
    bpe: &'static CoreBPE,
    cache: HashMap<u64, u64>,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("cached_messages", &self.cache.len())
            .finish()
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter {
            bpe: tiktoken_rs::o200k_base_singleton(),
            cache: HashMap::new(),
        }
    }
}

impl TokenCounter {
    pub fn count_text(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }

    fn count_message(&mut self, message: &Message) -> u64 {
        let mut hasher = DefaultHasher::new();
        message.role.hash(&mut hasher);
        message.content.hash(&mut hasher);
        for call in &message.tool_calls {
            call.name.hash(&mut hasher);
            call.arguments.hash(&mut hasher);
        }
        message.tool_call_id.hash(&mut hasher);
        let key = hasher.finish();
        if let Some(count) = self.cache.get(&key) {
            return *count;
        }
        let count = self.count_uncached(message);
        self.cache.insert(key, count);
        count
    }

    fn count_uncached(&self, message: &Message) -> u64 {
        let mut count = PER_MESSAGE_OVERHEAD + self.count_text(&message.content);
        for call in &message.tool_calls {
            count += self.count_text(&call.name) + self.count_text(&call.arguments);
        }
        count
    }

    /// Tokens of a request: its messages and the tools it offers.
    pub fn request_tokens(&mut self, messages: &[Message], tools: &[ToolSpec]) -> u64 {
        let mut input = REPLY_PRIMING;
        for message in messages {
            input += self.count_message(message);
        }
        for tool in tools {
            input += self.count_tool(tool);
        }
        input
    }

    /// A tool's name, description and schema, tokenized once: the same
    /// tools go with every call of a session.
    fn count_tool(&mut self, tool: &ToolSpec) -> u64 {
        let schema = tool.parameters.to_string();
        let mut hasher = DefaultHasher::new();
        // Apart from message keys: a tool is never mistaken for a message.
        "tool".hash(&mut hasher);
        tool.name.hash(&mut hasher);
        tool.description.hash(&mut hasher);
        schema.hash(&mut hasher);
        let key = hasher.finish();
        if let Some(count) = self.cache.get(&key) {
            return *count;
        }
        let count = self.count_text(&tool.name)
            + self.count_text(&tool.description)
            + self.count_text(&schema);
        self.cache.insert(key, count);
        count
    }

    /// Usage of one call: the whole request in, the answer out.
    pub fn usage(&mut self, messages: &[Message], tools: &[ToolSpec], answer: &Message) -> Usage {
        Usage {
            input_tokens: self.request_tokens(messages, tools),
            output_tokens: self.count_uncached(answer) - PER_MESSAGE_OVERHEAD,
            ..Usage::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_tokens_and_grows_with_the_context() {
        let mut counter = TokenCounter::default();
        assert_eq!(counter.count_text("hello world"), 2);
        let short = vec![Message::user("fix the bug")];
        let mut long = short.clone();
        long.push(Message::tool_result("call_1", "x ".repeat(500)));
        let answer = Message::assistant("done", vec![]);
        let a = counter.usage(&short, &[], &answer);
        let b = counter.usage(&long, &[], &answer);
        assert!(b.input_tokens > a.input_tokens + 400);
        assert_eq!(a.output_tokens, 1);
    }

    #[test]
    fn a_tool_is_counted_once_and_alike_every_time() {
        let mut counter = TokenCounter::default();
        let tool = ToolSpec {
            name: "read_file".to_string(),
            description: "Read a file".to_string(),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        };
        let whole = counter.count_text(&tool.name)
            + counter.count_text(&tool.description)
            + counter.count_text(&tool.parameters.to_string());
        let first = counter.request_tokens(&[], std::slice::from_ref(&tool));
        let again = counter.request_tokens(&[], std::slice::from_ref(&tool));
        assert_eq!(
            (first, again),
            (REPLY_PRIMING + whole, REPLY_PRIMING + whole)
        );
        // Another schema under the same name is counted anew.
        let wider = ToolSpec {
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}}}),
            ..tool
        };
        assert!(counter.request_tokens(&[], &[wider]) > first);
    }
}
