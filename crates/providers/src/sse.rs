//! A small server-sent events parser (the WHATWG event-stream format): bytes
//! in, whole events out. Chunks may split anywhere — inside a line, inside a
//! UTF-8 character, between `\r` and `\n` — so only complete lines are
//! decoded.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The last byte was `\r`, so a `\n` right after it ends nothing.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds a chunk; returns the events it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.take_line(&line) {
                        events.push(event);
                    }
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    /// Whether the stream stopped inside an event: bytes of a line, or
    /// fields not yet dispatched by a blank line.
    pub fn has_partial_event(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    fn take_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return None; // a comment, e.g. a keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields change nothing here
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        let event = if event.is_empty() {
            "message".to_string()
        } else {
            event
        };
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            event: name.to_string(),
            data: data.to_string(),
        }
    }

    #[test]
    fn parses_events_with_names_multiline_data_and_comments() {
        let mut parser = SseParser::new();
        let text =
            ": keep-alive\n\nevent: ping\ndata: {}\n\ndata: a\ndata:b\nid: 7\n\nevent: x\n\n";
        assert_eq!(
            parser.feed(text.as_bytes()),
            [event("ping", "{}"), event("message", "a\nb")]
        );
        assert!(!parser.has_partial_event());
    }

    #[test]
    fn any_split_of_the_bytes_gives_the_same_events() {
        let text = "event: é\r\ndata: ünï\r\n\r\ndata: [DONE]\r\r";
        let whole = SseParser::new().feed(text.as_bytes());
        assert_eq!(whole, [event("é", "ünï"), event("message", "[DONE]")]);
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut parser = SseParser::new();
            let mut events = parser.feed(&bytes[..cut]);
            events.extend(parser.feed(&bytes[cut..]));
            assert_eq!(events, whole, "split at {cut}");
        }
        let mut parser = SseParser::new();
        let events: Vec<_> = bytes.iter().flat_map(|b| parser.feed(&[*b])).collect();
        assert_eq!(events, whole);
    }

    #[test]
    fn an_unfinished_event_is_reported_as_partial() {
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: {\"a\":").is_empty());
        assert!(parser.has_partial_event());
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: {}\n").is_empty());
        assert!(parser.has_partial_event());
    }
}
