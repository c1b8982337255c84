//! Approvers: who answers when a tool call needs approval. Unattended runs
//! use a fixed policy so they stay reproducible; `interactive` asks on the
//! terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use tack_protocol::{ApproverConfig, ApproverPolicy};
use tack_sandbox::{CommandSpec, Confinement};

/// What the approver is asked about.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    pub tool: String,
    /// The arguments exactly as the model wrote them.
    pub arguments: String,
    /// For `bash`: the command.
    pub command: Option<String>,
    /// Why approval is needed (the rule).
    pub rule: String,
    /// The part of the command the rule was about.
    pub part: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    pub approved: bool,
    /// Who decided, e.g. `approve_all`, `script: ./review.sh`, `interactive`.
    pub approver: String,
    pub reason: Option<String>,
}

#[async_trait]
pub trait Approver: Send + Sync {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision;
}

/// Builds the approver a configuration names. `cwd` is where a reviewer
/// script runs (the suite directory).
pub fn approver_for(config: &ApproverConfig, cwd: PathBuf) -> Result<Box<dyn Approver>, String> {
    Ok(match config.policy {
        ApproverPolicy::ApproveAll => Box::new(Fixed { approve: true }),
        ApproverPolicy::DenyAll => Box::new(Fixed { approve: false }),
        ApproverPolicy::Rules => Box::new(RulesApprover::new(&config.approve)?),
        ApproverPolicy::Script => {
            let script = config
                .script
                .clone()
                .ok_or("approver policy `script` needs `script = \"<command>\"`")?;
            Box::new(ScriptApprover { script, cwd })
        }
        ApproverPolicy::Interactive => Box::new(TerminalApprover),
    })
}

struct Fixed {
    approve: bool,
}

#[async_trait]
impl Approver for Fixed {
    async fn decide(&self, _: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision {
            approved: self.approve,
            approver: if self.approve {
                "approve_all"
            } else {
                "deny_all"
            }
            .to_string(),
            reason: (!self.approve)
                .then(|| "this run denies every call that needs approval".to_string()),
        }
    }
}

/// Approves calls whose command (for `bash`) or tool name matches a glob.
pub struct RulesApprover {
    globs: globset::GlobSet,
    patterns: Vec<String>,
}

impl RulesApprover {
    pub fn new(patterns: &[String]) -> Result<RulesApprover, String> {
        let mut builder = globset::GlobSetBuilder::new();
        for pattern in patterns {
            let glob = globset::Glob::new(pattern)
                .map_err(|e| format!("approver.approve: `{pattern}` is not a valid glob: {e}"))?;
            builder.add(glob);
        }
        let globs = builder
            .build()
            .map_err(|e| format!("approver.approve: {e}"))?;
        Ok(RulesApprover {
            globs,
            patterns: patterns.to_vec(),
        })
    }
}

#[async_trait]
impl Approver for RulesApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let subject = request.command.as_deref().unwrap_or(&request.tool);
        let matched = self.globs.matches(subject);
        ApprovalDecision {
            approved: !matched.is_empty(),
            approver: "rules".to_string(),
            reason: match matched.first() {
                Some(i) => Some(format!("matches `{}`", self.patterns[*i])),
                None => Some("no approve rule matches".to_string()),
            },
        }
    }
}

/// Runs a reviewer command with the request as JSON on stdin; exit 0
/// approves, and the first line it prints is the reason.
struct ScriptApprover {
    script: String,
    cwd: PathBuf,
}

#[async_trait]
impl Approver for ScriptApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let input = serde_json::to_string(request).unwrap_or_default();
        let script = format!("printf '%s' \"$TACK_APPROVAL_REQUEST\" | {}", self.script);
        let env = [("TACK_APPROVAL_REQUEST".to_string(), input)];
        let unconfined = Confinement::off();
        let spec = CommandSpec {
            script: &script,
            cwd: &self.cwd,
            env: &env,
            timeout: Duration::from_secs(60),
            output_limit: 4096,
            // The reviewer script is the operator's own program, not the agent's.
            confinement: &unconfined,
        };
        let approver = format!("script: {}", self.script);
        match tack_sandbox::run(&spec).await {
            Ok(output) => ApprovalDecision {
                approved: output.success(),
                approver,
                reason: output
                    .stdout
                    .lines()
                    .next()
                    .map(str::to_string)
                    .filter(|l| !l.is_empty()),
            },
            Err(error) => ApprovalDecision {
                approved: false,
                approver,
                reason: Some(format!("the reviewer could not run: {error}")),
            },
        }
    }
}

/// Asks on the terminal, showing the exact tool and arguments.
struct TerminalApprover;

#[async_trait]
impl Approver for TerminalApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let request = request.clone();
        let answer = tokio::task::spawn_blocking(move || ask_on_terminal(&request)).await;
        let approved = matches!(answer, Ok(Some(true)));
        ApprovalDecision {
            approved,
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
    let shown = request.command.as_deref().unwrap_or(&request.arguments);
    let _ = writeln!(
        stderr,
        "\nThe agent wants to run {}:\n  {shown}",
        request.tool
    );
    let _ = writeln!(stderr, "because {} (about: {})", request.rule, request.part);
    let _ = write!(stderr, "Allow? [y/N] ");
    let _ = stderr.flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(matches!(line.trim(), "y" | "Y" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(command: &str) -> ApprovalRequest {
        ApprovalRequest {
            tool: "bash".to_string(),
            arguments: format!("{{\"command\": \"{command}\"}}"),
            command: Some(command.to_string()),
            rule: "rules[1]".to_string(),
            part: command.to_string(),
        }
    }

    #[tokio::test]
    async fn rules_approve_only_what_matches() {
        let approver = RulesApprover::new(&["python3 -m unittest*".to_string()]).unwrap();
        assert!(
            approver
                .decide(&request("python3 -m unittest -q"))
                .await
                .approved
        );
        assert!(!approver.decide(&request("python3 evil.py")).await.approved);
    }

    #[tokio::test]
    async fn a_script_reviewer_reads_the_request_and_decides() {
        let dir = tempfile::tempdir().unwrap();
        let config = ApproverConfig {
            policy: ApproverPolicy::Script,
            approve: vec![],
            script: Some("grep -q unittest && echo looks fine".to_string()),
        };
        let approver = approver_for(&config, dir.path().to_path_buf()).unwrap();
        let yes = approver.decide(&request("python3 -m unittest")).await;
        assert!(yes.approved);
        assert_eq!(yes.reason.as_deref(), Some("looks fine"));
        assert!(!approver.decide(&request("make install")).await.approved);
    }

    #[test]
    fn a_script_policy_without_a_script_is_an_error() {
        let config = ApproverConfig {
            policy: ApproverPolicy::Script,
            ..ApproverConfig::default()
        };
        assert!(approver_for(&config, PathBuf::new()).is_err());
    }
}
