//! `tack events DIR`: a session's event log as JSON lines, from a sequence
//! number on, and with --follow as it grows, so a UI can reconnect without
//! losing or repeating an event.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tack_agent::session_log::LogFollower;

use crate::exit::{Classify, CommandResult, Failure, usage};
use crate::out::{self, outln};

const AFTER_HELP: &str = "\
Each line is {\"seq\": N, \"event\": {\"type\": …}}, as `tack exec --json` prints them. A client that
has seen up to N reconnects with --after-seq N and gets every later event exactly once.

Exit codes: 0 printed (with --follow: the run finished or was interrupted), 2 no session in DIR, 3 the log is
damaged (the events before the damaged line are printed, then the line is named).";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct EventsArgs {
    /// The session directory (`tack exec --session DIR`).
    dir: PathBuf,
    /// Print only events with a greater sequence number.
    #[arg(long, value_name = "N")]
    after_seq: Option<u64>,
    /// Keep printing events as they are written, until the session finishes.
    #[arg(long)]
    follow: bool,
}

/// How often --follow looks for new lines.
const POLL: Duration = Duration::from_millis(100);

pub async fn run(args: EventsArgs) -> CommandResult {
    if args.dir.join(tack_trace::Manifest::FILE_NAME).is_file() {
        return Err(usage(format!(
            "{0} is a run's trace directory, not a session: `tack show {0} <trial>` prints a \
             trial's calls and checks; a session is what `tack exec --session DIR` writes",
            args.dir.display()
        )));
    }
    let mut log = LogFollower::open(&args.dir).or_fail(Failure::Usage)?;
    loop {
        let read = log.read_new().or_fail(Failure::Usage)?;
        let mut finished = false;
        for line in read.lines {
            finished |= line.ends_run();
            if args.after_seq.is_some_and(|after| line.seq <= after) {
                continue;
            }
            outln!("{}", line.to_json())?;
        }
        // A reader that has gone ends the following too.
        if out::closed() {
            return Ok(ExitCode::SUCCESS);
        }
        // The events before a damaged line are printed, then it is named.
        if let Some(damaged) = read.damaged {
            return Err(damaged).or_fail(Failure::Internal);
        }
        if !args.follow || finished {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(POLL).await;
    }
}
