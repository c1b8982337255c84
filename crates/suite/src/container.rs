//! Engine mode's trial container: started when the trial's directory is
//! made, with the workspace bound at the image's `WORKDIR`, removed with
//! the directory. A run killed before it removed its containers leaves
//! them labelled with their trial directory; the next run removes those
//! whose directory no living trial holds.

use std::path::Path;

use tack_image::{Bind, ContainerSpec, Engine};
use tack_protocol::SandboxProfile;
use tack_sandbox::{IMAGE_ID_BASE, IMAGE_IDS};

use crate::{CommandSandbox, SuiteError, Task, TaskImage};

/// Where a trial's agent logs are, in its container (Harbor's).
const AGENT_LOGS_AT: &str = "/logs/agent";

/// A running trial container; removed when dropped.
#[derive(Debug)]
pub(crate) struct TrialContainer {
    engine: Engine,
    name: String,
}

impl TrialContainer {
    /// Starts the container of the trial in `trial` (its workspace in
    /// `workspace`). It has the network when anything of the trial may use
    /// it: the variant's profile, the task's setup, one of its checks; the
    /// container's network is one for all its commands.
    pub(crate) fn start(
        task: &Task,
        image: &TaskImage,
        trial: &Path,
        workspace: &Path,
        sandbox: &CommandSandbox,
    ) -> Result<TrialContainer, SuiteError> {
        let engine = Engine {
            kind: image.engine,
            version: String::new(),
        };
        sweep_once(&engine);
        let fail = |message: String| SuiteError::Environment {
            task: task.id.clone(),
            message,
        };
        let logs = trial.join("agent-logs");
        std::fs::create_dir_all(&logs).map_err(|e| SuiteError::io(&logs, e))?;
        let agent = image.agent_user.unwrap_or(image.user);
        crate::copy::own(
            &logs,
            Some((IMAGE_ID_BASE + agent.uid, IMAGE_ID_BASE + agent.gid)),
        )
        .map_err(|e| SuiteError::io(&logs, e))?;
        let mut binds = vec![
            Bind {
                host: workspace.to_path_buf(),
                at: image.workdir.clone(),
                writable: true,
            },
            Bind {
                host: logs,
                at: AGENT_LOGS_AT.to_string(),
                writable: true,
            },
        ];
        if let Some(dir) = &image.stand_ins {
            binds.push(Bind {
                host: dir.clone(),
                at: crate::IMAGE_STAND_INS_AT.to_string(),
                writable: false,
            });
        }
        let network = sandbox.profile != SandboxProfile::Strict
            || task.environment.setup_network
            || task.checks.iter().any(|check| check.network);
        let name = tack_image::container_name(trial);
        let spec = ContainerSpec {
            image: &image.id,
            name: &name,
            trial,
            network,
            id_base: IMAGE_ID_BASE,
            id_count: IMAGE_IDS,
            binds: &binds,
            cpus: task.environment.cpus,
            memory_mb: task.environment.memory_mb,
        };
        engine
            .start_container(&spec)
            .map_err(|e| fail(format!("the trial's container could not start: {e}")))?;
        Ok(TrialContainer { engine, name })
    }
}

impl Drop for TrialContainer {
    fn drop(&mut self) {
        // Best effort: what stays is removed by the next run's sweep.
        let _ = self.engine.remove_container(&self.name);
    }
}

/// Removes, once per process, the trial containers whose trial directory
/// is gone or held by no living trial (a killed run's).
fn sweep_once(engine: &Engine) {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let Ok(containers) = engine.trial_containers() else {
            return;
        };
        for (name, trial) in containers {
            if !tack_sandbox::held::held(&trial) {
                let _ = engine.remove_container(&name);
            }
        }
    });
}
