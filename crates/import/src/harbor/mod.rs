//! Harbor (Terminal-Bench) task directories: what one contains and what of
//! it tack can reproduce without building its container image.
//!
//! A task is `task.toml`, `instruction.md`, `environment/` (a Dockerfile
//! and its build context, or a `docker-compose.yaml` naming another
//! context), `tests/test.sh` with its test files, and `solution/solve.sh`.
//! `write` turns them into tasks of a tack suite; the rest reads and
//! analyses.

mod assess;
mod compose;
mod config;
mod dockerfile;
mod image_task;
mod install;
mod layout;
mod scripts;
mod shell;
mod suite_file;
#[cfg(test)]
mod tests;
mod toml_text;
mod volumes;
mod write;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::beneath::NotRead;

pub use assess::Assessment;
pub use compose::ComposeService;
pub use config::{EnvVars, Network, Resources, TaskConfig, Timeouts};
pub use dockerfile::{BaseImage, Dockerfile, FileCopy, Instruction, RunCommand, RunStep};
pub use install::Install;
pub use scripts::{RewardKind, Script, ScriptNeeds, UvRun};
pub use volumes::{ComposeVolume, VolumeSource};
pub use write::{
    ConvertedTask, SkippedTask, SuiteImport, TaskMode, WriteError, import_tasks, unknown_key_line,
};

/// Why a task directory could not be read as a Harbor task.
#[derive(Debug, thiserror::Error)]
pub enum HarborError {
    #[error("could not read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is missing: a Harbor task needs {what}")]
    Missing { path: PathBuf, what: &'static str },
    /// `line` is counted from toml's span, which needs the file's text;
    /// toml's error is boxed, being large.
    #[error("{path}{}: {}", at_line(*line), .source.message().trim())]
    TomlSyntax {
        path: PathBuf,
        line: Option<usize>,
        source: Box<toml::de::Error>,
    },
    #[error("{path}: {field} {message}")]
    TomlField {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("{path}{}: {source}", at_line(.source.location().map(|l| l.line())))]
    Compose {
        path: PathBuf,
        source: serde_norway::Error,
    },
    #[error("{path}: {field} {message}")]
    ComposeField {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("{path} line {line}: {message}")]
    Dockerfile {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path} has no FROM instruction; a Dockerfile must name its base image")]
    NoFrom { path: PathBuf },
    #[error(
        "{path} is outside the task (a path or a link leading out of it): refused, not read; \
         keep what the task names inside its directory"
    )]
    Outside { path: PathBuf },
    #[error("{path} is larger than {limit_mib} MiB: not read as a task's text file")]
    TooBig { path: PathBuf, limit_mib: u64 },
}

/// ` line N`, when the line is known.
fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}

/// One Harbor task, read and analysed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarborTask {
    pub dir: PathBuf,
    /// `[task] name`, or the directory's name when task.toml has none.
    pub name: String,
    pub instruction: String,
    pub config: TaskConfig,
    pub environment: Environment,
    pub tests: Tests,
    /// `None` when the task ships no `solution/solve.sh`.
    pub solution: Option<Solution>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Environment {
    /// The directory COPY and ADD sources are relative to.
    pub build_context: PathBuf,
    /// The compose file that set the context, when there is one.
    pub compose_file: Option<PathBuf>,
    /// `None` when the task has no Dockerfile and names a prebuilt image
    /// instead (`[environment] docker_image`, in [`TaskConfig`]), as tasks
    /// made for clusters that cannot build do.
    pub dockerfile: Option<Dockerfile>,
    /// The compose file's other services, in the order they start.
    pub services: Vec<ComposeService>,
    /// What the compose file mounts in the agent's own container.
    pub volumes: Vec<ComposeVolume>,
    /// What of the agent's container's `volumes` tack does not reproduce.
    pub unreproduced_volumes: Vec<String>,
}

/// `tests/`: Harbor places it at `/tests` and runs `test.sh` after the agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tests {
    pub dir: PathBuf,
    /// Every file under `dir`, relative to it, sorted.
    pub files: Vec<PathBuf>,
    pub script: Script,
    pub reward: RewardKind,
}

/// `solution/`: Harbor places it at `/solution` and runs `solve.sh`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Solution {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
    pub script: Script,
}

