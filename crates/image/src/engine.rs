//! The container engine on this machine: podman or docker, found by
//! whether it answers (`info`), not only whether it is installed (a docker
//! client without a daemon answers `--version` and nothing else).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde::Deserialize;

use crate::ImageError;

/// Which engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Podman,
    Docker,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Podman => "podman",
            EngineKind::Docker => "docker",
        }
    }

    /// Whether the engine gives each container an id map of its own
    /// (podman's `--uidmap`/`--gidmap`, and `--userns container:` to share
    /// one). Docker's containers run with the host's ids, or with the one
    /// map its daemon's `userns-remap` gives them all.
    pub fn maps_ids(self) -> bool {
        match self {
            EngineKind::Podman => true,
            EngineKind::Docker => false,
        }
    }

    /// `podman` or `docker`.
    pub fn parse(name: &str) -> Option<EngineKind> {
        match name {
            "podman" => Some(EngineKind::Podman),
            "docker" => Some(EngineKind::Docker),
            _ => None,
        }
    }
}

/// A usable engine.
#[derive(Debug, Clone)]
pub struct Engine {
    pub kind: EngineKind,
    /// `podman version 4.3.1`, as it says.
    pub version: String,
}

/// What an image says about how its commands run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    /// The image's id (`sha256:…`), which pins it.
    pub id: String,
    /// `WORKDIR`; `None` when the image sets none (`/`).
    pub workdir: Option<PathBuf>,
    /// `ENV`, in order.
    pub env: Vec<(String, String)>,
    /// `USER`; `None` for root.
    pub user: Option<String>,
}

/// Names the engine when a command's `--engine` does not: for a machine
/// or a CI job that uses docker although podman answers too.
pub const ENGINE_VAR: &str = "TACK_ENGINE";

impl Engine {
    /// The engine named (`podman` or `docker`; else by [`ENGINE_VAR`]), or
    /// the first of podman and docker that answers.
    pub fn detect(named: Option<EngineKind>) -> Result<Engine, ImageError> {
        let named = match named {
            Some(kind) => Some(kind),
            None => match std::env::var(ENGINE_VAR) {
                Ok(value) if !value.is_empty() => {
                    Some(EngineKind::parse(&value).ok_or(ImageError::EngineVar { value })?)
                }
                _ => None,
            },
        };
        let candidates = match named {
            Some(kind) => vec![kind],
            None => vec![EngineKind::Podman, EngineKind::Docker],
        };
        let mut tried = Vec::new();
        for kind in candidates {
            match Engine::usable(kind) {
                Ok(engine) => return Ok(engine),
                Err(error) if named.is_some() => return Err(error),
                Err(error) => tried.push(error.to_string()),
            }
        }
        Err(ImageError::NoEngine {
            tried: tried.join("; "),
        })
    }

    fn usable(kind: EngineKind) -> Result<Engine, ImageError> {
        let engine = Engine {
            kind,
            version: String::new(),
        };
        let version = engine.output(&["--version"])?;
        // A client without its daemon (docker) answers --version only.
        engine.output(&["info", "--format", "{{json .}}"])?;
        Ok(Engine {
            kind,
            version: version.trim().to_string(),
        })
    }

    /// The engine's command with `args`, its standard input closed.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(self.kind.as_str());
        command.args(args).stdin(Stdio::null());
        command
    }

    /// Runs `args` and returns stdout; a failure with the engine's stderr.
    pub(crate) fn output(&self, args: &[&str]) -> Result<String, ImageError> {
        let shown = format!("{} {}", self.kind.as_str(), args.join(" "));
        let out: Output = self
            .command(args)
            .output()
            .map_err(|source| ImageError::Run {
                command: shown.clone(),
                source,
            })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(ImageError::Engine {
                command: shown,
                stderr,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Whether the engine has `image` locally.
    pub fn has_image(&self, image: &str) -> bool {
        self.command(&["image", "inspect", image])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `image` from the engine's store, pulled from its registry if
    /// missing.
    pub fn ensure(&self, image: &str) -> Result<ImageConfig, ImageError> {
        if !self.has_image(image) {
            self.output(&["pull", image])
                .map_err(|error| ImageError::Pull {
                    image: image.to_string(),
                    why: error.to_string(),
                })?;
        }
        self.config(image)
    }

    /// Removes `image` from the engine's store.
    pub fn remove_image(&self, image: &str) -> Result<(), ImageError> {
        self.output(&["rmi", "-f", image]).map(|_| ())
    }

    /// The image's id, working directory, environment and user.
    pub fn config(&self, image: &str) -> Result<ImageConfig, ImageError> {
        let text = self.output(&["image", "inspect", image])?;
        #[derive(Deserialize)]
        struct Inspected {
            #[serde(rename = "Id")]
            id: String,
            #[serde(rename = "Config", default)]
            config: Option<Config>,
        }
        #[derive(Deserialize, Default)]
        struct Config {
            #[serde(rename = "WorkingDir", default)]
            working_dir: Option<String>,
            #[serde(rename = "Env", default)]
            env: Option<Vec<String>>,
            #[serde(rename = "User", default)]
            user: Option<String>,
        }
        let inspected: Vec<Inspected> =
            serde_json::from_str(&text).map_err(|source| ImageError::Inspect {
                image: image.to_string(),
                source,
            })?;
        let Some(first) = inspected.into_iter().next() else {
            return Err(ImageError::Engine {
                command: format!("{} image inspect {image}", self.kind.as_str()),
                stderr: "no such image".to_string(),
            });
        };
        let config = first.config.unwrap_or_default();
        let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
        // Docker says `sha256:<hex>`, podman the hex alone.
        let id = if first.id.contains(':') {
            first.id
        } else {
            format!("sha256:{}", first.id)
        };
        Ok(ImageConfig {
            id,
            workdir: nonempty(config.working_dir).map(PathBuf::from),
            env: config
                .env
                .unwrap_or_default()
                .into_iter()
                .filter_map(|pair| {
                    let (name, value) = pair.split_once('=')?;
                    Some((name.to_string(), value.to_string()))
                })
                .collect(),
            user: nonempty(config.user),
        })
    }
}
