//! Engine mode's trial container: started when the trial's directory is
//! made, with the workspace bound at the image's `WORKDIR`, removed with
//! the directory. A run killed before it removed its containers leaves
//! them labelled with their trial directory; the next run removes those
//! whose directory no living trial holds.

use std::path::Path;

use tack_image::{Bind, ContainerSpec, Engine, ServiceSpec};
use tack_protocol::SandboxProfile;
use tack_sandbox::{IMAGE_ID_BASE, IMAGE_IDS};

use crate::{CommandSandbox, SuiteError, Task, TaskImage};

/// Where a trial's agent logs are, in its container (Harbor's).
const AGENT_LOGS_AT: &str = "/logs/agent";

/// A running trial container and its services' containers; removed when
/// dropped.
#[derive(Debug)]
pub(crate) struct TrialContainer {
    pub(crate) engine: Engine,
    name: String,
    /// The services' containers started so far, with the services' names.
    pub(crate) services: Vec<(String, String)>,
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
        let hosts: Vec<String> = image.services.iter().map(|s| s.name.clone()).collect();
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
            hosts: &hosts,
        };
        engine
            .start_container(&spec)
            .map_err(|e| fail(format!("the trial's container could not start: {e}")))?;
        let mut container = TrialContainer {
            engine,
            name,
            services: Vec::new(),
        };
        if !image.services.is_empty() {
            container.start_services(task, image, trial, &fail)?;
        }
        Ok(container)
    }

    /// Starts the task's services beside the trial's container, in the
    /// task's order; one that cannot start fails the trial's setup (the
    /// ones started are removed with the container).
    fn start_services(
        &mut self,
        task: &Task,
        image: &TaskImage,
        trial: &Path,
        fail: &dyn Fn(String) -> SuiteError,
    ) -> Result<(), SuiteError> {
        let hosts_file = trial.join("hosts");
        let mut hosts = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.0.1\tmain");
        for service in &image.services {
            hosts.push(' ');
            hosts.push_str(&service.name);
        }
        hosts.push('\n');
        std::fs::write(&hosts_file, hosts).map_err(|e| SuiteError::io(&hosts_file, e))?;
        for (service, declared) in image.services.iter().zip(&task.environment.services) {
            let name = tack_image::service_container_name(trial, &service.name);
            let env: Vec<(String, String)> = declared
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let spec = ServiceSpec {
                image: &service.id,
                name: &name,
                trial,
                beside: &self.name,
                env: &env,
                command: declared.command.as_deref(),
                hosts_file: &hosts_file,
            };
            self.engine
                .start_service(&spec)
                .map_err(|e| fail(format!("service `{}` could not start: {e}", service.name)))?;
            self.services.push((service.name.clone(), name));
        }
        Ok(())
    }
}

impl Drop for TrialContainer {
    fn drop(&mut self) {
        // Best effort: what stays is removed by the next run's sweep. The
        // services first: an engine keeps a container whose network others
        // joined.
        for (_, name) in self.services.iter().rev() {
            let _ = self.engine.remove_container(name);
        }
        let _ = self.engine.remove_container(&self.name);
    }
}

/// Removes, once per process, the trial containers whose trial directory
/// is gone or held by no living trial (a killed run's).
fn sweep_once(engine: &Engine) {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let Ok(mut containers) = engine.trial_containers() else {
            return;
        };
        // Services before the trial containers whose network they joined.
        containers.sort_by_key(|(name, trial)| *name == tack_image::container_name(trial));
        for (name, trial) in containers {
            if !tack_sandbox::held::held(&trial) {
                let _ = engine.remove_container(&name);
            }
        }
    });
}
