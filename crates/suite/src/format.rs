//! The suite format, as read from `suite.toml` and `tasks/<id>/task.toml`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tack_protocol::{ChaosParams, ImageMode, SimParams};
use tack_protocol::{HarnessConfig, ModelSpec, Solution};

use crate::SuiteError;

/// A loaded suite: its variants and tasks, checked.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub description: String,
    /// The suite's directory.
    pub root: PathBuf,
    /// Trials per variant and task, unless the command line says otherwise.
    pub trials: u32,
    pub seed: u64,
    /// Commands whose output pins a toolchain the tasks depend on
    /// (`python3 --version`); a run records each one's output so that two
    /// runs on different toolchains are not compared unawares.
    pub fingerprint: Vec<String>,
    /// Public image names and the local images that stand for them here
    /// (`[images]`: `"ubuntu:24.04" = "localhost/tack-base:noble"`).
    pub images: BTreeMap<String, String>,
    pub variants: Vec<Variant>,
    pub tasks: Vec<Task>,
}

impl Suite {
    /// Keeps only the tasks named in `ids` (every task when it is empty).
    pub fn retain_tasks(&mut self, ids: &[String]) -> Result<(), SuiteError> {
        if let Some(name) = ids
            .iter()
            .find(|id| !self.tasks.iter().any(|t| &t.id == *id))
        {
            let known: Vec<&str> = self.tasks.iter().map(|t| t.id.as_str()).collect();
            return Err(SuiteError::UnknownTask {
                name: name.clone(),
                suite: self.name.clone(),
                known: known.join(", "),
            });
        }
        if !ids.is_empty() {
            self.tasks.retain(|t| ids.contains(&t.id));
        }
        Ok(())
    }

    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// What no command of a trial may read: the tasks, with their hidden
    /// checks and reference solutions, and the git repository that holds
    /// the suite, whose objects hold them too (`git show HEAD:tasks/…`).
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        let root = self
            .root
            .canonicalize()
            .unwrap_or_else(|_| self.root.clone());
        let mut hidden = vec![root.join("tasks")];
        hidden.extend(crate::git_dirs::git_dirs_holding(&root));
        hidden
    }
}

/// A model and a harness configuration to run every task with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `oracle`, `sim`, or a provider model, optionally in `chaos(...)`;
    /// a string in the file, parsed (and so checked) as it is read.
    pub model: ModelSpec,
    #[serde(default)]
    pub harness: HarnessConfig,
    /// Parameters of the simulated agent, for `model = "sim"`.
    #[serde(default)]
    pub sim: SimParams,
    /// Fault rates, for `model = "chaos(<model>)"`.
    #[serde(default)]
    pub chaos: ChaosParams,
    /// Connection settings, for provider models (`openai:…`, `anthropic:…`).
    #[serde(default)]
    pub provider: ProviderSettings,
    /// Another harness's agent program, run instead of tack's own loop; its
    /// model calls go through a recording proxy to the variant's provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<ExternalAgent>,
}

/// An agent CLI tack does not run the loop of (Claude Code, Codex CLI,
/// mini-swe-agent, your own), run on the trial's workspace. tack starts a
/// recording proxy for the trial and points `OPENAI_BASE_URL` and
/// `ANTHROPIC_BASE_URL` at it; the agent runs in the sandbox with network
/// only to the proxy, within the harness's `max_wall_secs`; then the hidden
/// checks run as for any trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalAgent {
    /// A bash command, run in the workspace. `$TACK_INSTRUCTION` holds the
    /// task's instruction and `$TACK_MODEL` the variant's model name.
    pub command: String,
    /// Variables for the agent, on top of the task's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A bash command run in the workspace before the agent (same sandbox,
    /// no network): writing its configuration, say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
}

