//! `tack chat -w DIR`: an interactive session over the same harness as
//! `tack exec` and every trial. Each line is a turn of one conversation;
//! the agent's answers and tool calls are printed as they happen, approvals
//! are asked inline, and Ctrl-C cancels the current turn, not the session.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use rustyline::error::ReadlineError;
use tack_harness::Model;
use tack_harness::{Harness, HarnessSetup, Session};
use tack_protocol::{
    ApproverConfig, ApproverPolicy, Event, EventSink, HarnessConfig, SinkError, SpanStatus,
    tool_names,
};

use crate::exec_cmd::ModelFlags;
use crate::exit::{Classify, CommandError, CommandResult, Failure, usage};
use crate::out::{errln, outln};
use crate::profile_arg::ProfileArg;

const AFTER_HELP: &str = "\
In the conversation:
  /todos     the agent's current plan (its last write_todos list)
  /skills    the skills the agent can load (skills/<name>/SKILL.md)
  /cost      tokens and dollars spent so far
  /compact   summarise the older history now, to free the context
  /help      these commands
  Ctrl-C     cancel the current turn (the conversation goes on)
  Ctrl-D     end the session

Tool calls that need approval (see --permissions) are asked about inline: y to allow.
History is kept in ~/.local/state/tack/chat_history (or --history).";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ChatArgs {
    /// The directory the agent works in (in place).
    #[arg(long, short = 'w', value_parser = crate::dir_arg::workspace)]
    workspace: PathBuf,
    #[command(flatten)]
    model: ModelFlags,
    #[command(flatten)]
    mcp: crate::mcp_arg::McpFlags,
    /// Permission rules: `default` (the built-in profile: edits and risky commands are asked about)
    /// or a rules file.
    #[arg(long, default_value = "default")]
    permissions: String,
    /// How the agent's commands are confined (see `tack doctor`).
    #[arg(long, value_enum, default_value = "strict")]
    sandbox: ProfileArg,
    /// Model calls per turn.
    #[arg(long, default_value_t = 50)]
    max_steps: u32,
    /// Where the line history is kept.
    #[arg(long)]
    history: Option<PathBuf>,
}

/// What the conversation shows besides the events: the latest plan.
#[derive(Debug, Default)]
struct ChatState {
    todos: Option<String>,
}

/// Prints the turn as it happens: the agent's words, each tool call with
/// the first line of its result.
struct ChatSink {
    state: Arc<Mutex<ChatState>>,
}

impl EventSink for ChatSink {
    fn record(&mut self, event: Event) -> Result<(), SinkError> {
        if let Some(line) = tack_report::text::chat_event(&event) {
            outln!("{line}")?;
        }
        // The plan /todos shows: the last write_todos that succeeded.
        if let Event::ToolCall(call) = &event
            && call.tool_name == tool_names::WRITE_TODOS
            && call.status == SpanStatus::Ok
            && let Ok(mut state) = self.state.lock()
        {
            state.todos = Some(call.result.clone());
        }
        Ok(())
    }
}

pub async fn run(args: ChatArgs) -> CommandResult {
    if !args.workspace.is_dir() {
        return Err(usage(format!(
            "--workspace {} is not a directory; point it at the project to work on",
            args.workspace.display()
        )));
    }
    let workspace = args.workspace.canonicalize().or_fail(Failure::Usage)?;
    let harness = assemble(&args, &workspace).await?;
    let (mut model, pricer) = args.model.build("", 0)?;
    let state = Arc::new(Mutex::new(ChatState::default()));
    let mut sink = ChatSink {
        state: Arc::clone(&state),
    };
    let mut session = harness.session(&mut sink, pricer);
    let mut editor = rustyline::DefaultEditor::new().or_fail(Failure::Internal)?;
    let history = args.history.clone().or_else(default_history);
    if let Some(path) = &history {
        // A first session has no history yet.
        let _ = editor.load_history(path);
    }
    errln!(
        "tack chat in {} with {} — /help for commands, Ctrl-D to leave.",
        workspace.display(),
        model.model_name()
    );
    loop {
        let (line, back) = match read_line(editor).await {
            Ok(read) => read,
            Err(error) => return Err(error),
        };
        editor = back;
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(error).or_fail(Failure::Internal),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line);
        if line.starts_with('/') {
            slash_command(line, &mut session, model.as_mut(), &harness, &state).await?;
            continue;
        }
        tokio::select! {
            stop = session.run(model.as_mut(), line) => {
                if stop != tack_protocol::StopReason::Completed {
                    let error = session.outcome().error.unwrap_or_default();
                    let sep = if error.is_empty() { "" } else { ": " };
                    let error = tack_protocol::printable(&error);
                    outln!("(the turn stopped: {stop}{sep}{error})")?;
                }
            }
            _ = tokio::signal::ctrl_c() => {
                session.cancel_turn();
                outln!("(turn cancelled)")?;
            }
        }
    }
    if let Some(path) = &history {
        save_history(&mut editor, path);
    }
    Ok(ExitCode::SUCCESS)
}

