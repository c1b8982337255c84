//! Approvers: who answers when a tool call needs approval. Unattended runs
//! use a fixed policy so they stay reproducible; `interactive` is the front
//! end's (the CLI asks on the terminal), passed in through the harness.

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
    /// The script the call runs, when it runs one (`bash`'s command).
    pub command: Option<String>,
    /// Why approval is needed (the rule).
    pub rule: String,
    /// The part of the command the rule was about.
    pub part: String,
    /// Every part of the call that needs approval (`part` is one of them):
    /// normalized commands, file accesses (`write a.py (str_replace)`).
    /// Empty when the call as a whole needs it (`requires_approval`).
    pub parts: Vec<String>,
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

/// Why an approver configuration cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ApproverError {
    #[error("approver.approve: `{pattern}` is not a valid glob: {reason}")]
    InvalidGlob { pattern: String, reason: String },
    #[error("approver policy `script` needs `script = \"<command>\"`")]
    MissingScript,
    /// A library never talks to the terminal: the front end (the CLI's
    /// prompt) answers this policy, through the harness's setup.
    #[error(
        "approver policy `interactive` is answered by the front end (tack run / tack exec on a \
         terminal), not built here"
    )]
    Interactive,
}

/// Builds the approver a configuration names. `cwd` is where a reviewer
/// script runs (the suite directory).
pub fn approver_for(
    config: &ApproverConfig,
    cwd: PathBuf,
) -> Result<Box<dyn Approver>, ApproverError> {
    Ok(match config.policy {
        ApproverPolicy::ApproveAll => Box::new(Fixed { approve: true }),
        ApproverPolicy::DenyAll => Box::new(Fixed { approve: false }),
        ApproverPolicy::Rules => Box::new(RulesApprover::new(&config.approve)?),
        ApproverPolicy::Script => {
            let script = config.script.clone().ok_or(ApproverError::MissingScript)?;
            Box::new(ScriptApprover { script, cwd })
        }
        ApproverPolicy::Interactive => return Err(ApproverError::Interactive),
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

/// Approves a call when every part that needs approval matches a glob, so
/// that `python3 -m unittest*` approves the test run but not
/// `python3 -m unittest && git push`. A call with no parts (the whole call
/// asks) is matched by its command, or its tool name when it runs none. A
/// call that runs no script is also approved when its tool name matches
/// (`str_replace`); a script never is by its tool name, or `bash` would
/// approve every command.
pub struct RulesApprover {
    globs: globset::GlobSet,
    patterns: Vec<String>,
}

impl RulesApprover {
    pub fn new(patterns: &[String]) -> Result<RulesApprover, ApproverError> {
        let invalid = |pattern: &str, error: globset::Error| ApproverError::InvalidGlob {
            pattern: pattern.to_string(),
            reason: error.to_string(),
        };
        let mut builder = globset::GlobSetBuilder::new();
        for pattern in patterns {
            builder.add(globset::Glob::new(pattern).map_err(|e| invalid(pattern, e))?);
        }
        let globs = builder
            .build()
            .map_err(|e| invalid(&patterns.join(", "), e))?;
        Ok(RulesApprover {
            globs,
            patterns: patterns.to_vec(),
        })
    }
}

impl RulesApprover {
    /// The patterns that approve the request, or the first subject no
    /// pattern matches.
    fn verdict<'r>(&self, request: &'r ApprovalRequest) -> Result<Vec<usize>, &'r str> {
        if request.command.is_none()
            && let Some(&by_name) = self.globs.matches(&request.tool).first()
        {
            return Ok(vec![by_name]);
        }
        let whole = [request.command.as_deref().unwrap_or(&request.tool)];
        let subjects: Vec<&str> = if request.parts.is_empty() {
            whole.to_vec()
        } else {
            request.parts.iter().map(String::as_str).collect()
        };
        let mut used = Vec::new();
        for subject in subjects {
            let &first = self.globs.matches(subject).first().ok_or(subject)?;
            if !used.contains(&first) {
                used.push(first);
            }
        }
        Ok(used)
    }
}

#[async_trait]
impl Approver for RulesApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let verdict = self.verdict(request);
        let reason = match &verdict {
            Ok(used) => {
                let patterns: Vec<String> = used
                    .iter()
                    .map(|&i| format!("`{}`", self.patterns[i]))
                    .collect();
                format!("matches {}", patterns.join(", "))
            }
            Err(unmatched) => format!("no approve rule matches `{unmatched}`"),
        };
        ApprovalDecision {
            approved: verdict.is_ok(),
            approver: "rules".to_string(),
            reason: Some(reason),
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
        // The operator's program gets the operator's environment (a
        // reviewer that asks a model needs its key), and the request.
        let mut env: Vec<(String, String)> = std::env::vars().collect();
        env.push(("TACK_APPROVAL_REQUEST".to_string(), input));
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
        let first = |text: &str| {
            text.lines()
                .find(|line| !line.trim().is_empty())
                .map(str::to_string)
        };
        match tack_sandbox::run(&spec).await {
            // A reviewer that could not run decided nothing: said, so that
            // a typo in its path does not pass for a stern reviewer.
            Ok(output) if output.timed_out => ApprovalDecision {
                approved: false,
                approver,
                reason: Some("the reviewer did not answer within 60 s; denied".to_string()),
            },
            Ok(output) if matches!(output.exit_code, Some(126 | 127)) => ApprovalDecision {
                approved: false,
                reason: Some(format!(
                    "the reviewer could not run (exit {}: {}); denied",
                    output.exit_code.unwrap_or_default(),
                    first(&output.stderr).unwrap_or_default()
                )),
                approver,
            },
            Ok(output) => ApprovalDecision {
                approved: output.success(),
                approver,
                reason: first(&output.stdout).or_else(|| first(&output.stderr)),
            },
            Err(error) => ApprovalDecision {
                approved: false,
                approver,
                reason: Some(format!("the reviewer could not run: {error}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `bash` call whose only asking part is the whole command.
    fn request(command: &str) -> ApprovalRequest {
        asking(command, &[command])
    }

    fn asking(command: &str, parts: &[&str]) -> ApprovalRequest {
        ApprovalRequest {
            tool: "bash".to_string(),
            arguments: format!("{{\"command\": \"{command}\"}}"),
            command: Some(command.to_string()),
            rule: "rules[1]".to_string(),
            part: parts.first().unwrap_or(&command).to_string(),
            parts: parts.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn rules(patterns: &[&str]) -> RulesApprover {
        RulesApprover::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[tokio::test]
    async fn rules_approve_only_what_matches() {
        let approver = rules(&["python3 -m unittest*"]);
        let yes = approver.decide(&request("python3 -m unittest -q")).await;
        assert!(yes.approved);
        assert_eq!(
            yes.reason.as_deref(),
            Some("matches `python3 -m unittest*`")
        );
        assert!(!approver.decide(&request("python3 evil.py")).await.approved);
    }

    #[tokio::test]
    async fn every_asking_part_must_match() {
        let approver = rules(&["python3 -m unittest*", "git status"]);
        let chained = asking(
            "python3 -m unittest && git push --force",
            &["python3 -m unittest", "git push --force"],
        );
        let no = approver.decide(&chained).await;
        assert!(!no.approved);
        assert_eq!(
            no.reason.as_deref(),
            Some("no approve rule matches `git push --force`")
        );
        // Parts the rules allowed are not asked about: `tail` is not listed.
        let piped = asking(
            "python3 -m unittest -q 2>&1 | tail -5",
            &["python3 -m unittest -q"],
        );
        assert!(approver.decide(&piped).await.approved);
        let both = asking(
            "git status; python3 -m unittest",
            &["git status", "python3 -m unittest"],
        );
        let yes = approver.decide(&both).await;
        assert!(yes.approved);
        assert_eq!(
            yes.reason.as_deref(),
            Some("matches `git status`, `python3 -m unittest*`")
        );
    }

    #[tokio::test]
    async fn tools_without_a_script_match_by_name_and_scripts_never_do() {
        let approver = rules(&["str_replace", "bash"]);
        let edit = ApprovalRequest {
            tool: "str_replace".to_string(),
            arguments: "{}".to_string(),
            command: None,
            rule: "rules[20]".to_string(),
            part: "write a.py (str_replace)".to_string(),
            parts: vec!["write a.py (str_replace)".to_string()],
        };
        assert!(approver.decide(&edit).await.approved);
        assert!(!approver.decide(&request("rm x")).await.approved);
        // `requires_approval`: no parts, the command is the subject.
        let whole = asking("python3 -m unittest", &[]);
        assert!(!approver.decide(&whole).await.approved);
        assert!(rules(&["python3 *"]).decide(&whole).await.approved);
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

    /// A reviewer that is not there, or cannot run, decided nothing: the
    /// call is denied, saying why, not as if a reviewer had said no.
    #[tokio::test]
    async fn a_reviewer_that_cannot_run_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let config = ApproverConfig {
            policy: ApproverPolicy::Script,
            approve: vec![],
            script: Some("./no-such-reviewer.sh".to_string()),
        };
        let approver = approver_for(&config, dir.path().to_path_buf()).unwrap();
        let no = approver.decide(&request("ls")).await;
        assert!(!no.approved);
        let reason = no.reason.unwrap_or_default();
        assert!(
            reason.starts_with("the reviewer could not run (exit 127"),
            "{reason}"
        );
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
