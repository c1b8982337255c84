//! What the model is sent: the conversation as the variant's context
//! strategy leaves it. The history (every message, each recorded once, by
//! position) only grows; the context is the list of history positions the
//! next call carries. Dropping a stale tool result or compacting the older
//! history records a new message (the stub, the summary) and changes the
//! list, so the trace shows exactly what each call was sent.

use tack_protocol::{ContextConfig, Message, Role};

/// One message of the context: where it is in the history, and the step
/// whose model call or tool call produced it (0 before the first call).
#[derive(Debug, Clone, Copy)]
struct Entry {
    index: u32,
    step: u32,
    /// A stub or a summary: never stripped again.
    replaced: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Context {
    /// The messages of the next request, in order.
    messages: Vec<Message>,
    entries: Vec<Entry>,
    /// The history position the next recorded message takes.
    recorded: u32,
}

/// A change the strategy made: the message to record, and where it goes.
pub(crate) struct Replacement {
    pub message: Message,
    pub index: u32,
}

impl Context {
    /// A context carrying on a recorded conversation: every message, by
    /// history position, as of `step`; the next recorded message takes
    /// `next_index`.
    pub fn restored(
        messages: std::collections::BTreeMap<u32, Message>,
        step: u32,
        next_index: u32,
    ) -> Context {
        let entries = messages
            .keys()
            .map(|&index| Entry {
                index,
                step,
                replaced: false,
            })
            .collect();
        Context {
            messages: messages.into_values().collect(),
            entries,
            recorded: next_index,
        }
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The history positions of the messages the next call carries.
    pub fn sent(&self) -> Vec<u32> {
        self.entries.iter().map(|e| e.index).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds a message to the history and the context; returns its
    /// position, and the message to record.
    pub fn push(&mut self, message: Message, step: u32) -> (u32, &Message) {
        let index = self.next_index();
        self.entries.push(Entry {
            index,
            step,
            replaced: false,
        });
        self.messages.push(message);
        (index, &self.messages[self.messages.len() - 1])
    }

    /// A position for a message that is recorded but not part of the
    /// context (the instruction of a compaction call).
    pub fn record_only(&mut self) -> u32 {
        self.next_index()
    }

    fn next_index(&mut self) -> u32 {
        let index = self.recorded;
        self.recorded += 1;
        index
    }

    /// Replaces, in the context, each tool result produced more than
    /// `after` steps before `step` by a stub; returns the stubs to record.
    pub fn strip_results(&mut self, after: u32, step: u32) -> Vec<Replacement> {
        let mut stubs = Vec::new();
        for at in 0..self.entries.len() {
            let entry = self.entries[at];
            let message = &self.messages[at];
            if entry.replaced || message.role != Role::Tool || entry.step + after >= step {
                continue;
            }
            let stub = Message {
                role: Role::Tool,
                content: format!(
                    "[tool result from step {} dropped by the harness to save context: {} bytes, {} lines; run the call again if you need it]",
                    entry.step,
                    message.content.len(),
                    message.content.lines().count()
                ),
                tool_calls: Vec::new(),
                tool_call_id: message.tool_call_id.clone(),
            };
            let index = self.next_index();
            self.entries[at] = Entry {
                index,
                step: entry.step,
                replaced: true,
            };
            self.messages[at] = stub.clone();
            stubs.push(Replacement {
                message: stub,
                index,
            });
        }
        stubs
    }

    /// Where a compaction may cut: the older history `[head, cut)` is
    /// summarised, where `head` is past what came before the first step
    /// (the system prompt, project instructions, the task) and
    /// `cut` keeps the last `keep_steps` steps. `None` when there is
    /// nothing older to summarise. A cut never falls between an assistant
    /// message and the tool results answering it.
    pub fn compaction_span(&self, keep_steps: u32, step: u32) -> Option<(usize, usize)> {
        let head = self.entries.iter().take_while(|e| e.step == 0).count();
        let first_kept_step = step.saturating_sub(keep_steps);
        let mut cut = self
            .entries
            .iter()
            .position(|e| e.step >= first_kept_step && e.step > 0)
            .unwrap_or(self.entries.len());
        // Tool results belong with the call that asked for them.
        while cut > head && self.messages.get(cut).is_some_and(|m| m.role == Role::Tool) {
            cut -= 1;
        }
        (cut > head + 1).then_some((head, cut))
    }

    /// Puts `summary` in place of the messages `[from, to)`; returns its
    /// history position, and the message to record.
    pub fn replace_with_summary(
        &mut self,
        (from, to): (usize, usize),
        summary: Message,
    ) -> (u32, &Message) {
        let step = self.entries[to.saturating_sub(1)].step;
        let index = self.next_index();
        self.messages.splice(from..to, [summary]);
        self.entries.splice(
            from..to,
            [Entry {
                index,
                step,
                replaced: true,
            }],
        );
        (index, &self.messages[from])
    }
}

/// The message that stands for the compacted history in the context.
pub(crate) fn summary_message(summary: &str, steps: u32) -> Message {
    Message::user(format!(
        "{} ({steps} steps) into this summary.]\n{summary}",
        tack_protocol::COMPACTION_SUMMARY_START
    ))
}

/// Whether the context has grown past the point `config` compacts at.
pub(crate) fn over_threshold(config: &ContextConfig, tokens: u64) -> bool {
    match (config.compact_at, config.context_window) {
        (Some(at), Some(window)) => tokens as f64 >= at * window as f64,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tack_protocol::ToolCall;

    fn step(context: &mut Context, step: u32) {
        let call = ToolCall {
            id: format!("call_{step}"),
            name: "bash".to_string(),
            arguments: "{}".to_string(),
        };
        context.push(Message::assistant("", vec![call]), step);
        context.push(
            Message::tool_result(format!("call_{step}"), "out\n".repeat(10)),
            step,
        );
    }

    fn conversation(steps: u32) -> Context {
        let mut context = Context::default();
        context.push(Message::system("be brief"), 0);
        context.push(Message::user("fix it"), 0);
        for n in 1..=steps {
            step(&mut context, n);
        }
        context
    }

    #[test]
    fn stale_results_become_stubs_once_and_get_new_positions() {
        let mut context = conversation(4);
        let stubs = context.strip_results(2, 5);
        // Results of steps 1 and 2 are more than two steps old at step 5.
        assert_eq!(stubs.len(), 2);
        assert_eq!(stubs[0].index, 10);
        assert!(stubs[0].message.content.contains("step 1 dropped"));
        assert!(stubs[0].message.content.contains("40 bytes, 10 lines"));
        assert_eq!(stubs[0].message.tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(context.sent(), [0, 1, 2, 10, 4, 11, 6, 7, 8, 9]);
        // Already stripped: nothing new the next time round.
        assert!(context.strip_results(2, 5).is_empty());
    }

    #[test]
    fn compaction_keeps_the_head_and_the_last_steps_whole() {
        let mut context = conversation(6);
        let span = context.compaction_span(2, 7).unwrap();
        // System and task stay; steps 1–4 go; steps 5 and 6 stay.
        assert_eq!(span, (2, 10));
        let (index, _) = context.replace_with_summary(span, summary_message("did 4 things", 4));
        assert_eq!(index, 14);
        assert_eq!(context.sent(), [0, 1, 14, 10, 11, 12, 13]);
        assert!(context.messages()[2].content.contains("did 4 things"));
        // The summary is not summarised alone again.
        assert_eq!(context.compaction_span(2, 7), None);
    }

    #[test]
    fn a_cut_never_separates_a_call_from_its_result() {
        let mut context = conversation(3);
        // A call whose result was recorded under the next step.
        let call = ToolCall {
            id: "x".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        };
        context.push(Message::assistant("", vec![call]), 3);
        context.push(Message::tool_result("x", "late"), 4);
        let (_, cut) = context.compaction_span(1, 5).unwrap();
        assert_eq!(cut, 8);
        assert_eq!(context.messages()[cut].role, Role::Assistant);
    }

    #[test]
    fn the_threshold_is_a_fraction_of_the_window() {
        let config = ContextConfig {
            context_window: Some(1000),
            compact_at: Some(0.8),
            ..ContextConfig::default()
        };
        assert!(!over_threshold(&config, 799));
        assert!(over_threshold(&config, 800));
        assert!(!over_threshold(&ContextConfig::default(), u64::MAX));
    }
}