/// How to reach a provider model. Keys are never written here: the variant
/// names the environment variable that holds one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSettings {
    /// e.g. `http://127.0.0.1:11434/v1` for Ollama; default: the provider's API.
    pub base_url: Option<String>,
    /// Variable holding the key (default the provider's own, see
    /// [`Provider::key_var`](tack_protocol::Provider::key_var); then `API_KEY`).
    pub api_key_env: Option<String>,
    pub stream: bool,
    /// Output token limit per call.
    pub max_tokens: Option<u32>,
    /// Budgets shared by every concurrent trial of this provider and base URL.
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
    pub max_concurrency: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// Commands run in the fresh workspace before the agent starts.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Variables for the agent's commands and the checks.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The setup commands need the network (they run with the
    /// `workspace_write` profile instead of `strict`).
    #[serde(default)]
    pub setup_network: bool,
    /// An absolute path (`/app`) where every command of the trial sees the
    /// workspace, for tasks whose instructions and scripts name it (Harbor
    /// tasks); by default commands see the workspace where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// More directories of the task shown to every command, read-only, at
    /// absolute paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<Place>,
    /// Python requirements, installed once per distinct list into a cached
    /// virtual environment whose `bin/` comes first on `PATH`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<String>,
    /// Debian packages the task's commands need from the host; a run
    /// refuses a task whose packages are missing, naming them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub debian: Vec<String>,
    /// Offline stand-ins for what scripts written for a container install
    /// as they run: `apt-get install` of packages the host has, the uv
    /// installer, and `uv`/`uvx` running tools from the task's `python`
    /// environment.
    #[serde(default)]
    pub stand_ins: bool,
    /// `"container"`: the task can run only in its container image, for
    /// the `container_reasons` given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Requirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_reasons: Vec<String>,
    /// A container image the task's trials run in (`python:3.12-slim`):
    /// its filesystem under a writable layer of each trial's own, its
    /// `WORKDIR` (the workspace), `ENV` and `USER`; pulled if missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A Dockerfile the task's image is built from, relative to the task
    /// directory (`environment/Dockerfile`); built once per content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerfile: Option<String>,
    /// The Dockerfile's build context, relative to the task directory; by
    /// default the Dockerfile's own directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// In an image, the user the agent's commands and the solution run as
    /// (a name or uid of the image); the checks run as the image's `USER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// With an image: `"engine"` runs each trial in a container the engine
    /// starts (its `ENTRYPOINT` and the services it starts included),
    /// commands through `exec`; by default (`"sandbox"`) in the image's
    /// filesystem under tack's own sandbox. A variant's
    /// `harness.image_tasks = "engine"` asks it for every image task.
    #[serde(default, skip_serializing_if = "ImageMode::is_sandbox")]
    pub mode: ImageMode,
    /// A command that must succeed before the agent starts (a service the
    /// image's entrypoint starts is up), tried until it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<Healthcheck>,
    /// In engine mode, the CPUs the trial's container may use (the
    /// engine's `--cpus`, e.g. 1.5). Under tack's sandbox commands are not
    /// held to a CPU share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// In engine mode, the memory of the trial's container in MiB, all its
    /// processes together (the engine's `--memory`). Under tack's sandbox,
    /// `[limits] memory_mb` bounds each process's address space instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Containers started beside the trial's (a compose file's other
    /// services: a database, a server the checks talk to). They share the
    /// trial container's network, so each is reached by its `name` on
    /// `127.0.0.1`; a task with services runs in engine mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Service>,
    /// The engine's volumes, mounted in the trial's container (a compose
    /// file's `volumes` of the agent's service): a task with volumes runs
    /// in engine mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

/// A container started beside a trial's, from an image or a Dockerfile of
/// the task, before the agent starts and removed with the trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// The host name the trial's commands reach it by (`db`).
    pub name: String,
    /// The image it runs (`postgres:16`), pulled or mapped like the task's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Or a Dockerfile of the task it is built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerfile: Option<String>,
    /// The Dockerfile's build context; by default its directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Its variables, on top of its image's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its command, instead of its image's `CMD` (after its `ENTRYPOINT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// A command run in it until it succeeds before the trial starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<Healthcheck>,
    /// Its program, instead of its image's `ENTRYPOINT` (and, as in
    /// compose, without the image's `CMD`: `command` follows it); empty
    /// for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// The user it runs as (a name or uid of its image), instead of its
    /// image's `USER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// What it mounts: the trial's volumes, files of the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// What the trial waits for of it before the services after it start,
    /// and the agent (compose's `depends_on` conditions): by default
    /// `healthy` when it has a health check, else `started`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<ServiceWait>,
}

