//! Turning finished calls into the events a native trial records: each
//! message the first time a request carries it, then the call's span, then
//! the answer. Calls are recorded as they end, so concurrent calls appear
//! in the order they finished.

use std::collections::HashMap;

use tack_model::ModelResponse;
use tack_protocol::{
    Event, EventSink, Message, ModelCallRecord, RunTotals, SinkError, SpanStatus, Usage,
};
use tack_providers::PriceTable;

use crate::api::Api;
use crate::forward::CallError;
use crate::request::RequestInfo;
use crate::scrub::Secrets;

/// One call, as the proxy saw it end.
#[derive(Debug)]
pub(crate) struct Call {
    pub api: Api,
    pub request: RequestInfo,
    /// Tells a retry (the same request again) from a new step.
    pub fingerprint: u64,
    pub started_at_ms: i64,
    pub duration_ms: u64,
    pub result: Result<ModelResponse, CallError>,
    /// What the upstream may echo of the request's keys: cut out of the
    /// error before it is recorded.
    pub secrets: Secrets,
}

/// The last call, when it failed: the next identical request retries it.
#[derive(Debug, Clone, Copy)]
struct Failed {
    fingerprint: u64,
    step: u32,
    attempt: u32,
    ended_at_ms: i64,
}

#[derive(Debug)]
pub(crate) struct Recording<S> {
    pub sink: S,
    prices: PriceTable,
    /// Each message recorded so far (as JSON) and its index.
    seen: HashMap<String, u32>,
    spans: u32,
    last_failed: Option<Failed>,
    pub totals: RunTotals,
    pub calls: u32,
    pub failed_calls: u32,
    /// The first event the sink could not take; later ones are still tried.
    pub sink_error: Option<SinkError>,
}

impl<S: EventSink> Recording<S> {
    pub fn new(sink: S, prices: PriceTable) -> Recording<S> {
        Recording {
            sink,
            prices,
            seen: HashMap::new(),
            spans: 0,
            last_failed: None,
            totals: RunTotals::default(),
            calls: 0,
            failed_calls: 0,
            sink_error: None,
        }
    }

    /// Records an event and counts it into the totals.
    fn emit(&mut self, event: Event) {
        self.totals.observe(&event);
        if let Err(error) = self.sink.record(event) {
            self.sink_error.get_or_insert(error);
        }
    }

    /// The message's index, recording it first if it is new.
    fn index_of(&mut self, message: &Message) -> u32 {
        let key = serde_json::to_string(message).unwrap_or_default();
        if let Some(index) = self.seen.get(&key) {
            return *index;
        }
        let index = self.seen.len() as u32;
        self.seen.insert(key, index);
        self.emit(Event::Message {
            index,
            message: message.clone(),
        });
        index
    }

    pub fn record(&mut self, call: Call) {
        let messages: Vec<u32> = call
            .request
            .messages
            .iter()
            .map(|m| self.index_of(m))
            .collect();
        let (step, attempt, retry_wait_ms) = match self.last_failed {
            Some(failed) if failed.fingerprint == call.fingerprint => (
                failed.step,
                failed.attempt + 1,
                (call.started_at_ms - failed.ended_at_ms).max(0) as u64,
            ),
            _ => (self.totals.steps + 1, 1, 0),
        };
        self.spans += 1;
        self.calls += 1;
        let requested = call.request.model.clone();
        let mut record = ModelCallRecord {
            span_id: self.spans,
            step,
            provider: call.api.provider().to_string(),
            request_model: requested.clone(),
            response_model: requested.clone(),
            started_at_ms: call.started_at_ms,
            duration_ms: call.duration_ms,
            finish_reason: None,
            usage: Usage::default(),
            cost_usd: None,
            messages,
            attempt,
            retry_wait_ms,
            rate_limit_wait_ms: 0,
            fault: None,
            purpose: None,
            parent_span_id: None,
            status: SpanStatus::Ok,
            error: None,
        };
        match call.result {
            Ok(answer) => {
                self.last_failed = None;
                record.response_model = answer.response_model.clone();
                record.finish_reason = Some(answer.finish_reason.as_str().to_string());
                record.usage = answer.usage;
                record.cost_usd = self.cost(&answer.response_model, &requested, &answer.usage);
                self.emit(Event::ModelCall(record));
                self.index_of(&answer.message);
            }
            Err(error) => {
                self.failed_calls += 1;
                self.last_failed = Some(Failed {
                    fingerprint: call.fingerprint,
                    step,
                    attempt,
                    ended_at_ms: call.started_at_ms + call.duration_ms as i64,
                });
                record.status = SpanStatus::Error;
                record.error = Some(call.secrets.scrub(&error.to_string()));
                self.emit(Event::ModelCall(record));
            }
        }
    }

