//! Permission checks and approval gates in front of every tool call. The
//! model cannot bypass them: a call is judged before the dispatcher sees it,
//! and a refusal comes back as a result the model can act on.

use std::time::Instant;

use serde::Serialize;
use tack_protocol::{ToolAccess, ToolCall};

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateVerdict {
    Allow,
    Ask,
    Deny,
}

impl GateVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Allow => "allow",
            GateVerdict::Ask => "ask",
            GateVerdict::Deny => "deny",
        }
    }
}

/// A permission verdict with the rule that made it and the part of the call
/// it was about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateDecision {
    pub verdict: GateVerdict,
    pub rule: String,
    pub part: String,
    pub reason: String,
    /// Every part of the call whose verdict was ask (`part` is only the one
    /// that decided): what an approver has to approve.
    pub asking: Vec<String>,
}

/// Judges tool calls against permission rules, by what the tool declares
/// the call will do (computed from its validated arguments), not by
/// knowing each tool's arguments.
pub trait PermissionGate: Send + Sync {
    fn judge(&self, tool: &str, access: &[ToolAccess]) -> GateDecision;
}

/// What happened at the gate.
#[derive(Debug, Clone, Default)]
pub(crate) struct Clearance {
    pub decision: Option<GateDecision>,
    /// Set when an approver was asked: an intervention.
    pub approval: Option<(ApprovalRequest, ApprovalDecision, u64)>,
    /// `None` when the call may run; otherwise the message for the model.
    pub refusal: Option<String>,
}

pub struct Gatekeeper {
    gate: Option<Box<dyn PermissionGate>>,
    requires_approval: Vec<String>,
    approver: Box<dyn Approver>,
}

impl std::fmt::Debug for Gatekeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gatekeeper")
            .field("rules", &self.gate.is_some())
            .field("requires_approval", &self.requires_approval)
            .finish()
    }
}

impl Gatekeeper {
    pub fn new(
        gate: Option<Box<dyn PermissionGate>>,
        requires_approval: Vec<String>,
        approver: Box<dyn Approver>,
    ) -> Gatekeeper {
        Gatekeeper {
            gate,
            requires_approval,
            approver,
        }
    }

    /// Lets every call through: no rules, nothing requires approval.
    pub fn open() -> Gatekeeper {
        struct Nobody;
        #[async_trait::async_trait]
        impl Approver for Nobody {
            async fn decide(&self, _: &ApprovalRequest) -> ApprovalDecision {
                ApprovalDecision {
                    approved: false,
                    approver: "none".to_string(),
                    reason: None,
                }
            }
        }
        Gatekeeper::new(None, Vec::new(), Box::new(Nobody))
    }

    /// Judges `call`, whose tool declared `access`, and asks the approver
    /// when the verdict is ask.
    /// `asking` hears of a request before the approver is asked (the
    /// session records it, so a resumed session knows the call waited).
    pub(crate) async fn clear(
        &self,
        call: &ToolCall,
        access: &[ToolAccess],
        asking: &mut (dyn FnMut(&ApprovalRequest) + Send),
    ) -> Clearance {
        let Some(decision) = self.judge(call, access) else {
            return Clearance {
                decision: None,
                approval: None,
                refusal: None,
            };
        };
        match decision.verdict {
            GateVerdict::Allow => Clearance {
                decision: Some(decision),
                approval: None,
                refusal: None,
            },
            GateVerdict::Deny => Clearance {
                refusal: Some(format!(
                    "this call is not permitted ({}: {}). Do not retry it; find another way or tell the user what you need.",
                    decision.rule, decision.reason
                )),
                decision: Some(decision),
                approval: None,
            },
            GateVerdict::Ask => self.ask(call, access, decision, asking).await,
        }
    }

    /// The verdict for a call, or `None` when nothing applies.
    fn judge(&self, call: &ToolCall, access: &[ToolAccess]) -> Option<GateDecision> {
        let mut decision = self
            .gate
            .as_ref()
            .map(|gate| gate.judge(&call.name, access));
        if self.requires_approval.contains(&call.name)
            && decision
                .as_ref()
                .is_none_or(|d| d.verdict == GateVerdict::Allow)
        {
            decision = Some(GateDecision {
                verdict: GateVerdict::Ask,
                rule: "requires_approval".to_string(),
                part: call.name.clone(),
                reason: format!(
                    "the harness configuration requires approval for `{}`",
                    call.name
                ),
                // The call as a whole asks, not any part of it.
                asking: Vec::new(),
            });
        }
        decision
    }

