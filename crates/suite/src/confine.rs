//! How the suite's own commands are confined. Setup commands, solution
//! scripts and hidden checks all run code the agent may have written or
//! edited (a check imports the agent's module; a setup step runs a fixture
//! script), so they run under the same kernel sandbox as the agent's commands.

use std::path::{Path, PathBuf};

use tack_protocol::SandboxProfile;
use tack_sandbox::Confinement;

/// The profile of the variant (or `strict` for `suite check`) and the paths
/// nobody in the trial may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSandbox {
    pub profile: SandboxProfile,
    pub hidden: Vec<PathBuf>,
}

impl CommandSandbox {
    pub fn new(profile: SandboxProfile, hidden: Vec<PathBuf>) -> CommandSandbox {
        CommandSandbox { profile, hidden }
    }

    /// The confinement for one command in `workspace`. `network` is what a
    /// task declares for a step that needs it (`network = true` on a check,
    /// `setup_network = true` in `[environment]`): under `strict` that step
    /// alone gets the `workspace_write` profile, which differs only by the
    /// network; every other wall stays. The checks root is sealed as the
    /// workspaces are: a check runs the agent's code, and other trials'
    /// hidden checks are verifying there (a check is shown its own copy by
    /// [`Confinement::exposing_read_only`] or a placement).
    pub fn confinement(&self, workspace: &Path, network: bool) -> Confinement {
        let walls = match self.profile {
            // Only the network: the credential directories stay covered.
            SandboxProfile::Strict if network => Confinement::strict_with_network(workspace),
            profile => Confinement::for_profile(profile, workspace),
        };
        walls
            .hiding(self.hidden.iter().cloned())
            .sealing([workspaces_root(), checks_root()])
            .sealing(roots_of_others())
    }

    /// The confinement for a step whose needs the task declares (a setup
    /// command, a check): the network only when it says `network`, whatever
    /// the variant's profile gives the agent, so a hidden check's verdict
    /// does not depend on the agent's sandbox. `off` stays off: the walls
    /// are the machine's to turn off, not the task's.
    pub fn declared(&self, workspace: &Path, network: bool) -> Confinement {
        let sandbox = match self.profile {
            SandboxProfile::Off => self.clone(),
            _ => CommandSandbox {
                profile: SandboxProfile::Strict,
                hidden: self.hidden.clone(),
            },
        };
        sandbox.confinement(workspace, network)
    }

    /// How an agent's commands are confined in `workspace`: the profile,
    /// with the hidden paths (the suite's tasks, the traces) and the checks
    /// root covered, since other trials verify there while this agent
    /// works, and the other trials' workspaces sealed. tack's own loop and
    /// external agents (`[variants.agent]`) run under the same walls.
    pub fn agent_confinement(&self, workspace: &Path) -> Confinement {
        let covered = self.hidden.iter().cloned().chain([checks_root()]);
        // The checks root is sealed as well as hidden: in /tmp, where the
        // command sees what is there while it runs, sealed is covered made
        // yet or not.
        Confinement::for_profile(self.profile, workspace)
            .hiding(covered.filter(|p| p.is_dir()))
            .sealing([workspaces_root(), checks_root()])
            .sealing(roots_of_others())
    }
}

/// The roots where a tack with `TMPDIR` unset makes its trials' workspaces
/// and checks, when this one's are elsewhere: sealed too, made yet or not
/// (the sandbox covers a root in /tmp either way), so that two runs on one
/// machine, one with `TMPDIR` set and one without, do not show each other's
/// trials to their commands. (A `TMPDIR` of another run's own, set
/// elsewhere, is not known here.)
fn roots_of_others() -> Vec<PathBuf> {
    let default = Path::new("/tmp");
    [default.join("tack-trials"), default.join("tack-checks")]
        .into_iter()
        .filter(|root| *root != workspaces_root() && *root != checks_root())
        .collect()
}

/// Where every trial's workspace is made. Commands may list it but not
/// read inside it, but for their own workspace: a concurrent trial's
/// workspace (the oracle's, already solved) is no business of theirs.
pub fn workspaces_root() -> PathBuf {
    std::env::temp_dir().join("tack-trials")
}

/// Where the hidden checks are copied for a trial's verification. Agents'
/// commands must not see it (a concurrent trial of the same task is
/// verifying there), so the runner hides this directory from them; the
/// checks themselves see their own copy.
pub fn checks_root() -> PathBuf {
    std::env::temp_dir().join("tack-checks")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_step_has_the_network_only_when_it_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let online = CommandSandbox::new(SandboxProfile::WorkspaceWrite, vec![]);
        assert_eq!(
            online.declared(dir.path(), false).profile,
            SandboxProfile::Strict
        );
        assert_eq!(
            online.declared(dir.path(), true).profile,
            SandboxProfile::WorkspaceWrite
        );
        let off = CommandSandbox::new(SandboxProfile::Off, vec![]);
        assert_eq!(off.declared(dir.path(), false).profile, SandboxProfile::Off);
    }

    #[test]
    fn network_relaxes_only_strict_and_keeps_the_hidden_paths() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = CommandSandbox::new(SandboxProfile::Strict, vec![dir.path().join("x")]);
        let plain = sandbox.confinement(dir.path(), false);
        assert_eq!(plain.profile, SandboxProfile::Strict);
        assert!(plain.hidden.contains(&dir.path().join("x")));
        let online = sandbox.confinement(dir.path(), true);
        assert_eq!(online.profile, SandboxProfile::WorkspaceWrite);
        assert!(online.hidden.contains(&dir.path().join("x")));
        let off = CommandSandbox::new(SandboxProfile::Off, Vec::new());
        assert_eq!(
            off.confinement(dir.path(), true).profile,
            SandboxProfile::Off
        );
    }
}
