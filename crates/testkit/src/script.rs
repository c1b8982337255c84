//! What a test server answers, one entry per request, in order. The same
//! entry is written as a JSON body or as server-sent events, whichever the
//! request asked for (`"stream": true`), in the wire format of the server's
//! provider.

use serde::{Deserialize, Serialize};

/// One answer, or one fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ScriptedResponse {
    /// A model answer: text, tool calls, usage, finish reason.
    Reply(Reply),
    /// An HTTP error in the provider's error shape (429, 500, 502, 503,
    /// 529, 400, …), with `Retry-After` (seconds or an HTTP-date, sent as
    /// written) and `retry-after-ms` when given.
    Status {
        status: u16,
        #[serde(default)]
        retry_after: Option<String>,
        #[serde(default)]
        retry_after_ms: Option<u64>,
        #[serde(default)]
        message: Option<String>,
    },
    /// Waits, then answers `then`.
    Delay {
        delay_ms: u64,
        then: Box<ScriptedResponse>,
    },
    /// Answers `then`, pausing `pause_ms` between two events of a stream
    /// (a slow model), so a client can be seen to get the first events
    /// before the last is sent. No effect on a JSON body.
    Paced {
        pause_ms: u64,
        then: Box<ScriptedResponse>,
    },
    /// 200 with a body (or an event) that is not valid JSON.
    MalformedJson,
    /// Starts a normal answer and closes the connection part-way: after
    /// `after_events` events of a stream, or half-way through a JSON body.
    CutStream { after_events: usize },
    /// Resets the connection (TCP RST) instead of answering.
    Reset,
}

/// A model's answer. `finish` defaults to `stop`, or `tool_calls` when
/// there are calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reply {
    pub text: String,
    pub tool_calls: Vec<ScriptedCall>,
    pub usage: ScriptedUsage,
    pub finish: Finish,
    /// The model the answer names; default: the requested model.
    pub model: Option<String>,
}

/// A tool call. `arguments` is sent exactly as written, so it can be
/// broken JSON on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ScriptedCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ScriptedCall {
        ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// Token usage as tack records it (the OpenTelemetry conventions):
/// `input` includes `cached` and `cache_write`; `reasoning` is part of
/// `output`. Each server writes it the way its provider does — Anthropic's
/// `input_tokens`, for one, leaves the cached tokens out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScriptedUsage {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// `stop` (`end_turn`), or `tool_calls` (`tool_use`) when there are calls.
    #[default]
    Natural,
    /// The output limit: `length` (`max_tokens`).
    Length,
    /// `content_filter` (`refusal`).
    ContentFilter,
}

impl ScriptedResponse {
    pub fn text(text: impl Into<String>) -> ScriptedResponse {
        ScriptedResponse::Reply(Reply {
            text: text.into(),
            ..Reply::default()
        })
    }

    pub fn tool_calls(calls: Vec<ScriptedCall>) -> ScriptedResponse {
        ScriptedResponse::Reply(Reply {
            tool_calls: calls,
            ..Reply::default()
        })
    }

    pub fn status(status: u16) -> ScriptedResponse {
        ScriptedResponse::Status {
            status,
            retry_after: None,
            retry_after_ms: None,
            message: None,
        }
    }

    /// 429 with `Retry-After: <seconds>`.
    pub fn rate_limited(retry_after_secs: u64) -> ScriptedResponse {
        ScriptedResponse::Status {
            status: 429,
            retry_after: Some(retry_after_secs.to_string()),
            retry_after_ms: None,
            message: None,
        }
    }

    pub fn delayed(delay_ms: u64, then: ScriptedResponse) -> ScriptedResponse {
        ScriptedResponse::Delay {
            delay_ms,
            then: Box::new(then),
        }
    }

    pub fn paced(pause_ms: u64, then: ScriptedResponse) -> ScriptedResponse {
        ScriptedResponse::Paced {
            pause_ms,
            then: Box::new(then),
        }
    }

    /// With `usage` (a reply; other entries are returned unchanged).
    pub fn with_usage(mut self, usage: ScriptedUsage) -> ScriptedResponse {
        if let ScriptedResponse::Reply(reply) = &mut self {
            reply.usage = usage;
        }
        self
    }

    /// Finished by the output limit (a reply; others unchanged).
    pub fn finished_by_length(mut self) -> ScriptedResponse {
        if let ScriptedResponse::Reply(reply) = &mut self {
            reply.finish = Finish::Length;
        }
        self
    }

    /// With `text` before the calls (a reply; others unchanged).
    pub fn with_text(mut self, text: impl Into<String>) -> ScriptedResponse {
        if let ScriptedResponse::Reply(reply) = &mut self {
            reply.text = text.into();
        }
        self
    }
}

/// Splits `text` into pieces of about `size` characters, as a stream sends
/// it; never splits a character.
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|chunk| chunk.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_reads_from_json() {
        let json = r#"[
            {"type": "status", "status": 429, "retry_after": "2"},
            {"type": "reply", "text": "hi", "usage": {"input": 10, "output": 2}},
            {"type": "reply", "tool_calls": [{"id": "c1", "name": "bash", "arguments": "{"}],
             "finish": "length"},
            {"type": "delay", "delay_ms": 5, "then": {"type": "reset"}},
            {"type": "cut_stream", "after_events": 3},
            {"type": "malformed_json"}
        ]"#;
        let script: Vec<ScriptedResponse> = serde_json::from_str(json).unwrap();
        assert_eq!(script[0], ScriptedResponse::rate_limited(2));
        assert_eq!(
            script[1],
            ScriptedResponse::text("hi").with_usage(ScriptedUsage {
                input: 10,
                output: 2,
                ..ScriptedUsage::default()
            })
        );
        assert_eq!(
            script[2],
            ScriptedResponse::tool_calls(vec![ScriptedCall::new("c1", "bash", "{")])
                .finished_by_length()
        );
        assert_eq!(
            script[3],
            ScriptedResponse::delayed(5, ScriptedResponse::Reset)
        );
    }

    #[test]
    fn pieces_cover_the_text_without_splitting_characters() {
        assert_eq!(pieces("héllo!", 4), ["héll", "o!"]);
        assert!(pieces("", 4).is_empty());
    }
}