    /// The answering model's price, else the requested one's (an alias
    /// such as `gpt-4o` answered by a dated snapshot the table lacks).
    fn cost(&self, answered: &str, requested: &str, usage: &Usage) -> Option<f64> {
        self.prices
            .cost(answered, usage)
            .or_else(|| self.prices.cost(requested, usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tack_protocol::{FinishReason, VecSink};

    fn call(messages: Vec<Message>, result: Result<ModelResponse, CallError>) -> Call {
        Call {
            api: Api::ChatCompletions,
            fingerprint: messages.len() as u64,
            request: RequestInfo {
                model: "gpt-4o".into(),
                messages,
            },
            started_at_ms: 1000,
            duration_ms: 10,
            result,
            secrets: Secrets::default(),
        }
    }

    fn answer(text: &str) -> ModelResponse {
        ModelResponse {
            message: Message::assistant(text, Vec::new()),
            finish_reason: FinishReason::Stop,
            usage: Usage {
                input_tokens: 1000,
                output_tokens: 10,
                ..Usage::default()
            },
            response_model: "gpt-4o-2024-08-06".into(),
        }
    }

    fn calls(sink: &VecSink) -> Vec<&ModelCallRecord> {
        let calls = sink.events.iter().filter_map(|e| match e {
            Event::ModelCall(call) => Some(call),
            _ => None,
        });
        calls.collect()
    }

    #[test]
    fn messages_are_recorded_once_and_retries_keep_their_step() {
        let table = PriceTable::builtin().clone();
        let mut recording = Recording::new(VecSink::default(), table);
        let first = vec![Message::system("s"), Message::user("u")];
        recording.record(call(first.clone(), Ok(answer("a"))));
        let mut second = first.clone();
        second.extend([Message::assistant("a", Vec::new()), Message::user("more")]);
        let boom = CallError::Status {
            status: 500,
            message: "boom".into(),
        };
        recording.record(call(second.clone(), Err(boom)));
        recording.record(call(second.clone(), Ok(answer("b"))));
        let sink = &recording.sink;
        let stored = sink
            .events
            .iter()
            .filter(|e| matches!(e, Event::Message { .. }))
            .count();
        // s, u, a (the first answer), more, b
        assert_eq!(stored, 5);
        let calls = calls(sink);
        assert_eq!(calls[0].messages, [0, 1]);
        assert_eq!(calls[1].messages, [0, 1, 2, 3]);
        assert_eq!(
            [
                calls[1].step,
                calls[1].attempt,
                calls[2].step,
                calls[2].attempt
            ],
            [2, 1, 2, 2]
        );
        assert_eq!(calls[1].status, SpanStatus::Error);
        assert!(calls[0].cost_usd.is_some_and(|c| c > 0.0));
        assert_eq!(recording.totals.steps, 2);
        assert_eq!(recording.totals.retries, 1);
        assert_eq!(recording.totals.usage.input_tokens, 2000);
        assert_eq!((recording.calls, recording.failed_calls), (3, 1));
    }
}
