//! The interactive approver: the front end's answer to
//! `approver.policy = "interactive"`. Libraries never touch the terminal;
//! they ask through the `Approver` trait and this is the CLI's answer.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

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
        let answer = tokio::task::spawn_blocking(move || ask_on_terminal(&request)).await;
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

fn ask_on_terminal(request: &ApprovalRequest) -> Option<bool> {
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
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(matches!(line.trim(), "y" | "Y" | "yes"))
}
