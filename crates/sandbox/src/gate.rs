//! Whether a test that needs kernel confinement may run here. On a machine
//! without (say) Landlock such a test can only skip, but a skip must not
//! pass for a pass where the sandbox is meant to be tested: with
//! `TACK_REQUIRE_SANDBOX=1` (CI sets it) the test fails instead.

use tack_protocol::SandboxProfile;

use crate::{check_profile, probe};

/// Set to `1` to make tests fail, not skip, when a profile they need
/// cannot be enforced on this machine.
pub const REQUIRE_ENV: &str = "TACK_REQUIRE_SANDBOX";

/// What a test that needs a profile should do here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestGate {
    /// The profile can be enforced: run the test.
    Run,
    /// It cannot, and nothing requires it: report `skipped: <why>` and pass.
    Skip(String),
    /// It cannot, and [`REQUIRE_ENV`] says it must: fail with the reason.
    Fail(String),
}

/// Whether [`REQUIRE_ENV`] is set to `1`.
pub fn sandbox_required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|value| value.trim() == "1")
}

/// Whether a test needing `profile` runs, skips or fails on this machine
/// (this library never prints: the test reports the reason).
pub fn test_gate(profile: SandboxProfile) -> TestGate {
    match check_profile(profile, probe()) {
        Ok(()) => TestGate::Run,
        // The error names the profile, what is missing and how to enable it.
        Err(error) => gate_for(error.to_string()),
    }
}

/// The gate for a test that cannot run for `reason` (a mechanism the test
/// found missing by other means, e.g. through the `tack` binary).
pub fn gate_for(reason: String) -> TestGate {
    if sandbox_required() {
        TestGate::Fail(format!(
            "{REQUIRE_ENV}=1 requires the sandbox, but {reason}"
        ))
    } else {
        TestGate::Skip(reason)
    }
}