/// The harness of a chat: the default tools and a todo list, commands
/// asked about at the terminal, the MCP servers of `--mcp-config`.
async fn assemble(args: &ChatArgs, workspace: &Path) -> Result<Harness, CommandError> {
    let mut tools: Vec<String> = tool_names::DEFAULT.iter().map(|t| t.to_string()).collect();
    tools.push(tool_names::WRITE_TODOS.to_string());
    let config = HarnessConfig {
        tools,
        max_steps: args.max_steps,
        sandbox: args.sandbox.into(),
        permissions: Some(args.permissions.clone()),
        approver: ApproverConfig {
            policy: ApproverPolicy::Interactive,
            ..ApproverConfig::default()
        },
        mcp_servers: args.mcp.servers()?,
        ..HarnessConfig::default()
    };
    let setup = HarnessSetup::for_directory(
        config,
        workspace.to_path_buf(),
        Some(crate::terminal_approver::shared()),
    )
    .or_fail(Failure::Internal)?;
    Harness::assemble(setup)
        .await
        .map_err(crate::exec_cmd::flag_error)
}

/// Saves the line history, saying so when it cannot.
fn save_history(editor: &mut rustyline::DefaultEditor, path: &Path) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(error) = editor.save_history(path) {
        errln!(
            "warning: could not save the history to {}: {error}",
            path.display()
        );
    }
}

/// `/todos`, `/skills`, `/cost`, `/compact`, `/help`.
async fn slash_command(
    command: &str,
    session: &mut Session<'_>,
    model: &mut dyn Model,
    harness: &Harness,
    state: &Mutex<ChatState>,
) -> Result<(), crate::exit::CommandError> {
    match command {
        "/help" => {
            errln!("{AFTER_HELP}");
            Ok(())
        }
        "/todos" => match state.lock().ok().and_then(|s| s.todos.clone()) {
            Some(todos) => outln!("{}", tack_protocol::printable(todos.trim_end())),
            None => outln!("(no plan yet: the agent has not written todos)"),
        },
        "/skills" if harness.skills().is_empty() => outln!(
            "(no skills: add skills/<name>/SKILL.md to the workspace, with a name and description)"
        ),
        "/skills" => {
            for skill in harness.skills() {
                // A skill's file is the workspace's text.
                let line = format!("{}: {}", skill.name, skill.description);
                outln!("{}", tack_protocol::printable(&line))?;
            }
            Ok(())
        }
        "/cost" => {
            let totals = session.outcome().totals;
            let cost = totals
                .cost_usd
                .map_or("unknown (the model has no price)".to_string(), |c| {
                    format!("${c:.4}")
                });
            outln!(
                "{}, {} ({} in, {} out), cost {cost}",
                tack_protocol::count(totals.steps, "step"),
                tack_protocol::count(totals.usage.total(), "token"),
                totals.usage.input_tokens,
                totals.usage.output_tokens
            )
        }
        "/compact" => match session.compact_now(model).await {
            Ok(true) => outln!("(compacted: the older history is now a summary)"),
            Ok(false) => outln!("(nothing to compact yet)"),
            Err(stop) => outln!("(could not compact: {stop})"),
        },
        other => outln!("unknown command {other}; /help lists them"),
    }
}

type Editor = rustyline::DefaultEditor;

/// Reads a line off the async runtime's workers: the editor blocks.
async fn read_line(
    mut editor: Editor,
) -> Result<(Result<String, ReadlineError>, Editor), crate::exit::CommandError> {
    tokio::task::spawn_blocking(move || {
        let line = editor.readline("› ");
        (line, editor)
    })
    .await
    .or_fail(Failure::Internal)
}

fn default_history() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(state.join("tack/chat_history"))
}