impl HarborTask {
    /// Reads the task in `dir`.
    pub fn load(dir: &Path) -> Result<HarborTask, HarborError> {
        let config = config::load(dir, &required(dir, "task.toml", "its settings")?)?;
        let instruction = read_text(
            dir,
            &required(dir, "instruction.md", "the agent's instruction")?,
        )?;
        let environment = load_environment(dir, config.docker_image.is_some())?;
        let tests_dir = dir.join("tests");
        let test_script =
            scripts::load(dir, &required(&tests_dir, "test.sh", "a verifier script")?)?;
        let tests = Tests {
            files: list_files(&tests_dir)?,
            reward: scripts::reward_kind(&test_script),
            script: test_script,
            dir: tests_dir,
        };
        let solution_dir = dir.join("solution");
        let solve = solution_dir.join("solve.sh");
        let solution = if solve.is_file() {
            Some(Solution {
                files: list_files(&solution_dir)?,
                script: scripts::load(dir, &solve)?,
                dir: solution_dir,
            })
        } else {
            None
        };
        let name = config.name.clone().unwrap_or_else(|| {
            dir.file_name().map_or_else(
                || dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        });
        Ok(HarborTask {
            dir: dir.to_path_buf(),
            name,
            instruction,
            config,
            environment,
            tests,
            solution,
        })
    }

    /// Where the task's commands run: `[environment] workdir`, which
    /// Harbor puts over the image's, else the Dockerfile's last WORKDIR.
    pub fn workdir(&self) -> Option<&str> {
        self.config.workdir.as_deref().or_else(|| {
            let file = self.environment.dockerfile.as_ref()?;
            file.workdir.as_deref()
        })
    }

    /// What tack can and cannot reproduce of this task.
    pub fn assessment(&self) -> Assessment {
        assess::assess(self)
    }
}

fn required(dir: &Path, name: &str, what: &'static str) -> Result<PathBuf, HarborError> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(HarborError::Missing { path, what })
    }
}

/// The most of one task file tack reads: a task's text files are small,
/// and a bigger one is more likely a mistake than a task.
const MAX_TEXT: u64 = 16 << 20;

/// The text of `path`, a file of the task in `task_dir`, read as a
/// regular file beneath it: a link that stays in the task is followed, a
/// path or link leading out of it is refused unread (a compose file's
/// `dockerfile: ../../../etc/passwd`), and a FIFO does not block.
pub(crate) fn read_text(task_dir: &Path, path: &Path) -> Result<String, HarborError> {
    let relative = path
        .strip_prefix(task_dir)
        .map_err(|_| HarborError::Outside {
            path: path.to_path_buf(),
        })?;
    let path_buf = || path.to_path_buf();
    let bytes = crate::beneath::read_within(task_dir, &relative.to_string_lossy(), MAX_TEXT)
        .map_err(|why| match why {
            NotRead::TooBig => HarborError::TooBig {
                path: path_buf(),
                limit_mib: MAX_TEXT >> 20,
            },
            NotRead::Outside => HarborError::Outside { path: path_buf() },
            NotRead::Missing => HarborError::Io {
                path: path_buf(),
                source: std::io::ErrorKind::NotFound.into(),
            },
            NotRead::Unreadable(why) => HarborError::Io {
                path: path_buf(),
                source: std::io::Error::other(why),
            },
        })?;
    String::from_utf8(bytes).map_err(|_| HarborError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "is not UTF-8 text"),
    })
}

/// Reads the task's `environment/`; `prebuilt`: task.toml names a
/// `docker_image`, which stands in for a missing Dockerfile.
fn load_environment(task_dir: &Path, prebuilt: bool) -> Result<Environment, HarborError> {
    let env_dir = &task_dir.join("environment");
    let compose = ["docker-compose.yaml", "docker-compose.yml"]
        .iter()
        .map(|name| env_dir.join(name))
        .find(|path| path.is_file());
    let (build_context, dockerfile_name, compose_parts) = match &compose {
        Some(path) => {
            let compose = compose::load(task_dir, path)?;
            let (context, dockerfile) = compose.main_build;
            (
                context,
                dockerfile,
                Some((compose.services, compose.main_volumes)),
            )
        }
        None => (env_dir.to_path_buf(), "Dockerfile".to_string(), None),
    };
    let (services, (volumes, unreproduced_volumes)) = compose_parts.unwrap_or_default();
    let dockerfile_path = build_context.join(&dockerfile_name);
    // A compose file without a build section leaves the Dockerfile where
    // Harbor looks by default.
    let dockerfile_path = if dockerfile_path.is_file() {
        Some(dockerfile_path)
    } else if env_dir.join("Dockerfile").is_file() || !prebuilt {
        Some(required(
            env_dir,
            "Dockerfile",
            "a Dockerfile describing its environment, or [environment] docker_image in \
             task.toml naming a prebuilt image",
        )?)
    } else {
        None
    };
    Ok(Environment {
        dockerfile: dockerfile_path
            .as_deref()
            .map(|path| dockerfile::load(task_dir, path))
            .transpose()?,
        build_context,
        compose_file: compose,
        services,
        volumes,
        unreproduced_volumes,
    })
}

/// Files under `dir`, relative to it, sorted; an absent directory has none.
fn list_files(dir: &Path) -> Result<Vec<PathBuf>, HarborError> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(HarborError::Io {
                    path: current,
                    source,
                });
            }
        };
        for entry in entries {
            let path = entry
                .map_err(|source| HarborError::Io {
                    path: current.clone(),
                    source,
                })?
                .path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                files.push(relative.to_path_buf());
            }
        }
    }
    files.sort();
    Ok(files)
}
