//! `task.toml`: the parts tack can act on, read leniently because public
//! tasks span several schema versions (`version = "1.0"` with flat tables,
//! `schema_version = "1.3"` with `[task]`, `network_mode`, env tables).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use toml::{Table, Value};

use super::HarborError;

/// The settings of one task, as far as they matter for running it.
/// Environment variables by name, as the task's file sets them.
pub type EnvVars = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskConfig {
    /// `schema_version`, or the older top-level `version`.
    pub schema_version: Option<String>,
    /// `[task] name`, when present.
    pub name: Option<String>,
    pub description: Option<String>,
    pub timeouts: Timeouts,
    pub resources: Resources,
    pub network: Network,
    /// `[verifier.env]`: variables test.sh runs with.
    pub verifier_env: EnvVars,
    /// `[solution.env]`: variables solve.sh runs with.
    pub solution_env: EnvVars,
    /// `[environment.env]`: variables of the agent's environment.
    pub environment_env: EnvVars,
    /// Paths Harbor collects after the trial (`artifacts`).
    pub artifacts: Vec<String>,
    /// `[environment] skills_dir`, a directory of agent skills.
    pub skills_dir: Option<String>,
    /// `[environment] docker_image`: a prebuilt image Harbor pulls instead
    /// of building `environment/Dockerfile`.
    pub docker_image: Option<String>,
    /// How many MCP servers the environment declares.
    pub mcp_servers: usize,
    /// `[agent] user`: who the agent (and the solution) runs as.
    pub agent_user: Option<String>,
    /// `[environment.healthcheck]`: what must succeed before the agent
    /// starts.
    pub healthcheck: Option<Healthcheck>,
    /// `[environment] workdir`: where commands run, over the image's
    /// WORKDIR.
    pub workdir: Option<String>,
    /// Keys Harbor does not know, each with the closest it does ("did you
    /// mean"): Harbor ignores them, so a misspelt setting is silently its
    /// default there; tack says so at import.
    pub unknown_keys: Vec<String>,
}

/// `[environment.healthcheck]`, Docker's health check as Harbor spells it;
/// each setting `None` when left to the default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Healthcheck {
    pub command: String,
    pub interval_sec: Option<f64>,
    pub timeout_sec: Option<f64>,
    pub start_period_sec: Option<f64>,
    pub start_interval_sec: Option<f64>,
    pub retries: Option<u64>,
}

/// Each is `None` when task.toml leaves it to Harbor's default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timeouts {
    pub agent: Option<Duration>,
    pub verifier: Option<Duration>,
    pub build: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Resources {
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    pub storage_mb: Option<u64>,
    pub gpus: Option<u64>,
}

/// Whether the agent may reach the internet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Network {
    pub allow_internet: bool,
    /// The setting as written (`allow_internet = true`, `network_mode =
    /// "public"`); `None` when absent, which Harbor treats as allowed.
    pub raw: Option<String>,
}

/// Reads `task.toml` at `path`.
pub(super) fn load(task_dir: &Path, path: &Path) -> Result<TaskConfig, HarborError> {
    let text = super::read_text(task_dir, path)?;
    let table: Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        HarborError::TomlSyntax {
            path: path.to_path_buf(),
            line,
            source: Box::new(e),
        }
    })?;
    let fields = Fields {
        path,
        table: &table,
    };
    let schema_version = match fields.string(&["schema_version"])? {
        Some(v) => Some(v),
        None => fields.string(&["version"])?,
    };
    Ok(TaskConfig {
        schema_version,
        name: fields.string(&["task", "name"])?,
        description: fields.string(&["task", "description"])?,
        timeouts: Timeouts {
            agent: fields.seconds(&["agent", "timeout_sec"])?,
            verifier: fields.seconds(&["verifier", "timeout_sec"])?,
            build: fields.seconds(&["environment", "build_timeout_sec"])?,
        },
        resources: Resources {
            cpus: fields.number(&["environment", "cpus"])?,
            memory_mb: fields.megabytes(&["environment", "memory_mb"], "memory")?,
            storage_mb: fields.megabytes(&["environment", "storage_mb"], "storage")?,
            gpus: fields.count(&["environment", "gpus"])?,
        },
        network: fields.network()?,
        verifier_env: fields.env(&["verifier", "env"])?,
        solution_env: fields.env(&["solution", "env"])?,
        environment_env: fields.env(&["environment", "env"])?,
        artifacts: fields.strings(&["artifacts"])?,
        skills_dir: fields.string(&["environment", "skills_dir"])?,
        docker_image: fields.string(&["environment", "docker_image"])?,
        agent_user: fields.string(&["agent", "user"])?,
        healthcheck: fields.healthcheck()?,
        workdir: fields.string(&["environment", "workdir"])?,
        unknown_keys: unknown_keys(&table),
        mcp_servers: match fields.get(&["environment", "mcp_servers"]) {
            Some(Value::Array(servers)) => servers.len(),
            Some(_) => return Err(fields.wrong(&["environment", "mcp_servers"], "an array")),
            None => 0,
        },
    })
}