impl Service {
    /// What the trial waits for of it.
    pub fn waits_for(&self) -> ServiceWait {
        self.wait.unwrap_or(match self.healthcheck {
            Some(_) => ServiceWait::Healthy,
            None => ServiceWait::Started,
        })
    }
}

/// What the trial waits for of a service before going on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceWait {
    /// Nothing: it is started, and must still run when the agent starts.
    Started,
    /// Its health check passes; it must still run when the agent starts.
    Healthy,
    /// It ends with exit 0: a job run once (a migration, a seed), whose
    /// end is no failure.
    Completed,
}

impl ServiceWait {
    /// Its name in task.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceWait::Started => "started",
            ServiceWait::Healthy => "healthy",
            ServiceWait::Completed => "completed",
        }
    }
}

/// A mount of a container in engine mode: a volume of the trial (`name`),
/// made when the trial starts with what the first image to mount it holds
/// at `at` (as the engine fills a new named volume), shared by every
/// container of the trial that names it and removed with the trial; or a
/// file or directory of the task (`path`), copied for each trial so that
/// what a trial writes to it stays in that trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volume {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Relative to the task directory, inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Where the container sees it (an absolute path).
    pub at: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// Harbor's (and Docker's) health check: `command` is tried every
/// `interval_secs` (every `start_interval_secs` during the first
/// `start_period_secs`, whose failures do not count) until it succeeds;
/// after `retries` more failures the environment is not healthy and the
/// trial is an infrastructure error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Healthcheck {
    pub command: String,
    #[serde(default = "default_health_interval")]
    pub interval_secs: f64,
    #[serde(default = "default_health_timeout")]
    pub timeout_secs: f64,
    #[serde(default)]
    pub start_period_secs: f64,
    #[serde(default = "default_health_start_interval")]
    pub start_interval_secs: f64,
    #[serde(default = "default_health_retries")]
    pub retries: u32,
}

fn default_health_interval() -> f64 {
    5.0
}

fn default_health_timeout() -> f64 {
    30.0
}

fn default_health_start_interval() -> f64 {
    1.0
}

fn default_health_retries() -> u32 {
    3
}

/// A directory of the task (`from`, relative to the task directory) shown
/// read-only at the absolute path `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Place {
    pub from: String,
    pub at: String,
}

/// What a task needs that tack's own environment cannot give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Its container image (built from its Dockerfile).
    Container,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Overrides the variant's step limit for this task.
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub command_timeout_secs: Option<u64>,
    /// Overrides the variant's wall-time limit of the agent loop.
    #[serde(default)]
    pub max_wall_secs: Option<u64>,
    /// Memory per process of every command of the trial, in MiB (the
    /// address-space limit; default 4096).
    #[serde(default)]
    pub memory_mb: Option<u64>,
}

/// A hidden check: run in the workspace after the agent stops, with the
/// task's `checks/` directory (which the agent never sees) as `$TACK_CHECKS`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub name: String,
    pub run: String,
    #[serde(default = "default_check_timeout")]
    pub timeout_secs: u64,
    /// The check needs the network (it runs with the `workspace_write`
    /// profile instead of `strict`); every other wall of the sandbox stays.
    #[serde(default)]
    pub network: bool,
    /// Variables for this check only, on top of the task's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// An absolute path (`/tests`) where the check also sees its copy of
    /// `checks/`, read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_at: Option<String>,
    /// An absolute path (`/logs/verifier`) given to the check as a fresh
    /// writable directory; a `reward.txt` or `reward.json` it leaves there
    /// decides the check (every reward at least 1 passes), else its exit
    /// code does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_dir: Option<String>,
}

impl Check {
    /// A plain command check: exit 0 passes.
    pub fn command(name: String, run: String, timeout_secs: u64) -> Check {
        Check {
            name,
            run,
            timeout_secs,
            network: false,
            env: BTreeMap::new(),
            checks_at: None,
            reward_dir: None,
        }
    }
}

