//! `tack-testkit-server --provider openai|anthropic --script FILE.json`, or
//! `… --tool-loop STEPS [--tool NAME] [--argument TEXT] [--latency-ms MS]
//! [--context-window TOKENS]`:
//! serves a script (a JSON array of scripted responses) or a tool loop on
//! 127.0.0.1, prints the base URL on stdout, and runs until killed. A tool
//! loop's counters are at `GET /tack-testkit/stats`; `--record FILE` writes
//! a script's requests to FILE as JSON lines.

use std::io::Write;
use std::process::ExitCode;

use tack_testkit::{Dialect, MockServer, ScriptedResponse, ServerOptions, ToolLoop};

const USAGE: &str = "usage: tack-testkit-server --provider openai|anthropic \
(--script FILE.json | --tool-loop STEPS [--tool NAME] [--argument TEXT] [--latency-ms MS] \
[--context-window TOKENS]) [--port N] [--key KEY] [--record FILE]

--record FILE      append every request a script answers to FILE, one JSON line each
--tool-loop STEPS  answer every conversation with STEPS calls of --tool (default bash), then a
                   final answer; --argument (default 'echo step {step}') is the value of the
                   tool's first required parameter; --latency-ms delays every answer;
                   --context-window refuses longer requests as the provider would";

enum Answers {
    Script(Vec<ScriptedResponse>),
    Loop(ToolLoop),
}

struct Args {
    dialect: Dialect,
    answers: Answers,
    options: ServerOptions,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut dialect = None;
    let mut script = None;
    let mut tool_loop: Option<ToolLoop> = None;
    let mut loop_flags = ToolLoop::default();
    let mut options = ServerOptions::default();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--provider" => {
                dialect = Some(match value()?.as_str() {
                    "openai" => Dialect::OpenAi,
                    "anthropic" => Dialect::Anthropic,
                    other => return Err(format!("unknown provider `{other}`")),
                })
            }
            "--script" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                script = Some(serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?);
            }
            "--tool-loop" => {
                let steps = value()?.parse().map_err(|e| format!("--tool-loop: {e}"))?;
                tool_loop = Some(ToolLoop {
                    steps,
                    ..ToolLoop::default()
                });
            }
            "--tool" => loop_flags.tool = value()?,
            "--argument" => loop_flags.argument = value()?,
            "--context-window" => {
                loop_flags.context_window = Some(
                    value()?
                        .parse()
                        .map_err(|e| format!("--context-window: {e}"))?,
                )
            }
            "--latency-ms" => {
                loop_flags.latency_ms =
                    value()?.parse().map_err(|e| format!("--latency-ms: {e}"))?
            }
            "--port" => options.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--key" => options.expected_key = value()?,
            "--record" => options.record_to = Some(value()?.into()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let answers = match (script, tool_loop) {
        (Some(script), None) => Answers::Script(script),
        (None, Some(steps)) => Answers::Loop(ToolLoop {
            steps: steps.steps,
            ..loop_flags
        }),
        (Some(_), Some(_)) => return Err("give --script or --tool-loop, not both".to_string()),
        (None, None) => return Err("--script or --tool-loop is required".to_string()),
    };
    Ok(Args {
        dialect: dialect.ok_or("--provider is required")?,
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
