use std::path::{Path, PathBuf};
use std::time::Duration;

use tack_sandbox::held::HeldDir;
use tack_sandbox::{CommandOutput, CommandSpec, Confinement};

use crate::copy::{Owners, copy_tree, copy_tree_owned};
use crate::load::apply_edit_text;
use crate::walls::Viewer;
use crate::{CommandSandbox, ImageState, SuiteError, Task, TaskImage};

/// A trial's fresh copy of the task's fixture, removed when dropped unless
/// kept.
#[derive(Debug)]
pub struct TrialWorkspace {
    /// Engine mode's container, removed before the directory it binds.
    container: Option<crate::container::TrialContainer>,
    /// The trial's directory, held while the trial lives: one a killed run
    /// left is swept by the next ([`tack_sandbox::held`]).
    dir: HeldDir,
    path: PathBuf,
}

const SETUP_TIMEOUT: Duration = Duration::from_secs(300);

impl TrialWorkspace {
    /// Copies the fixture into a new directory and runs the task's setup
    /// commands there, confined by `sandbox` (they run fixture code).
    pub async fn prepare(
        task: &Task,
        sandbox: &CommandSandbox,
    ) -> Result<TrialWorkspace, SuiteError> {
        let root = crate::workspaces_root();
        let dir = HeldDir::new_in_swept(&root, &format!("{}-", task.id))
            .map_err(|e| SuiteError::io(&root, e))?;
        let path = dir.path().join("workspace");
        match &task.image {
            None => copy_tree(&task.fixture_dir(), &path, &task.dir)
                .map_err(|e| SuiteError::io(&task.fixture_dir(), e))?,
            Some(ImageState::Ready(image)) => image_workspace(task, image, &path)?,
            Some(ImageState::Failed(message)) => {
                return Err(SuiteError::Environment {
                    task: task.id.clone(),
                    message: message.clone(),
                });
            }
        }
        // A task written for a container gets a /tmp for the whole trial,
        // removed with the workspace (in an image, its own /tmp is).
        if task.environment.workdir.is_some()
            && task.image.is_none()
            && let Some(tmp) = crate::walls::trial_tmp(&path)
        {
            std::fs::create_dir(&tmp).map_err(|e| SuiteError::io(&tmp, e))?;
        }
        let container = match task.ready_image().filter(|_| task.in_engine()) {
            Some(image) => {
                let mut container = crate::container::TrialContainer::start(
                    task,
                    image,
                    dir.path(),
                    &path,
                    sandbox,
                )?;
                container.start_services(task, image, dir.path()).await?;
                Some(container)
            }
            None => None,
        };
        let env = task.env_pairs();
        let confinement = task
            .walls(&path, Viewer::Agent)
            .apply(sandbox.declared(&path, task.environment.setup_network));
        for command in &task.environment.setup {
            let output = run_step(task, command, &path, &env, &confinement).await?;
            if !output.success() {
                return Err(SuiteError::Setup {
                    task: task.id.clone(),
                    command: command.clone(),
                    exit: output
                        .exit_code
                        .map_or("none".to_string(), |c| c.to_string()),
                    output: Some(format!("{}{}", output.stdout, output.stderr))
                        .map(|text| text.trim().to_string())
                        .filter(|text| !text.is_empty())
                        .unwrap_or_else(|| "(no output)".to_string()),
                });
            }
        }
        if let Some(container) = &container {
            crate::health::services_running(task, container).await?;
        }
        if let Some(health) = &task.environment.healthcheck {
            crate::health::wait_healthy(task, health, &path, &env, &confinement).await?;
        }
        Ok(TrialWorkspace {
            container,
            dir,
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the workspace on disk and returns where it is (without a
    /// lock, so no later run sweeps it away).
    pub fn keep(mut self) -> PathBuf {
        drop(self.container.take());
        self.dir.keep();
        self.path
    }
}

/// An image task's workspace: its image's working directory, copied with
/// its owners and modes (the image's users own what they owned), then the
/// task's `fixture/`, if it has one, on top, owned by the image's root.
/// The trial's writable layer over the rest of the image is made beside it.
fn image_workspace(task: &Task, image: &TaskImage, path: &Path) -> Result<(), SuiteError> {
    let base = image.id_base(task.in_engine());
    if let Some(source) = image_workdir(task, image)? {
        // The extracted image's owners are the sandbox's.
        let owners = Owners::Source {
            less: tack_sandbox::IMAGE_ID_BASE - base,
        };
        copy_tree_owned(&source, path, owners).map_err(|e| SuiteError::io(&source, e))?;
    } else {
        std::fs::create_dir_all(path).map_err(|e| SuiteError::io(path, e))?;
        crate::copy::own(path, (base, base)).map_err(|e| SuiteError::io(path, e))?;
    }
    if task.fixture_dir().is_dir() {
        copy_tree_owned(&task.fixture_dir(), path, Owners::All(base, base))
            .map_err(|e| SuiteError::io(&task.fixture_dir(), e))?;
    }
    if let Some(layer) = crate::walls::trial_layer(path) {
        std::fs::create_dir_all(&layer).map_err(|e| SuiteError::io(&layer, e))?;
        agent_logs(image, &layer)?;
    }
    Ok(())
}

/// The image's working directory in its extracted root, when it is a
/// directory there. A link on the way is resolved on the host, where a
/// relative one can climb out of the extracted image (`/x -> ../../../home`
/// would copy the host's home into the workspace): refused unless it stays
/// in the image's root; an absolute one names a host path and is refused.
fn image_workdir(task: &Task, image: &TaskImage) -> Result<Option<PathBuf>, SuiteError> {
    let source = image.rootfs.join(image.workdir.trim_start_matches('/'));
    if std::fs::symlink_metadata(&source).is_err() {
        return Ok(None);
    }
    let root = image
        .rootfs
        .canonicalize()
        .map_err(|e| SuiteError::io(&image.rootfs, e))?;
    match source.canonicalize() {
        Ok(real) if real.starts_with(&root) => Ok(real.is_dir().then_some(real)),
        _ => Err(SuiteError::Environment {
            task: task.id.clone(),
            message: format!(
                "the image's WORKDIR {} is reached through a link that leads out of the image \
                 (as tack reads it, from the host); make the WORKDIR a real directory of the \
                 image, or its links relative within it",
                image.workdir
            ),
        }),
    }
}

/// `/logs/agent`, writable by the agent's user, as Harbor gives its agents
/// (their solutions write there): made in the trial's layer, unless the
/// image has a `/logs` that is not a directory.
fn agent_logs(image: &TaskImage, layer: &Path) -> Result<(), SuiteError> {
    let in_image = image.rootfs.join("logs");
    if std::fs::symlink_metadata(&in_image).is_ok_and(|m| !m.is_dir()) {
        return Ok(());
    }
    let base = tack_sandbox::IMAGE_ID_BASE;
    let agent = image.agent_user.unwrap_or(image.user);
    let logs = layer.join("upper").join("logs");
    for (dir, owner) in [
        (logs.clone(), (base, base)),
        (logs.join("agent"), (base + agent.uid, base + agent.gid)),
    ] {
        std::fs::create_dir_all(&dir).map_err(|e| SuiteError::io(&dir, e))?;
        crate::copy::own(&dir, owner).map_err(|e| SuiteError::io(&dir, e))?;
    }
    Ok(())
}

/// Runs one of the task's own steps (a setup command, the solution
/// script) in `cwd` under `confinement`; what it printed comes back for the
/// caller's error.
async fn run_step(
    task: &Task,
    script: &str,
    cwd: &Path,
    env: &[(String, String)],
    confinement: &Confinement,
) -> Result<CommandOutput, SuiteError> {
    let spec = CommandSpec {
        script,
        cwd,
        env,
        timeout: SETUP_TIMEOUT,
        output_limit: 16 * 1024,
        confinement,
    };
    tack_sandbox::run(&spec)
        .await
        .map_err(|error| SuiteError::Sandbox {
            task: task.id.clone(),
            error,
        })
}

/// Applies `edits` in order to the files of `workspace` (the reference
/// solution's, or one decoy), as the agent's file tools would: beneath the
/// workspace only, never through a link out of it (the fixture and the
/// setup commands are the task's, and a link could aim the edit at any
/// file tack may write).
pub(crate) fn apply_edits(
    task: &Task,
    workspace: &Path,
    edits: &[tack_protocol::Edit],
) -> Result<(), SuiteError> {
    let refused = |path: &str, error: tack_sandbox::FileAccessError| SuiteError::File {
        path: workspace.join(path),
        message: format!("the solution's edit cannot be applied: {error}"),
    };
    let files = tack_sandbox::WorkspaceFiles::new(workspace, &tack_sandbox::Confinement::off())
        .map_err(|error| refused("", error))?;
    for edit in edits {
        let bytes = files
            .read(&edit.path)
            .map_err(|error| refused(&edit.path, error))?;
        let text = String::from_utf8(bytes).map_err(|_| SuiteError::File {
            path: workspace.join(&edit.path),
            message: "the solution edits it, but it is not UTF-8 text".to_string(),
        })?;
        let updated = apply_edit_text(&text, edit).map_err(|error| SuiteError::Solution {
            task: task.id.clone(),
            error,
        })?;
        files
            .write(&edit.path, updated.as_bytes())
            .map_err(|error| refused(&edit.path, error))?;
    }
    Ok(())
}

/// Applies the task's reference solution directly (not through an agent):
/// edits in order, then the script, confined by `sandbox`. A script that
/// fails is not an error: the checks decide whether the task is solved, as
/// they do when the oracle runs it in `tack run` (and in Harbor, whose
/// oracle runs the verifier whatever `solve.sh` exited with). How it ended
/// comes back, to be said beside the checks' verdict.
pub async fn apply_solution(
    task: &Task,
    workspace: &Path,
    sandbox: &CommandSandbox,
) -> Result<Option<String>, SuiteError> {
    apply_edits(task, workspace, &task.solution.edits)?;
    let Some(script) = &task.solution.script else {
        return Ok(None);
    };
    let env = task.env_pairs();
    let confinement = task
        .walls(workspace, Viewer::Solution)
        .apply(sandbox.confinement(workspace, false));
    let output = run_step(task, script, workspace, &env, &confinement).await?;
    Ok((!output.success()).then(|| {
        format!(
            "the solution script {}; its last output:\n{}",
            output.ending(),
            tack_image::last_lines(&format!("{}{}", output.stdout, output.stderr), 12)
        )
    }))
}
