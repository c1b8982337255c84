//! A seeded simulated agent. It works like a careful junior engineer through
//! the harness's real tools on the real files: looks around, reads the files
//! the fix touches, runs the visible tests, makes an edit — the right one with
//! probability `skill`, otherwise one of the task's plausible wrong fixes, or
//! none for a task that names none —,
//! runs the tests again and reads what it is shown. When the result it sees
//! shows a failure it reverts and tries again; when the harness hides the
//! failure (stdout only, no exit code) it believes it is done. Now and then it
//! writes a malformed tool call and repairs it after reading the error.
//!
//! Same seed, same trajectory (given the same tool results).

use async_trait::async_trait;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use serde_json::json;
use tack_protocol::{COMPACTION_PROMPT, Edit, FinishReason, Message, Role, ToolCall};

use crate::calls::{CallWriter, latest_results, offers};
use crate::tool_names::{BASH, READ_FILE, READ_SKILL, STR_REPLACE, TASK};
use crate::{Model, ModelError, ModelRequest, ModelResponse, SimSubagent, TaskBrief};
use tack_protocol::SimParams;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Explore,
    Read,
    Baseline,
    Fix,
    Verify,
    Judge,
    Done,
}

/// Ways a simulated tool call goes wrong, mirroring what real models do.
#[derive(Debug, Clone, Copy)]
enum Malformation {
    BrokenJson,
    UnknownTool,
    WrongType,
    MissingField,
    CutOff,
}

const MALFORMATIONS: [Malformation; 5] = [
    Malformation::BrokenJson,
    Malformation::UnknownTool,
    Malformation::WrongType,
    Malformation::MissingField,
    Malformation::CutOff,
];

#[derive(Debug)]
pub struct SimAgent {
    brief: TaskBrief,
    params: SimParams,
    rng: ChaCha8Rng,
    writer: CallWriter,
    phase: Phase,
    attempts: u32,
    /// The wrong fix currently in the files, to revert before the next try.
    applied_decoy: Option<Edit>,
    /// Calls it meant to make when it wrote a malformed one instead.
    intended: Option<Vec<ToolCall>>,
    /// Whether the harness offers `task`: it then hands its first look
    /// around to two subagents.
    can_delegate: bool,
    /// A skill the system prompt lists, to read before anything else.
    skill_to_read: Option<String>,
}

impl SimAgent {
    pub fn new(brief: TaskBrief, params: SimParams, seed: u64) -> Self {
        SimAgent {
            brief,
            params,
            rng: ChaCha8Rng::seed_from_u64(seed),
            writer: CallWriter::default(),
            phase: Phase::Explore,
            attempts: 0,
            applied_decoy: None,
            intended: None,
            can_delegate: false,
            skill_to_read: None,
        }
    }

    /// Its summary of the session so far, for a compaction.
    fn summary(&self) -> String {
        format!(
            "Task: {}. Done so far: {:?} phase reached, {} fix attempt(s), {} tool call(s) made. \
             Next: carry on from the {:?} phase.",
            self.brief.instruction.lines().next().unwrap_or_default(),
            self.phase,
            self.attempts,
            self.writer.issued(),
            self.phase
        )
    }