fn default_check_timeout() -> u64 {
    60
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    /// `tasks/<id>/`.
    pub dir: PathBuf,
    pub instruction: String,
    pub tags: Vec<String>,
    pub test_command: Option<String>,
    pub environment: Environment,
    pub limits: Limits,
    pub checks: Vec<Check>,
    pub solution: Solution,
    /// Globs of workspace files the checks depend on; a trial whose agent
    /// changes one is flagged as tampered.
    pub protected: Vec<String>,
    /// Directories put first on `PATH` for every command of the trial: the
    /// task's provisioned tools ([`crate::provision_suite`]); empty until
    /// then.
    pub tool_path: Vec<PathBuf>,
    /// The task's image, once built and extracted
    /// ([`crate::prepare_images`]); `None` for a task without one, or until
    /// then.
    pub image: Option<crate::ImageState>,
}

/// What docker and podman give an image that sets no `PATH`.
const IMAGE_DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Files a task's checks usually depend on: the visible tests.
pub const DEFAULT_PROTECTED: [&str; 4] = ["**/test_*", "**/*_test.*", "**/tests/**", "**/test.sh"];

impl Task {
    pub fn fixture_dir(&self) -> PathBuf {
        self.dir.join("fixture")
    }

    pub fn checks_dir(&self) -> PathBuf {
        self.dir.join("checks")
    }

    /// `solution/`: files a solution script reads where
    /// `solution.files_at` shows them.
    pub fn solution_dir(&self) -> PathBuf {
        self.dir.join("solution")
    }

    /// The variables of every command of the trial: its image's (`ENV`,
    /// `HOME`), the task's on top, and `PATH` led by its provisioned tools
    /// (in an image, by its stand-ins).
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        let image = self.ready_image();
        let mut env: Vec<(String, String)> = image.map(|i| i.env.clone()).unwrap_or_default();
        // An image without PATH gets the engines' default, not the host's.
        if image.is_some() && !env.iter().any(|(name, _)| name == "PATH") {
            env.push(("PATH".to_string(), IMAGE_DEFAULT_PATH.to_string()));
        }
        for (name, value) in &self.environment.env {
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), value.clone()));
        }
        let mut first: Vec<String> = match image {
            Some(image) => image
                .stand_ins
                .iter()
                .map(|_| crate::IMAGE_STAND_INS_AT.to_string())
                .collect(),
            None => self
                .tool_path
                .iter()
                .map(|d| d.display().to_string())
                .collect(),
        };
        if !first.is_empty() {
            let rest = env
                .iter()
                .rev()
                .find(|(name, _)| name == "PATH")
                .map(|(_, value)| value.clone())
                .or_else(|| {
                    image
                        .is_none()
                        .then(|| std::env::var("PATH").ok())
                        .flatten()
                })
                .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_string());
            first.push(rest);
            env.retain(|(name, _)| name != "PATH");
            env.push(("PATH".to_string(), first.join(":")));
        }
        env
    }

    /// The harness configuration of `variant` with this task's limits applied.
    pub fn harness_for(&self, variant: &Variant) -> HarnessConfig {
        let mut config = variant.harness.clone();
        if let Some(steps) = self.limits.max_steps {
            config.max_steps = steps;
        }
        if let Some(timeout) = self.limits.command_timeout_secs {
            config.command_timeout_secs = timeout;
        }
        if let Some(wall) = self.limits.max_wall_secs {
            config.max_wall_secs = Some(wall);
        }
        config
    }
}

/// `suite.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SuiteFile {
    pub suite: SuiteSection,
    #[serde(default)]
    pub variants: Vec<Variant>,
    #[serde(default)]
    pub images: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SuiteSection {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_trials")]
    pub trials: u32,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub fingerprint: Vec<String>,
}

fn default_trials() -> u32 {
    1
}

/// `task.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskFile {
    pub instruction: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub test_command: Option<String>,
    #[serde(default)]
    pub environment: Environment,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub solution: Solution,
    #[serde(default)]
    pub protected: Option<Vec<String>>,
}