/// The keys of Harbor's task.toml by table (Harbor 0.26's models, and the
/// older schema's `version`, `memory` and `storage`). Tables not listed
/// (`[metadata]`, `[source]`, a step's) are free or not read by tack.
const KNOWN_KEYS: [(&str, &[&str]); 7] = [
    (
        "",
        &[
            "agent",
            "artifacts",
            "environment",
            "metadata",
            "multi_step_reward_strategy",
            "schema_version",
            "solution",
            "source",
            "steps",
            "task",
            "verifier",
            "version",
        ],
    ),
    (
        "task",
        &["authors", "description", "keywords", "name", "version"],
    ),
    (
        "environment",
        &[
            "allow_internet",
            "allowed_hosts",
            "build_timeout_sec",
            "cpus",
            "docker_image",
            "env",
            "gpu_types",
            "gpus",
            "healthcheck",
            "mcp_servers",
            "memory",
            "memory_mb",
            "network_mode",
            "os",
            "skills_dir",
            "storage",
            "storage_mb",
            "tpu",
            "workdir",
        ],
    ),
    (
        "agent",
        &["allowed_hosts", "network_mode", "timeout_sec", "user"],
    ),
    (
        "verifier",
        &[
            "allowed_hosts",
            "collect",
            "env",
            "environment",
            "environment_mode",
            "network_mode",
            "timeout_sec",
            "user",
        ],
    ),
    ("solution", &["env"]),
    (
        "environment.healthcheck",
        &[
            "command",
            "interval_sec",
            "retries",
            "start_interval_sec",
            "start_period_sec",
            "timeout_sec",
        ],
    ),
];

/// What [`TaskConfig::unknown_keys`] holds: each key of a known table that
/// Harbor does not know, as `table.key`, with the nearest known key.
fn unknown_keys(table: &Table) -> Vec<String> {
    let mut unknown = Vec::new();
    for (path, known) in KNOWN_KEYS {
        let mut at = Some(table);
        for key in path.split('.').filter(|k| !k.is_empty()) {
            at = at.and_then(|t| t.get(key)).and_then(Value::as_table);
        }
        for key in at.into_iter().flat_map(Table::keys) {
            if known.contains(&key.as_str()) {
                continue;
            }
            let name = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let near = tack_protocol::nearest(key, known.iter().copied());
            unknown.push(match near.first() {
                None => format!("`{name}` is not a Harbor setting"),
                Some(near) => format!("`{name}` is not a Harbor setting: did you mean `{near}`?"),
            });
        }
    }
    unknown
}

struct Fields<'a> {
    path: &'a Path,
    table: &'a Table,
}