    /// The next turn: some text and the tool calls it wants, or none when done.
    fn next_turn(&mut self, messages: &[Message]) -> (String, Vec<ToolCall>) {
        if let Some(intended) = self.intended.take() {
            // The last call was malformed; the error says so. Write it properly.
            return (
                "Sorry, that call was malformed. Retrying.".to_string(),
                intended,
            );
        }
        if self.phase == Phase::Done && feedback_shows_failure(messages) {
            // The harness sent the failing checks back: another round.
            if self.attempts >= self.params.max_attempts {
                return (
                    "The checks still fail and I have no other fix.".to_string(),
                    vec![],
                );
            }
            self.phase = self.after_fix();
            let (_, calls) = self.attempt_fix();
            return (
                "The checks failed; trying a different fix.".to_string(),
                calls,
            );
        }
        loop {
            match self.phase {
                Phase::Explore => {
                    if let Some(name) = self.skill_to_read.take() {
                        let call = self.writer.call(READ_SKILL, json!({ "name": name }));
                        return (
                            "A skill applies here; reading it first.".to_string(),
                            vec![call],
                        );
                    }
                    self.phase = Phase::Read;
                    if self.can_delegate {
                        return self.delegate();
                    }
                    let mut calls = vec![self.writer.bash("find . -type f | sort")];
                    if self.rng.random_bool(0.5) {
                        calls.push(
                            self.writer
                                .bash("grep -rn -i 'def \\|function\\|^[a-z_]*()' . | head -n 40"),
                        );
                    }
                    return ("Let me look at the project first.".to_string(), calls);
                }
                Phase::Read => {
                    self.phase = if self.brief.test_command.is_some() {
                        Phase::Baseline
                    } else {
                        Phase::Fix
                    };
                    let calls: Vec<_> = self
                        .files_of_interest()
                        .iter()
                        .map(|path| self.writer.read_file(path))
                        .collect();
                    if !calls.is_empty() {
                        return ("Reading the relevant code.".to_string(), calls);
                    }
                }
                Phase::Baseline => {
                    self.phase = Phase::Fix;
                    return self.run_tests("Running the tests to see the failure.");
                }
                Phase::Fix => {
                    self.phase = self.after_fix();
                    return self.attempt_fix();
                }
                Phase::Verify => {
                    self.phase = Phase::Judge;
                    return self.run_tests("Checking the fix.");
                }
                Phase::Judge => {
                    if !sees_failure(messages) {
                        self.phase = Phase::Done;
                        continue;
                    }
                    if self.attempts >= self.params.max_attempts {
                        return (
                            "The tests still fail and I am out of ideas; stopping.".to_string(),
                            vec![],
                        );
                    }
                    self.phase = Phase::Verify;
                    let (_, calls) = self.attempt_fix();
                    return (
                        "The tests still fail. Trying a different fix.".to_string(),
                        calls,
                    );
                }
                Phase::Done => {
                    return ("I fixed the bug; the tests pass.".to_string(), vec![]);
                }
            }
        }
    }

    /// Two subagents look around at once: one surveys the project, one
    /// reads the files the fix will touch.
    fn delegate(&mut self) -> (String, Vec<ToolCall>) {
        let task = self.brief.instruction.lines().next().unwrap_or_default();
        let mut calls = vec![self.writer.call(
            TASK,
            json!({
                "description": "survey the project",
                "prompt": format!("List the project's files and say which look related to this task: {task}"),
            }),
        )];
        let files = self.files_of_interest();
        if !files.is_empty() {
            calls.push(self.writer.call(
                TASK,
                json!({
                    "description": "read the code",
                    "prompt": format!("Read {} and report what the code does.", files.join(" ")),
                }),
            ));
        }
        ("Let me have two helpers look around.".to_string(), calls)
    }

    /// After an edit: check it with the visible tests if there are any.
    fn after_fix(&self) -> Phase {
        if self.brief.test_command.is_some() {
            Phase::Verify
        } else {
            Phase::Done
        }
    }

    fn files_of_interest(&self) -> Vec<String> {
        let solution = &self.brief.solution;
        let mut paths: Vec<String> = Vec::new();
        for edit in solution.edits.iter().chain(&solution.decoys) {
            if !paths.contains(&edit.path) {
                paths.push(edit.path.clone());
            }
        }
        paths
    }

    fn run_tests(&mut self, why: &str) -> (String, Vec<ToolCall>) {
        match self.brief.test_command.clone() {
            Some(command) => (why.to_string(), vec![self.writer.bash(&command)]),
            None => (why.to_string(), vec![]),
        }
    }

