//! Engine mode's trial container: started when the trial's directory is
//! made, with the workspace bound at the image's `WORKDIR`, removed with
//! the directory, its services' containers and its volumes. A run killed
//! before it removed them leaves them labelled with their trial directory;
//! the next run with the same trials directory removes those whose
//! directory no living trial holds.

use std::path::Path;

use tack_image::{Bind, ContainerSpec, Engine, ServiceSpec, VolumeMount};
use tack_protocol::SandboxProfile;
use tack_sandbox::IMAGE_IDS;

use crate::{CommandSandbox, SuiteError, Task, TaskImage, Volume};

/// Where a trial's agent logs are, in its container (Harbor's).
const AGENT_LOGS_AT: &str = "/logs/agent";

/// A running trial container, its services' containers and its volumes;
/// removed when dropped.
#[derive(Debug)]
pub(crate) struct TrialContainer {
    pub(crate) engine: Engine,
    name: String,
    /// The services' containers started so far, with the services' names.
    pub(crate) services: Vec<(String, String)>,
    /// The engine's names of the trial's volumes made so far.
    volumes: Vec<String>,
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
        sweep_once(&engine, &crate::workspaces_root());
        let fail = |message: String| SuiteError::Environment {
            task: task.id.clone(),
            message,
        };
        let base = image.id_base(true);
        let logs = trial.join("agent-logs");
        std::fs::create_dir_all(&logs).map_err(|e| SuiteError::io(&logs, e))?;
        let agent = image.agent_user.unwrap_or(image.user);
        crate::copy::own(&logs, (base + agent.uid, base + agent.gid))
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
        // Made before anything is started, so that what fails leaves
        // nothing behind when it drops.
        let mut container = TrialContainer {
            engine,
            name,
            services: Vec::new(),
            volumes: Vec::new(),
        };
        container.make_volumes(task, trial, &fail)?;
        let (own_binds, volumes) = mounts(task, trial, "main", &task.environment.volumes, base)?;
        binds.extend(own_binds);
        let spec = ContainerSpec {
            image: &image.id,
            name: &container.name,
            trial,
            network,
            id_base: base,
            id_count: IMAGE_IDS,
            binds: &binds,
            volumes: &volumes,
            cpus: task.environment.cpus,
            memory_mb: task.environment.memory_mb,
            hosts: &hosts,
        };
        container
            .engine
            .start_container(&spec)
            .map_err(|e| fail(format!("the trial's container could not start: {e}")))?;
        Ok(container)
    }

    /// Makes each volume the trial's containers name, once.
    fn make_volumes(
        &mut self,
        task: &Task,
        trial: &Path,
        fail: &dyn Fn(String) -> SuiteError,
    ) -> Result<(), SuiteError> {
        let env = &task.environment;
        let declared = env
            .volumes
            .iter()
            .chain(env.services.iter().flat_map(|s| &s.volumes));
        let mut names: Vec<&str> = declared.filter_map(|v| v.name.as_deref()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let volume = tack_image::volume_name(trial, name);
            self.engine
                .create_volume(&volume, trial)
                .map_err(|e| fail(format!("volume `{name}` could not be made: {e}")))?;
            self.volumes.push(volume);
        }
        Ok(())
    }

    /// Starts the task's services beside the trial's container, in the
    /// task's order, each once what the trial waits for of the one before
    /// holds (compose's `depends_on` conditions: see
    /// [`crate::health::wait_service`]); one that cannot start, or fails
    /// its wait, fails the trial's setup (the ones started are removed with
    /// the container).
    pub(crate) async fn start_services(
        &mut self,
        task: &Task,
        image: &TaskImage,
        trial: &Path,
    ) -> Result<(), SuiteError> {
        if image.services.is_empty() {
            return Ok(());
        }
        let fail = |message: String| SuiteError::Environment {
            task: task.id.clone(),
            message,
        };
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
            let (binds, volumes) = mounts(
                task,
                trial,
                &service.name,
                &declared.volumes,
                image.id_base(true),
            )?;
            let spec = ServiceSpec {
                image: &service.id,
                name: &name,
                trial,
                beside: &self.name,
                env: &env,
                command: declared.command.as_deref(),
                entrypoint: declared.entrypoint.as_deref(),
                user: declared.user.as_deref(),
                binds: &binds,
                volumes: &volumes,
                hosts_file: &hosts_file,
            };
            self.engine
                .start_service(&spec)
                .map_err(|e| fail(format!("service `{}` could not start: {e}", service.name)))?;
            self.services.push((service.name.clone(), name.clone()));
            crate::health::wait_service(task, self, declared, &name).await?;
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
        for volume in &self.volumes {
            let _ = self.engine.remove_volume(volume);
        }
    }
}

/// What one of the trial's containers (`main`, or a service's name)
/// mounts of `volumes`: the trial's volumes by their engine names, and a
/// copy for this trial of each file or directory of the task, owned by the
/// image's root (host id `id_base`, as an engine's copy of a named volume
/// is), under the trial's `mounts/<container>/<i>`.
fn mounts(
    task: &Task,
    trial: &Path,
    container: &str,
    volumes: &[Volume],
    id_base: u32,
) -> Result<(Vec<Bind>, Vec<VolumeMount>), SuiteError> {
    let mut binds = Vec::new();
    let mut named = Vec::new();
    for (i, volume) in volumes.iter().enumerate() {
        if let Some(name) = &volume.name {
            named.push(VolumeMount {
                volume: tack_image::volume_name(trial, name),
                at: volume.at.clone(),
                read_only: volume.read_only,
            });
        } else if let Some(path) = &volume.path {
            let source = task.dir.join(path);
            let file_name = source.file_name().unwrap_or(source.as_os_str());
            let copy = trial
                .join("mounts")
                .join(container)
                .join(i.to_string())
                .join(file_name);
            let root = crate::copy::Owners::All(id_base, id_base);
            crate::copy::copy_path_owned(&source, &copy, root)
                .map_err(|e| SuiteError::io(&source, e))?;
            binds.push(Bind {
                host: copy,
                at: volume.at.clone(),
                writable: !volume.read_only,
            });
        }
    }
    Ok((binds, named))
}

/// Removes, once per process, the trial containers and volumes of trials
/// made under `root` (this process's trials directory) whose directory is
/// gone or held by no living trial (a killed run's). Only under `root`:
/// an engine is shared by every run on the machine, and another trials
/// directory's runs (another user's, or one with its own `TMPDIR`, as
/// tests running side by side are) sweep their own, so a run never
/// removes what another killed run left before that one's resume.
pub(crate) fn sweep_once(engine: &Engine, root: &Path) {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let stale = |trial: &Path| trial.parent() == Some(root) && !tack_sandbox::held::held(trial);
        let Ok(mut containers) = engine.trial_containers() else {
            return;
        };
        // Services before the trial containers whose network they joined.
        containers.sort_by_key(|(name, trial)| *name == tack_image::container_name(trial));
        for (name, trial) in containers {
            if stale(&trial) {
                let _ = engine.remove_container(&name);
            }
        }
        // Their containers gone, the volumes they mounted.
        for (name, trial) in engine.trial_volumes().unwrap_or_default() {
            if stale(&trial) {
                let _ = engine.remove_volume(&name);
            }
        }
    });
}