impl Fields<'_> {
    fn healthcheck(&self) -> Result<Option<Healthcheck>, HarborError> {
        let key = |name| ["environment", "healthcheck", name];
        let Some(command) = self.string(&key("command"))? else {
            return Ok(None);
        };
        Ok(Some(Healthcheck {
            command,
            interval_sec: self.number(&key("interval_sec"))?,
            timeout_sec: self.number(&key("timeout_sec"))?,
            start_period_sec: self.number(&key("start_period_sec"))?,
            start_interval_sec: self.number(&key("start_interval_sec"))?,
            retries: self.count(&key("retries"))?,
        }))
    }

    fn get(&self, keys: &[&str]) -> Option<&Value> {
        let (last, tables) = keys.split_last()?;
        let mut table = self.table;
        for key in tables {
            table = table.get(*key)?.as_table()?;
        }
        table.get(*last)
    }

    fn wrong(&self, keys: &[&str], expected: &str) -> HarborError {
        let found = self.get(keys).map_or("nothing", Value::type_str);
        HarborError::TomlField {
            path: self.path.to_path_buf(),
            field: field_name(keys),
            message: format!("must be {expected}, found {found}"),
        }
    }

    fn string(&self, keys: &[&str]) -> Result<Option<String>, HarborError> {
        match self.get(keys) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong(keys, "a string")),
        }
    }

    fn strings(&self, keys: &[&str]) -> Result<Vec<String>, HarborError> {
        match self.get(keys) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.wrong(keys, "an array of strings")),
            Some(_) => Err(self.wrong(keys, "an array of strings")),
        }
    }

    fn number(&self, keys: &[&str]) -> Result<Option<f64>, HarborError> {
        let value = match self.get(keys) {
            None => return Ok(None),
            Some(Value::Integer(i)) => *i as f64,
            Some(Value::Float(f)) => *f,
            Some(_) => return Err(self.wrong(keys, "a number")),
        };
        if value.is_finite() && value >= 0.0 {
            Ok(Some(value))
        } else {
            Err(self.wrong(keys, "a non-negative number"))
        }
    }

    fn seconds(&self, keys: &[&str]) -> Result<Option<Duration>, HarborError> {
        Ok(self.number(keys)?.map(Duration::from_secs_f64))
    }

    fn count(&self, keys: &[&str]) -> Result<Option<u64>, HarborError> {
        match self.number(keys)? {
            None => Ok(None),
            Some(n) if n.fract() == 0.0 => Ok(Some(n as u64)),
            Some(_) => Err(self.wrong(keys, "a whole number")),
        }
    }

    /// A size in MB at `keys`, else in the deprecated sibling field
    /// `legacy` (Terminal-Bench 2's `memory = "2G"`), converted as Harbor
    /// does: `G` is 1024 MB, `M` one, `K` 1/1024, fractions cut.
    fn megabytes(&self, keys: &[&str], legacy: &str) -> Result<Option<u64>, HarborError> {
        if let Some(mb) = self.count(keys)? {
            return Ok(Some(mb));
        }
        let mut legacy_keys = keys.to_vec();
        if let Some(last) = legacy_keys.last_mut() {
            *last = legacy;
        }
        // Harbor reads the deprecated field only when it is text.
        let Some(Value::String(text)) = self.get(&legacy_keys) else {
            return Ok(None);
        };
        let size = text.trim().to_ascii_uppercase();
        let (number, scale) = match size.char_indices().last() {
            Some((at, 'G')) => (&size[..at], 1024.0),
            Some((at, 'M')) => (&size[..at], 1.0),
            Some((at, 'K')) => (&size[..at], 1.0 / 1024.0),
            _ => ("", 0.0),
        };
        match number.trim().parse::<f64>() {
            Ok(n) if n >= 0.0 && scale > 0.0 => Ok(Some((n * scale) as u64)),
            _ => Err(self.wrong(&legacy_keys, "a size like \"2G\" or \"512M\"")),
        }
    }

    fn env(&self, keys: &[&str]) -> Result<EnvVars, HarborError> {
        let table = match self.get(keys) {
            None => return Ok(BTreeMap::new()),
            Some(Value::Table(table)) => table,
            Some(_) => return Err(self.wrong(keys, "a table of variables")),
        };
        let mut env = BTreeMap::new();
        for (name, value) in table {
            // Harbor passes values to the shell as text; numbers and booleans
            // written without quotes mean the same there.
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Integer(_) | Value::Float(_) | Value::Boolean(_) => value.to_string(),
                _ => {
                    let mut field = keys.to_vec();
                    field.push(name);
                    return Err(self.wrong(&field, "a string"));
                }
            };
            env.insert(name.clone(), text);
        }
        Ok(env)
    }

    fn network(&self) -> Result<Network, HarborError> {
        let allow = ["environment", "allow_internet"];
        let mode = ["environment", "network_mode"];
        if let Some(value) = self.get(&allow) {
            let allowed = value
                .as_bool()
                .ok_or_else(|| self.wrong(&allow, "true or false"))?;
            return Ok(Network {
                allow_internet: allowed,
                raw: Some(format!("allow_internet = {allowed}")),
            });
        }
        let Some(value) = self.string(&mode)? else {
            return Ok(Network {
                allow_internet: true,
                raw: None,
            });
        };
        let allowed = match value.as_str() {
            "public" | "bridge" | "host" | "internet" => true,
            "none" | "no-network" | "no_network" | "offline" | "private" | "isolated"
            | "disabled" => false,
            other => {
                return Err(HarborError::TomlField {
                    path: self.path.to_path_buf(),
                    field: field_name(&mode),
                    message: format!(
                        "\"{other}\" is not a network mode tack knows; use \"public\" or \"none\" \
                         (\"no-network\" also means none)"
                    ),
                });
            }
        };
        Ok(Network {
            allow_internet: allowed,
            raw: Some(format!("network_mode = \"{value}\"")),
        })
    }
}

/// `[a.b] c` for keys `a`, `b`, `c`; a top-level key stays bare.
fn field_name(keys: &[&str]) -> String {
    match keys.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, tables)) => format!("[{}] {last}", tables.join(".")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(environment: &str) -> Result<Resources, HarborError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task.toml");
        std::fs::write(&path, format!("[environment]\n{environment}")).unwrap();
        load(dir.path(), &path).map(|config| config.resources)
    }

    #[test]
    fn terminal_bench_sizes_read_as_harbor_reads_them() {
        let sized = resources("memory = \"2G\"\nstorage = \"512M\"\n").unwrap();
        assert_eq!((sized.memory_mb, sized.storage_mb), (Some(2048), Some(512)));
        let both = resources("memory_mb = 1024\nmemory = \"2G\"\n").unwrap();
        assert_eq!(both.memory_mb, Some(1024));
        assert_eq!(resources("memory = 2048\n").unwrap().memory_mb, None);
        let error = resources("memory = \"lots\"\n").unwrap_err().to_string();
        assert!(
            error.contains("[environment] memory") && error.contains("2G"),
            "{error}"
        );
    }
}
