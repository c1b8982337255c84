//! Permission checks and approval gates in front of every tool call. The
//! model cannot bypass them: a call is judged before the dispatcher sees it,
//! and a refusal comes back as a result the model can act on.

use std::time::Instant;

use serde::Serialize;
use tack_protocol::ToolCall;

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
}

/// Judges tool calls against permission rules.
pub trait PermissionGate: Send + Sync {
    fn judge(&self, tool: &str, arguments: &serde_json::Value) -> GateDecision;
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

    pub(crate) async fn clear(&self, call: &ToolCall) -> Clearance {
        let Some(decision) = self.judge(call) else {
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
            GateVerdict::Ask => self.ask(call, decision).await,
        }
    }

    /// The verdict for a call, or `None` when nothing applies. Calls whose
    /// arguments are not JSON are left to the dispatcher, which refuses them.
    fn judge(&self, call: &ToolCall) -> Option<GateDecision> {
        let arguments: serde_json::Value = serde_json::from_str(&call.arguments).ok()?;
        let mut decision = self
            .gate
            .as_ref()
            .map(|gate| gate.judge(&call.name, &arguments));
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
            });
        }
        decision
    }

    async fn ask(&self, call: &ToolCall, decision: GateDecision) -> Clearance {
        let command = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|v| {
                v.get("command")
                    .and_then(|c| c.as_str())
                    .map(str::to_string)
            })
            .filter(|_| call.name == "bash");
        let request = ApprovalRequest {
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            command,
            rule: decision.rule.clone(),
            part: decision.part.clone(),
        };
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
