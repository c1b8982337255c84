//! Which API a request is for, from its path, and how that API's answers
//! are read: whole, or event by event as a stream passes through.

use tack_model::{ModelError, ModelResponse};
use tack_providers::sse::SseParser;
use tack_providers::wire::{ChatCompletionsReader, Flow, MessagesReader, Wire};

use crate::responses::ResponsesReader;

/// An API whose calls are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions: `POST …/chat/completions`.
    ChatCompletions,
    /// OpenAI Responses: `POST …/responses`.
    Responses,
    /// Anthropic Messages: `POST …/messages`.
    Messages,
}

impl Api {
    /// The API a `POST` to `path` is for. Only the last segment counts, so
    /// `/v1/chat/completions`, `/chat/completions` and a gateway's
    /// `/openai/v1/chat/completions` all are Chat Completions. Sub-resources
    /// (`/v1/responses/{id}`, `/v1/messages/count_tokens`) are not calls.
    pub fn of_path(path: &str) -> Option<Api> {
        let path = path.trim_end_matches('/');
        if path.ends_with("/chat/completions") {
            Some(Api::ChatCompletions)
        } else if path.ends_with("/responses") {
            Some(Api::Responses)
        } else if path.ends_with("/messages") {
            Some(Api::Messages)
        } else {
            None
        }
    }

    /// The provider name recorded on the call's span.
    pub fn provider(self) -> &'static str {
        match self {
            Api::ChatCompletions | Api::Responses => "openai",
            Api::Messages => "anthropic",
        }
    }

    /// Reads a whole (non-streamed) answer.
    pub fn parse(self, body: &[u8], requested: &str) -> Result<ModelResponse, ModelError> {
        match self {
            Api::ChatCompletions => ChatCompletionsReader::parse(body, requested),
            Api::Responses => ResponsesReader::parse(body, requested),
            Api::Messages => MessagesReader::parse(body, requested),
        }
    }
}

/// Reads a stream's events as its bytes pass by. The bytes themselves are
/// not kept: only what the readers assemble (text, calls, usage).
#[derive(Debug)]
pub struct Tap {
    parser: SseParser,
    reader: Reader,
    done: bool,
    /// The first thing that went wrong; later events are not read.
    failed: Option<ModelError>,
}

#[derive(Debug)]
enum Reader {
    Chat(ChatCompletionsReader),
    Responses(ResponsesReader),
    Messages(MessagesReader),
}

impl Tap {
    pub fn new(api: Api) -> Tap {
        let reader = match api {
            Api::ChatCompletions => Reader::Chat(ChatCompletionsReader::default()),
            Api::Responses => Reader::Responses(ResponsesReader::default()),
            Api::Messages => Reader::Messages(MessagesReader::default()),
        };
        Tap {
            parser: SseParser::new(),
            reader,
            done: false,
            failed: None,
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        for event in self.parser.feed(chunk) {
            if self.done || self.failed.is_some() {
                return;
            }
            let flow = match &mut self.reader {
                Reader::Chat(reader) => reader.apply(&event),
                Reader::Responses(reader) => reader.apply(&event),
                Reader::Messages(reader) => reader.apply(&event),
            };
            match flow {
                Ok(Flow::Done) => self.done = true,
                Ok(Flow::Continue) => {}
                Err(error) => self.failed = Some(error),
            }
        }
    }

    /// The answer, once the stream has ended (or been cut: the readers
    /// then say what was missing).
    pub fn finish(self, requested: &str) -> Result<ModelResponse, ModelError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        match self.reader {
            Reader::Chat(reader) => reader.finish(self.done, requested),
            Reader::Responses(reader) => reader.finish(self.done, requested),
            Reader::Messages(reader) => reader.finish(self.done, requested),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_recognised_with_or_without_a_prefix() {
        assert_eq!(
            Api::of_path("/v1/chat/completions"),
            Some(Api::ChatCompletions)
        );
        assert_eq!(
            Api::of_path("/chat/completions"),
            Some(Api::ChatCompletions)
        );
        assert_eq!(Api::of_path("/v1/responses"), Some(Api::Responses));
        assert_eq!(Api::of_path("/responses/"), Some(Api::Responses));
        assert_eq!(Api::of_path("/v1/messages"), Some(Api::Messages));
        assert_eq!(Api::of_path("/messages"), Some(Api::Messages));
        assert_eq!(Api::of_path("/v1/models"), None);
        assert_eq!(Api::of_path("/v1/messages/count_tokens"), None);
        assert_eq!(Api::of_path("/v1/responses/resp_1"), None);
    }

    #[test]
    fn a_stream_split_anywhere_gives_the_same_answer() {
        let stream = concat!(
            "data: {\"model\":\"gpt-x\",\"choices\":[{\"delta\":{\"content\":\"hel\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n"
        );
        for cut in [1, 7, 60, stream.len() - 3] {
            let mut tap = Tap::new(Api::ChatCompletions);
            tap.feed(&stream.as_bytes()[..cut]);
            tap.feed(&stream.as_bytes()[cut..]);
            let answer = tap.finish("asked").unwrap();
            assert_eq!(answer.message.content, "hello");
            assert_eq!(answer.response_model, "gpt-x");
            assert_eq!(answer.usage.input_tokens, 9);
            assert_eq!(answer.usage.output_tokens, 2);
        }
        let mut cut = Tap::new(Api::ChatCompletions);
        cut.feed(&stream.as_bytes()[..60]);
        assert!(cut.finish("asked").is_err());
    }
}
