//! The interactive approver: the front end's answer to
//! `approver.policy = "interactive"`. Libraries never touch the terminal;
//! they ask through the `Approver` trait and this is the CLI's answer.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tack_agent::{ApprovalDecision, ApprovalRequest, Approver};
use tack_protocol::printable;

/// Asks on the terminal, showing the exact tool and arguments. Concurrent
/// trials take turns: one question at a time.
struct TerminalApprover {
    turn: tokio::sync::Mutex<()>,
}

/// The approver every trial of this process shares.
pub fn shared() -> Arc<dyn Approver> {
    Arc::new(TerminalApprover {
        turn: tokio::sync::Mutex::new(()),
    })
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let _turn = self.turn.lock().await;
        let request = request.clone();
        let asking = Asking::default();
        let cancelled = Arc::clone(&asking.cancelled);
        let answer =
            tokio::task::spawn_blocking(move || ask_on_terminal(&request, &cancelled)).await;
        asking.answered();
        ApprovalDecision {
            approved: matches!(answer, Ok(Some(true))),
            approver: "interactive".to_string(),
            reason: match answer {
                Ok(Some(_)) => None,
                _ => Some("no terminal to ask on; denied".to_string()),
            },
        }
    }
}

/// A question on the terminal while it is asked. When the turn that asked
/// is cancelled (Ctrl-C in `tack chat`), the question is dropped with it:
/// the reader must stop too, or it would take the next line typed at the
/// chat's prompt as its answer.
#[derive(Default)]
struct Asking {
    cancelled: Arc<AtomicBool>,
    answered: bool,
}

impl Asking {
    fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        if !self.answered {
            self.cancelled.store(true, Ordering::Release);
            // The question's line ends here, not under the next output.
            // Never eprintln! in a drop: it panics on a closed stderr, and a
            // panic while unwinding aborts.
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Waits until stdin has a line to read, or the question is `cancelled`
/// (false then).
fn line_ready(cancelled: &AtomicBool) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let stdin = std::io::stdin();
    // Checked ten times a second: a person answers slower than that.
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    while !cancelled.load(Ordering::Acquire) {
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        match poll(&mut fds, Some(&tick)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            // Ready, at its end, or an error the read will report; unless
            // the question was cancelled meanwhile, and the line is the
            // next one typed at the chat's prompt.
            _ => return !cancelled.load(Ordering::Acquire),
        }
    }
    false
}

fn ask_on_terminal(request: &ApprovalRequest, cancelled: &AtomicBool) -> Option<bool> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let mut stderr = std::io::stderr();
    // What a person approves must read as what will run: the agent's text
    // is shown, never obeyed (a carriage return could hide `rm -rf ~`).
    let shown = printable(request.command.as_deref().unwrap_or(&request.arguments));
    let _ = writeln!(
        stderr,
        "\nThe agent wants to run {}:\n  {shown}",
        printable(&request.tool)
    );
    let _ = writeln!(
        stderr,
        "because {} (about: {})",
        printable(&request.rule),
        printable(&request.part)
    );
    let _ = write!(stderr, "Allow? [y/N] ");
    let _ = stderr.flush();
    if !line_ready(cancelled) {
        return None;
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(matches!(line.trim(), "y" | "Y" | "yes"))
}
