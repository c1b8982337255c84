//! `tack-testkit-server --provider openai|anthropic --script FILE.json`, or
//! `… --tool-loop STEPS [--tool NAME] [--argument TEXT] [--latency-ms MS]
//! [--context-window TOKENS]`:
//! serves a script (a JSON array of scripted responses) or a tool loop on
//! 127.0.0.1, prints the base URL on stdout, and runs until killed. A tool
//! loop's counters are at `GET /tack-testkit/stats`; `--record FILE` writes
//! a script's requests to FILE as JSON lines.

use std::io::Write;
use std::num::ParseIntError;
use std::process::ExitCode;
use std::str::FromStr;

use tack_testkit::{Dialect, MockServer, ScriptedResponse, ServerOptions, ToolLoop};

const USAGE: &str = "usage: tack-testkit-server --provider openai|anthropic \
(--script FILE.json | --tool-loop STEPS [--tool NAME] [--argument TEXT] [--latency-ms MS] \
[--context-window TOKENS]) [--port N] [--key KEY] [--record FILE]

--record FILE      append every request a script answers to FILE, one JSON line each
--tool-loop STEPS  answer every conversation with STEPS calls of --tool (default bash), then a
                   final answer; --argument (default 'echo step {step}') is the value of the
                   tool's first required parameter; --latency-ms delays every answer;
                   --context-window refuses longer requests as the provider would";

/// As tack's own (see its Cargo.toml): the server answers a thousand
/// conversations at once in the concurrency benchmark, beside tack on the
/// same cores.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

enum Answers {
    Script(Vec<ScriptedResponse>),
    Loop(ToolLoop),
}

struct Args {
    dialect: Dialect,
    answers: Answers,
    options: ServerOptions,
}

/// A command line this server does not take; printed above the usage.
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    #[error("{0} needs a value")]
    NoValue(String),
    #[error("unknown provider `{0}`")]
    UnknownProvider(String),
    #[error("{path}: {source}")]
    ReadScript {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    ParseScript {
        path: String,
        source: serde_json::Error,
    },
    #[error("{flag}: {source}")]
    NotANumber {
        flag: &'static str,
        source: ParseIntError,
    },
    #[error("unknown argument `{0}`")]
    UnknownArgument(String),
    #[error("give --script or --tool-loop, not both")]
    ScriptAndLoop,
    #[error("--script or --tool-loop is required")]
    NoAnswers,
    #[error("--provider is required")]
    NoProvider,
}

fn number<T: FromStr<Err = ParseIntError>>(flag: &'static str, text: &str) -> Result<T, ArgsError> {
    text.parse()
        .map_err(|source| ArgsError::NotANumber { flag, source })
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, ArgsError> {
    let mut dialect = None;
    let mut script = None;
    let mut tool_loop: Option<ToolLoop> = None;
    let mut loop_flags = ToolLoop::default();
    let mut options = ServerOptions::default();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| ArgsError::NoValue(flag.clone()));
        match flag.as_str() {
            "--provider" => {
                dialect = Some(match value()?.as_str() {
                    "openai" => Dialect::OpenAi,
                    "anthropic" => Dialect::Anthropic,
                    other => return Err(ArgsError::UnknownProvider(other.to_string())),
                })
            }
            "--script" => {
                let path = value()?;
                let text = match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(source) => return Err(ArgsError::ReadScript { path, source }),
                };
                match serde_json::from_str(&text) {
                    Ok(parsed) => script = Some(parsed),
                    Err(source) => return Err(ArgsError::ParseScript { path, source }),
                }
            }
            "--tool-loop" => {
                let steps = number("--tool-loop", &value()?)?;
                tool_loop = Some(ToolLoop {
                    steps,
                    ..ToolLoop::default()
                });
            }
            "--tool" => loop_flags.tool = value()?,
            "--argument" => loop_flags.argument = value()?,
            "--context-window" => {
                loop_flags.context_window = Some(number("--context-window", &value()?)?)
            }
            "--latency-ms" => loop_flags.latency_ms = number("--latency-ms", &value()?)?,
            "--port" => options.port = number("--port", &value()?)?,
            "--key" => options.expected_key = value()?,
            "--record" => options.record_to = Some(value()?.into()),
            other => return Err(ArgsError::UnknownArgument(other.to_string())),
        }
    }
    let answers = match (script, tool_loop) {
        (Some(script), None) => Answers::Script(script),
        (None, Some(steps)) => Answers::Loop(ToolLoop {
            steps: steps.steps,
            ..loop_flags
        }),
        (Some(_), Some(_)) => return Err(ArgsError::ScriptAndLoop),
        (None, None) => return Err(ArgsError::NoAnswers),
    };
    Ok(Args {
        dialect: dialect.ok_or(ArgsError::NoProvider)?,
        answers,
        options,
    })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("{error}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let started = match args.answers {
        Answers::Script(script) => MockServer::start_background(args.dialect, script, args.options),
        Answers::Loop(tool_loop) => {
            MockServer::start_tool_loop(args.dialect, tool_loop, args.options)
        }
    };
    let server = match started {
        Ok(server) => server,
        Err(error) => {
            eprintln!("could not start the server: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", server.base_url());
    let _ = std::io::stdout().flush();
    // Serves on its own thread until the process is killed.
    let _server = server;
    loop {
        std::thread::park();
    }
}