    fn attempt_fix(&mut self) -> (String, Vec<ToolCall>) {
        self.attempts += 1;
        let mut calls = Vec::new();
        if let Some(decoy) = self.applied_decoy.take() {
            calls.push(self.writer.str_replace(&decoy.path, &decoy.new, &decoy.old));
        }
        let solution = &self.brief.solution;
        let decoys = &solution.decoys;
        // Nothing to fix (`tack exec` names no solution): no guess to make.
        let nothing_to_fix = solution.edits.is_empty() && solution.script.is_none();
        if nothing_to_fix || self.rng.random_bool(self.params.skill) {
            for edit in self.brief.solution.edits.clone() {
                calls.push(self.writer.str_replace(&edit.path, &edit.old, &edit.new));
            }
            if let Some(script) = self.brief.solution.script.clone() {
                calls.push(self.writer.bash(&script));
            }
            ("I found the bug; fixing it.".to_string(), calls)
        } else if decoys.is_empty() {
            // No plausible wrong fix is written down (a Harbor task has
            // none): the wrong guess is that nothing needs changing.
            calls.push(
                self.writer
                    .bash("echo 'this looks right to me; leaving it as it is'"),
            );
            ("I think it already works; leaving it.".to_string(), calls)
        } else {
            let decoy = decoys[self.rng.random_range(0..decoys.len())].clone();
            calls.push(self.writer.str_replace(&decoy.path, &decoy.old, &decoy.new));
            self.applied_decoy = Some(decoy);
            ("I think I see the problem; fixing it.".to_string(), calls)
        }
    }

    /// With probability `malformed_rate`, replaces the turn's calls by one
    /// malformed call and remembers what was meant.
    fn maybe_malform(&mut self, calls: Vec<ToolCall>) -> (Vec<ToolCall>, FinishReason) {
        if calls.is_empty() || !self.rng.random_bool(self.params.malformed_rate) {
            return (calls, FinishReason::ToolCalls);
        }
        let kind = MALFORMATIONS[self.rng.random_range(0..MALFORMATIONS.len())];
        let first = &calls[0];
        let (name, arguments, finish) = match kind {
            Malformation::BrokenJson => {
                let mut text = first.arguments.clone();
                text.pop();
                (
                    first.name.clone(),
                    text.replace('"', "'"),
                    FinishReason::ToolCalls,
                )
            }
            Malformation::UnknownTool => {
                let name = match first.name.as_str() {
                    BASH => "run_shell",
                    READ_FILE => "open_file",
                    STR_REPLACE => "edit_file",
                    _ => "do_it",
                };
                (
                    name.to_string(),
                    first.arguments.clone(),
                    FinishReason::ToolCalls,
                )
            }
            Malformation::WrongType => {
                let key = first_key(&first.arguments).unwrap_or_else(|| "path".to_string());
                (
                    first.name.clone(),
                    format!("{{\"{key}\": 42}}"),
                    FinishReason::ToolCalls,
                )
            }
            Malformation::MissingField => (
                first.name.clone(),
                "{}".to_string(),
                FinishReason::ToolCalls,
            ),
            Malformation::CutOff => {
                let cut: String = first
                    .arguments
                    .chars()
                    .take(first.arguments.len() / 2)
                    .collect();
                (first.name.clone(), cut, FinishReason::Length)
            }
        };
        let broken = self.writer.raw_call(&name, arguments);
        self.intended = Some(calls);
        (vec![broken], finish)
    }
}

/// The first skill the system prompt lists (`- name: description`, after
/// `Available skills:`).
fn first_skill(system: &str) -> Option<String> {
    let (_, listing) = system.split_once("Available skills:")?;
    let line = listing.lines().find_map(|l| l.strip_prefix("- "))?;
    Some(line.split_once(':')?.0.trim().to_string())
}

fn first_key(arguments: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    value.as_object()?.keys().next().cloned()
}

const FAILURE_SIGNS: [&str; 7] = [
    "FAILED",
    "FAIL:",
    "FAIL ",
    "Traceback",
    "Error",
    "error:",
    "No such file",
];

fn shows_failure(text: &str) -> bool {
    FAILURE_SIGNS.iter().any(|sign| text.contains(sign)) || shows_nonzero_exit(text)
}

/// Whether the tool results the agent was shown reveal a failure. It can only
/// judge what the harness lets it see.
fn sees_failure(messages: &[Message]) -> bool {
    latest_results(messages).any(|result| shows_failure(&result.content))
}

/// Whether the latest message is the user (the harness's feedback round)
/// reporting a failure after the agent said it was done.
fn feedback_shows_failure(messages: &[Message]) -> bool {
    matches!(messages, [.., before, last]
        if last.role == tack_protocol::Role::User
            && before.role == tack_protocol::Role::Assistant
            && shows_failure(&last.content))
}

