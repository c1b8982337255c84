//! The sandbox profile as a command-line value, shared by every command
//! that runs something confined (`sandbox exec`, `exec`, `suite check`).

use clap::ValueEnum;
use tack_protocol::SandboxProfile;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ProfileArg {
    /// Writes only to the workspace and a private tmp; .git read-only; no network.
    Strict,
    /// As strict, with the host's network.
    #[value(alias = "workspace_write")]
    WorkspaceWrite,
    /// No kernel confinement at all (process group, timeout, output cap and env scrub only).
    Off,
}

impl From<ProfileArg> for SandboxProfile {
    fn from(arg: ProfileArg) -> Self {
        match arg {
            ProfileArg::Strict => SandboxProfile::Strict,
            ProfileArg::WorkspaceWrite => SandboxProfile::WorkspaceWrite,
            ProfileArg::Off => SandboxProfile::Off,
        }
    }
}
