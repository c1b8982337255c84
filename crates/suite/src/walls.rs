//! A task's own walls on top of the confinement every command of a trial
//! gets: where its directories appear (the workspace at `/app`, extra
//! directories read-only) and its memory limit. Setup, the agent's
//! commands, the checks and the solution all take them from here, so each
//! sees the task's paths alike.

use std::path::{Path, PathBuf};

use tack_sandbox::{Confinement, ContainerRoot, ImageRoot, Placement};

use crate::Task;

/// What a task adds to a command's confinement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskWalls {
    pub places: Vec<Placement>,
    /// Address space per process, when the task sets `limits.memory_mb`.
    pub memory_bytes: Option<u64>,
    /// Where each command's temporary directory is shown: `/tmp` for a
    /// task with a `workdir`, whose scripts, written for a container, write
    /// there by name.
    pub tmp_at: Option<PathBuf>,
    /// The trial's own directory shown there, so that /tmp lasts from one
    /// command of the trial to the next; without it, each command gets a
    /// fresh one.
    pub tmp_host: Option<PathBuf>,
    /// The task's image as the root of every command, over the trial's
    /// own writable layer.
    pub image: Option<ImageRoot>,
    /// Engine mode: the trial's container, where every command runs.
    pub container: Option<ContainerRoot>,
}

/// Who is running a command: only the solution (a script applying it, or
/// the oracle) sees the task's `solution/` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    Agent,
    Solution,
    /// The hidden checks: in an image, as the image's `USER`, whoever the
    /// agent ran as.
    Checks,
}

impl TaskWalls {
    pub fn apply(&self, mut confinement: Confinement) -> Confinement {
        for place in &self.places {
            confinement = confinement.placing(&place.host, &place.at, place.writable);
        }
        if let Some(bytes) = self.memory_bytes {
            confinement.limits.memory_bytes = bytes;
        }
        if let Some(at) = &self.tmp_at {
            confinement = confinement.with_tmp_at(at, self.tmp_host.as_deref());
        }
        if let Some(image) = &self.image {
            confinement = confinement.in_image(image.clone());
        }
        if let Some(container) = &self.container {
            confinement = confinement.in_container(container.clone());
        }
        confinement
    }

    /// Also shows `host` read-only at `at` (a check's copy of `checks/`).
    pub fn with_read_only(mut self, host: &Path, at: &str) -> TaskWalls {
        self.places.push(place(host.to_path_buf(), at, false));
        self
    }

    /// Also shows `host` writable at `at` (a check's reward directory).
    pub fn with_writable(mut self, host: &Path, at: &str) -> TaskWalls {
        self.places.push(place(host.to_path_buf(), at, true));
        self
    }
}

impl Task {
    /// The walls of this task for commands in `workspace` run by `viewer`.
    pub fn walls(&self, workspace: &Path, viewer: Viewer) -> TaskWalls {
        let mut places = Vec::new();
        if let Some(at) = self.workdir() {
            places.push(place(workspace.to_path_buf(), at, true));
        }
        let image = trial_layer(workspace)
            .filter(|_| !self.in_engine())
            .and_then(|layer| self.image_root(layer, viewer));
        if let Some(dir) = self.ready_image().and_then(|i| i.stand_ins.as_ref()) {
            places.push(place(dir.clone(), crate::IMAGE_STAND_INS_AT, false));
        }
        // What the container was started with: the places so far.
        let bound = places.iter().map(|p| p.at.clone()).collect();
        let container = workspace
            .parent()
            .and_then(|trial| self.container_root(trial, viewer, bound));
        for extra in &self.environment.places {
            places.push(place(self.dir.join(&extra.from), &extra.at, false));
        }
        if viewer == Viewer::Solution
            && let Some(at) = &self.solution.files_at
        {
            places.push(place(self.solution_dir(), at, false));
        }
        // Written for a container: /tmp is the trial's own (in an image,
        // the image's, in the trial's layer).
        let container_style =
            self.environment.workdir.is_some() && image.is_none() && container.is_none();
        TaskWalls {
            places,
            memory_bytes: self.limits.memory_mb.map(|mb| mb << 20),
            tmp_at: container_style.then(|| PathBuf::from("/tmp")),
            tmp_host: trial_tmp(workspace).filter(|dir| container_style && dir.is_dir()),
            image,
            container,
        }
    }

    /// Whether the task runs only in its container image.
    pub fn requires_container(&self) -> bool {
        self.environment.requires.is_some()
    }
}

/// The trial's writable layer over its image, beside its workspace, which
/// [`crate::TrialWorkspace`] makes for a task with an image.
pub(crate) fn trial_layer(workspace: &Path) -> Option<PathBuf> {
    workspace.parent().map(|dir| dir.join("layer"))
}

/// The trial's /tmp beside its workspace, which [`crate::TrialWorkspace`]
/// makes for a task with a `workdir`.
pub(crate) fn trial_tmp(workspace: &Path) -> Option<PathBuf> {
    workspace.parent().map(|dir| dir.join("trial-tmp"))
}

fn place(host: PathBuf, at: &str, writable: bool) -> Placement {
    Placement {
        host,
        at: PathBuf::from(at),
        writable,
    }
}

/// Whether a check's place (`checks_at`, `reward_dir`) is where the
/// workspace is shown, or above or below it: there it would cover the
/// agent's work. Asked when the suite loads (a task's `workdir`) and when
/// the checks run (an image's own WORKDIR).
pub(crate) fn covers_workspace(at: &Path, workspace: &Path) -> bool {
    at.starts_with(workspace) || workspace.starts_with(at)
}