    async fn ask(
        &self,
        call: &ToolCall,
        access: &[ToolAccess],
        decision: GateDecision,
        asking: &mut (dyn FnMut(&ApprovalRequest) + Send),
    ) -> Clearance {
        let request = ApprovalRequest {
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            command: script(access).map(str::to_string),
            rule: decision.rule.clone(),
            part: decision.part.clone(),
            parts: decision.asking.clone(),
        };
        asking(&request);
        let clock = Instant::now();
        let answer = self.approver.decide(&request).await;
        let waited = clock.elapsed().as_millis() as u64;
        let refusal = (!answer.approved).then(|| {
            format!(
                "the approver ({}) denied this call{}. Do something else, or explain what you need and why.",
                answer.approver,
                answer.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            )
        });
        Clearance {
            decision: Some(decision),
            approval: Some((request, answer, waited)),
            refusal,
        }
    }
}

/// The script a call runs, when it runs exactly one: with several, no one
/// of them is "the" command, and the approver goes by the parts.
fn script(access: &[ToolAccess]) -> Option<&str> {
    let mut scripts = access.iter().filter_map(|a| match a {
        ToolAccess::Execute(script) => Some(script.as_str()),
        _ => None,
    });
    match (scripts.next(), scripts.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::approval::RulesApprover;

    /// Asks about every command of a `;`/`&&` list, as an engine whose
    /// rules ask about them all would.
    struct AsksEachCommand;

    impl PermissionGate for AsksEachCommand {
        fn judge(&self, tool: &str, access: &[ToolAccess]) -> GateDecision {
            let asking: Vec<String> = access
                .iter()
                .flat_map(|a| match a {
                    ToolAccess::Execute(script) => script
                        .split(['&', ';'])
                        .map(str::trim)
                        .filter(|c| !c.is_empty())
                        .map(str::to_string)
                        .collect(),
                    ToolAccess::Read(path) | ToolAccess::Write(path) => {
                        vec![format!("write {path} ({tool})")]
                    }
                    ToolAccess::Hinted(_) => vec![tool.to_string()],
                })
                .collect();
            GateDecision {
                verdict: GateVerdict::Ask,
                rule: "rules[0]".to_string(),
                part: asking.first().cloned().unwrap_or_default(),
                reason: "test".to_string(),
                asking,
            }
        }
    }

    fn keeper(approve: &[&str], requires: &[&str]) -> Gatekeeper {
        let patterns: Vec<String> = approve.iter().map(|p| p.to_string()).collect();
        Gatekeeper::new(
            Some(Box::new(AsksEachCommand)),
            requires.iter().map(|t| t.to_string()).collect(),
            Box::new(RulesApprover::new(&patterns).unwrap()),
        )
    }

    fn call(tool: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".to_string(),
            name: tool.to_string(),
            arguments: arguments.to_string(),
        }
    }

    #[tokio::test]
    async fn the_approver_sees_every_asking_part_and_the_script() {
        let gate = keeper(&["python3 -m unittest*"], &[]);
        let script = "python3 -m unittest && git push";
        let cleared = gate
            .clear(
                &call("bash", "{}"),
                &[ToolAccess::Execute(script.to_string())],
                &mut |_| {},
            )
            .await;
        let (request, answer, _) = cleared.approval.unwrap();
        assert_eq!(request.command.as_deref(), Some(script));
        assert_eq!(request.parts, ["python3 -m unittest", "git push"]);
        assert!(!answer.approved);
        assert!(cleared.refusal.unwrap().contains("`git push`"));

        let alone = gate
            .clear(
                &call("bash", "{}"),
                &[ToolAccess::Execute("python3 -m unittest -q".to_string())],
                &mut |_| {},
            )
            .await;
        assert!(alone.refusal.is_none());
    }

    #[tokio::test]
    async fn a_tool_that_runs_no_script_has_no_command() {
        let gate = keeper(&["str_replace"], &[]);
        let cleared = gate
            .clear(
                &call("str_replace", "{\"path\": \"a.py\"}"),
                &[ToolAccess::Write("a.py".to_string())],
                &mut |_| {},
            )
            .await;
        let (request, answer, _) = cleared.approval.unwrap();
        assert_eq!(request.command, None);
        assert_eq!(request.parts, ["write a.py (str_replace)"]);
        assert!(answer.approved, "{answer:?}");
    }

    #[tokio::test]
    async fn requires_approval_asks_about_the_whole_call() {
        let gate = Gatekeeper::new(
            None,
            vec!["bash".to_string()],
            Box::new(RulesApprover::new(&["ls *".to_string()]).unwrap()),
        );
        let cleared = gate
            .clear(
                &call("bash", "{}"),
                &[ToolAccess::Execute("ls -la".to_string())],
                &mut |_| {},
            )
            .await;
        let (request, answer, _) = cleared.approval.unwrap();
        assert_eq!(request.rule, "requires_approval");
        assert!(request.parts.is_empty());
        assert!(answer.approved);
        let other = gate.clear(&call("read_file", "{}"), &[], &mut |_| {}).await;
        assert!(other.decision.is_none() && other.refusal.is_none());
    }
}
