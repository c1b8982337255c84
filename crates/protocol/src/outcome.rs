use serde::{Deserialize, Serialize};
use std::fmt;

/// Why the agent loop ended. A trial that stopped for any reason but
/// `Completed` is never reported as completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without asking for a tool.
    Completed,
    StepLimit,
    TimeLimit,
    TokenLimit,
    CostLimit,
    /// The model refused the request or answered unusably (a client error,
    /// a context-length error, garbage after retries).
    ModelError,
    /// The provider stayed unreachable or overloaded (transport errors, 5xx,
    /// 429) through every retry: an outage, not the model's doing.
    ProviderUnavailable,
    /// tack itself failed (could not record, could not run a tool at all).
    HarnessError,
    /// The agent never started: the task's environment could not be set up
    /// (its image did not build, its workspace or services failed).
    EnvironmentError,
    Cancelled,
}

impl StopReason {
    pub const ALL: [StopReason; 10] = [
        StopReason::Completed,
        StopReason::StepLimit,
        StopReason::TimeLimit,
        StopReason::TokenLimit,
        StopReason::CostLimit,
        StopReason::ModelError,
        StopReason::ProviderUnavailable,
        StopReason::HarnessError,
        StopReason::EnvironmentError,
        StopReason::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::StepLimit => "step_limit",
            StopReason::TimeLimit => "time_limit",
            StopReason::TokenLimit => "token_limit",
            StopReason::CostLimit => "cost_limit",
            StopReason::ModelError => "model_error",
            StopReason::ProviderUnavailable => "provider_unavailable",
            StopReason::HarnessError => "harness_error",
            StopReason::EnvironmentError => "environment_error",
            StopReason::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<StopReason> {
        StopReason::ALL.into_iter().find(|r| r.as_str() == text)
    }

    pub fn is_limit(self) -> bool {
        matches!(
            self,
            StopReason::StepLimit
                | StopReason::TimeLimit
                | StopReason::TokenLimit
                | StopReason::CostLimit
        )
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a trial came to, after the agent stopped and the checks ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    /// The agent completed and every hidden check passed.
    Passed,
    /// The agent completed and nothing checked its work: `tack exec`
    /// without `--check`. Never a suite trial's outcome (every task has
    /// checks), and never counted as a pass.
    Unverified,
    /// The agent completed but a hidden check failed.
    VerificationFailed,
    /// The agent was stopped by a step, time, token or cost limit.
    Limit,
    ModelError,
    HarnessError,
    /// Not the agent's doing nor tack's: the task's environment could not be
    /// prepared or checked (sandbox setup, workspace I/O), or the provider
    /// was down through every retry. `--infra-retries` runs such a trial
    /// again.
    InfraError,
    Cancelled,
}

impl TrialOutcome {
    pub const ALL: [TrialOutcome; 8] = [
        TrialOutcome::Passed,
        TrialOutcome::Unverified,
        TrialOutcome::VerificationFailed,
        TrialOutcome::Limit,
        TrialOutcome::ModelError,
        TrialOutcome::HarnessError,
        TrialOutcome::InfraError,
        TrialOutcome::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TrialOutcome::Passed => "passed",
            TrialOutcome::Unverified => "unverified",
            TrialOutcome::VerificationFailed => "verification_failed",
            TrialOutcome::Limit => "limit",
            TrialOutcome::ModelError => "model_error",
            TrialOutcome::HarnessError => "harness_error",
            TrialOutcome::InfraError => "infra_error",
            TrialOutcome::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<TrialOutcome> {
        TrialOutcome::ALL.into_iter().find(|o| o.as_str() == text)
    }

    /// The outcome of a trial whose agent stopped for `stop` and whose checks
    /// passed (`Some(true)`), failed (`Some(false)`) or did not run (`None`).
    pub fn decide(stop: StopReason, checks_passed: Option<bool>) -> TrialOutcome {
        match stop {
            StopReason::Completed => match checks_passed {
                Some(true) => TrialOutcome::Passed,
                Some(false) => TrialOutcome::VerificationFailed,
                None => TrialOutcome::InfraError,
            },
            StopReason::StepLimit
            | StopReason::TimeLimit
            | StopReason::TokenLimit
            | StopReason::CostLimit => TrialOutcome::Limit,
            StopReason::ModelError => TrialOutcome::ModelError,
            StopReason::ProviderUnavailable | StopReason::EnvironmentError => {
                TrialOutcome::InfraError
            }
            StopReason::HarnessError => TrialOutcome::HarnessError,
            StopReason::Cancelled => TrialOutcome::Cancelled,
        }
    }
}

impl fmt::Display for TrialOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for reason in StopReason::ALL {
            assert_eq!(StopReason::parse(reason.as_str()), Some(reason));
        }
        for outcome in TrialOutcome::ALL {
            assert_eq!(TrialOutcome::parse(outcome.as_str()), Some(outcome));
        }
    }

    #[test]
    fn a_stopped_trial_is_never_passed() {
        for reason in StopReason::ALL {
            if reason != StopReason::Completed {
                assert_ne!(
                    TrialOutcome::decide(reason, Some(true)),
                    TrialOutcome::Passed
                );
            }
        }
        assert_eq!(
            TrialOutcome::decide(StopReason::Completed, Some(false)),
            TrialOutcome::VerificationFailed
        );
    }
}
