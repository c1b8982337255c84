//! The permission gate a variant's configuration asks for.

use std::path::Path;

use tack_agent::{GateDecision, GateVerdict, PermissionGate};
use tack_permissions::{PermissionEngine, Rules, RulesError, Verdict};
use tack_protocol::{HarnessConfig, ToolAccess};

/// The permission engine seen through the agent's gate.
struct EngineGate(PermissionEngine);

impl PermissionGate for EngineGate {
    fn judge(&self, tool: &str, access: &[ToolAccess]) -> GateDecision {
        let decision = self.0.judge_tool_call(tool, access);
        GateDecision {
            verdict: match decision.verdict {
                Verdict::Allow => GateVerdict::Allow,
                Verdict::Ask => GateVerdict::Ask,
                Verdict::Deny => GateVerdict::Deny,
            },
            rule: decision.rule,
            part: decision.part,
            reason: decision.reason,
            asking: decision.asking,
        }
    }
}

/// `permissions` absent: no gate. `"default"`: the built-in profile. Anything
/// else: a rules file, relative to `base` (the suite directory).
pub fn gate_for(
    config: &HarnessConfig,
    base: &Path,
    workspace: &Path,
) -> Result<Option<Box<dyn PermissionGate>>, RulesError> {
    let Some(source) = &config.permissions else {
        return Ok(None);
    };
    let rules = if source == "default" {
        Rules::default_profile()
    } else {
        Rules::load(&base.join(source))?
    };
    Ok(Some(Box::new(EngineGate(PermissionEngine::new(
        rules, workspace,
    )))))
}