fn shows_nonzero_exit(text: &str) -> bool {
    text.lines().any(|line| {
        line.strip_prefix("exit code: ")
            .is_some_and(|code| code.trim() != "0")
    })
}

#[async_trait]
impl Model for SimAgent {
    fn provider(&self) -> &str {
        "tack"
    }

    fn model_name(&self) -> &str {
        "sim"
    }

    fn fork(&self) -> Option<Box<dyn Model>> {
        Some(Box::new(SimSubagent::default()))
    }

    async fn complete(&mut self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.can_delegate = offers(request.tools, TASK);
        if self.writer.issued() == 0 && offers(request.tools, READ_SKILL) {
            self.skill_to_read = request
                .messages
                .first()
                .and_then(|m| first_skill(&m.content));
        }
        let needed = [BASH, READ_FILE, STR_REPLACE];
        if let Some(missing) = needed.iter().find(|name| !offers(request.tools, name)) {
            let text =
                format!("I need the `{missing}` tool to work on this task, and it is not offered.");
            let answer = Message::assistant(text, vec![]);
            return Ok(self
                .writer
                .respond(request, answer, FinishReason::Stop, "sim"));
        }
        if let Some(window) = self.params.context_window {
            let tokens = self
                .writer
                .tokens
                .request_tokens(request.messages, request.tools);
            if tokens > window {
                return Err(context_length_exceeded(tokens, window));
            }
        }
        if request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::User && m.content == COMPACTION_PROMPT)
        {
            // Asked to summarise: it says where it stands, and its own state
            // carries on unchanged.
            let answer = Message::assistant(self.summary(), vec![]);
            return Ok(self
                .writer
                .respond(request, answer, FinishReason::Stop, "sim"));
        }
        let (text, calls) = self.next_turn(request.messages);
        let (calls, finish) = self.maybe_malform(calls);
        let finish = if calls.is_empty() {
            FinishReason::Stop
        } else {
            finish
        };
        let answer = Message::assistant(text, calls);
        Ok(self.writer.respond(request, answer, finish, "sim"))
    }
}

/// A request longer than the window, refused in OpenAI's words, as a real
/// provider's error reads once tack has it (`type: message`).
fn context_length_exceeded(tokens: u64, window: u64) -> ModelError {
    ModelError::Api {
        status: 400,
        message: format!(
            "invalid_request_error: This model's maximum context length is {window} tokens. \
             However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."
        ),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exit_codes_and_failure_words() {
        let shown = |text: &str| vec![Message::tool_result("c", text)];
        assert!(sees_failure(&shown("exit code: 1\n<stdout>\n</stdout>")));
        assert!(!sees_failure(&shown("exit code: 0\nall good")));
        assert!(sees_failure(&shown("FAILED (failures=1)")));
        assert!(!sees_failure(&shown("(no output)")));
    }

    #[test]
    fn params_are_checked() {
        let bad = SimParams {
            skill: 1.5,
            ..SimParams::default()
        };
        let error = bad.validate().unwrap_err().to_string();
        assert!(error.contains("skill"), "{error}");
        assert!(SimParams::default().validate().is_ok());
    }

    /// A task without decoys (a Harbor task's solution is a script): the
    /// sim's skill still decides, the wrong guess being to change nothing.
    #[test]
    fn skill_decides_on_a_task_without_decoys() {
        let brief = TaskBrief {
            instruction: "make it work".to_string(),
            solution: tack_protocol::Solution {
                script: Some("bash /solution/solve.sh".to_string()),
                ..tack_protocol::Solution::default()
            },
            test_command: None,
        };
        let solves = |skill: f64, seed: u64| {
            let params = SimParams {
                skill,
                ..SimParams::default()
            };
            let mut sim = SimAgent::new(brief.clone(), params, seed);
            let (_, calls) = sim.attempt_fix();
            calls.iter().any(|call| call.arguments.contains("solve.sh"))
        };
        assert!((0..20).all(|seed| solves(1.0, seed)));
        assert!((0..20).all(|seed| !solves(0.0, seed)));
        let solved = (0..200).filter(|&seed| solves(0.5, seed)).count();
        assert!((60..140).contains(&solved), "{solved} of 200 at skill 0.5");
    }
}
