//! `tack-testkit-server --provider openai|anthropic --script FILE.json
//! [--port N] [--key KEY]`: serves a script (a JSON array of scripted
//! responses) on 127.0.0.1, prints the base URL on stdout, and runs until
//! killed.

use std::io::Write;
use std::process::ExitCode;

use tack_testkit::{Dialect, MockServer, ScriptedResponse, ServerOptions};

const USAGE: &str = "usage: tack-testkit-server --provider openai|anthropic --script FILE.json [--port N] [--key KEY]";

struct Args {
    dialect: Dialect,
    script: Vec<ScriptedResponse>,
    options: ServerOptions,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut dialect = None;
    let mut script = None;
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
            "--port" => options.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--key" => options.expected_key = value()?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        dialect: dialect.ok_or("--provider is required")?,
        script: script.ok_or("--script is required")?,
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
    let server = match MockServer::start_background(args.dialect, args.script, args.options) {
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
