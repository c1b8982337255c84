//! Everything the commands print on stdout goes through here, so that a
//! reader that stops early (`tack compare … --json | head -c 100`) ends
//! the output, not the process: `println!` would panic on the broken pipe.
//! As in ripgrep, that end is quiet: no message, and the command goes on
//! to its own exit code (a gate's verdict stays in its status). What is
//! printed after that is dropped; a command whose only work is printing
//! (`tack events --follow`) asks [`closed`] and stops, and `tack exec
//! --json`, whose event stream is its product, fails the run (exit 3).

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::exit::{CommandError, Failure};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether anything went to stdout: a `--json` command that fails before
/// it printed its object prints an error object instead (see `main`).
static WROTE: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout and flushes it. A closed pipe is the end of the
/// output, not an error; any other failure (a full disk) is tack's.
pub fn write(args: fmt::Arguments<'_>) -> Result<(), CommandError> {
    if closed() {
        return Ok(());
    }
    let mut stdout = io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(error) => Err(CommandError {
            kind: Failure::Internal,
            error: anyhow::Error::new(error).context("could not write to stdout"),
        }),
        Ok(()) => {
            WROTE.store(true, Ordering::Relaxed);
            Ok(())
        }
    }
}

/// Whether anything was written to stdout.
pub fn wrote() -> bool {
    WROTE.load(Ordering::Relaxed)
}

/// Whether the reader of stdout has gone.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Writes `args` to stderr, where tack says what it is doing and what went
/// wrong. A stderr that is gone (`tack run … 2>&1 | head -2`) leaves
/// nothing to tell: what is said there is dropped and the command goes on,
/// where `eprintln!` would panic and abandon a run half done.
///
/// What is said there quotes what tasks and agents produced (a build log's
/// tail, a check's output, an error): its control characters are shown,
/// not obeyed ([`tack_protocol::printable`]). tack colours nothing on
/// stderr.
pub fn note(args: fmt::Arguments<'_>) {
    let text = args.to_string();
    let _ = io::stderr()
        .lock()
        .write_all(tack_protocol::printable(&text).as_bytes());
}

/// [`note`] over the line before (a progress count rewritten in place):
/// the carriage return is tack's, the text is shown as `note` shows it.
pub fn note_over(args: fmt::Arguments<'_>) {
    let text = args.to_string();
    let printable = tack_protocol::printable(&text);
    let _ = io::stderr()
        .lock()
        .write_all(format!("\r{printable}").as_bytes());
}

/// `eprint!` over the line before, through [`note_over`].
macro_rules! err_over {
    ($($arg:tt)*) => {
        $crate::out::note_over(format_args!($($arg)*))
    };
}

/// `eprint!` through [`note`].
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::out::note(format_args!($($arg)*))
    };
}

/// `eprintln!` through [`note`].
macro_rules! errln {
    () => {
        $crate::out::note(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::note(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write`]: returns `Result<(), CommandError>`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// `println!` through [`write`]: returns `Result<(), CommandError>`.
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {err, err_over, errln, out, outln};

/// An event sink that printed fails with the print's error.
impl From<CommandError> for tack_protocol::SinkError {
    fn from(error: CommandError) -> Self {
        tack_protocol::SinkError::store(error.error)
    }
}
