use tack_protocol::{
    Event, EventSink, Message, ModelCallRecord, SinkError, StopReason, ToolCallRecord,
};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Sends the loop's events to the sink and hands out span ids. A sink that
/// fails stops the trial as a harness error: events are never dropped quietly.
pub(crate) struct Recorder<'s> {
    sink: &'s mut dyn EventSink,
    spans: u32,
    failure: Option<String>,
}

impl<'s> Recorder<'s> {
    pub(crate) fn new(sink: &'s mut dyn EventSink) -> Self {
        Recorder {
            sink,
            spans: 0,
            failure: None,
        }
    }

    /// Span ids go on after `last` (a restored session's).
    pub(crate) fn continue_after(&mut self, last: u32) {
        self.spans = self.spans.max(last);
    }

    /// Allocates the next span id.
    pub(crate) fn next_span_id(&mut self) -> u32 {
        self.spans += 1;
        self.spans
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.clone()
    }

    pub(crate) fn message(&mut self, index: u32, message: &Message) -> Result<(), StopReason> {
        self.record(Event::Message {
            index,
            message: message.clone(),
        })
    }

    pub(crate) fn model_call(&mut self, record: ModelCallRecord) -> Result<(), StopReason> {
        self.record(Event::ModelCall(record))
    }

    pub(crate) fn tool_call(&mut self, record: ToolCallRecord) -> Result<(), StopReason> {
        self.record(Event::ToolCall(record))
    }

    pub(crate) fn record(&mut self, event: Event) -> Result<(), StopReason> {
        self.record_raw(event).map_err(|_| StopReason::HarnessError)
    }

    pub(crate) fn record_raw(&mut self, event: Event) -> Result<(), SinkError> {
        self.sink.record(event).inspect_err(|error| {
            self.failure = Some(error.to_string());
        })
    }
}
