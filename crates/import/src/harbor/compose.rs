//! A task's `environment/docker-compose.yaml`: the build of the service
//! Harbor runs the agent in (`main`, else the first one it builds), and
//! the other services — a database, a server the tests talk to — which
//! tack starts beside the trial's container in engine mode, as
//! `[[environment.services]]`.
//!
//! Of a service, tack reproduces its image or build, `environment`,
//! `command`, `entrypoint`, `user`, `volumes` (see [`super::volumes`]),
//! `healthcheck` and the order `depends_on` gives; every service shares
//! the trial's network (each reached by its name on `127.0.0.1`), so
//! `ports`, `expose` and `networks` need nothing. The rest is listed as
//! not reproduced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_norway::Value;

use tack_suite::ServiceWait;

use super::config::Healthcheck;
use super::volumes::{ComposeVolume, external_volumes, volumes_of};
use super::{HarborError, read_text, shell};
use environment::{environment, scalar};

mod environment;

/// Keys that need nothing when every service shares one network.
const NEEDLESS: [&str; 7] = [
    "ports",
    "expose",
    "networks",
    "container_name",
    "hostname",
    "restart",
    "pull_policy",
];

/// A service of the compose file other than the agent's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComposeService {
    pub name: String,
    pub image: Option<String>,
    /// Its build context (the compose file's directory joined with its
    /// `context`) and Dockerfile name.
    pub build: Option<(PathBuf, String)>,
    pub env: BTreeMap<String, String>,
    pub command: Option<Vec<String>>,
    /// Its program instead of its image's `ENTRYPOINT`.
    pub entrypoint: Option<Vec<String>>,
    pub user: Option<String>,
    pub volumes: Vec<ComposeVolume>,
    /// What the other services' `depends_on` conditions wait for of it,
    /// when they ask for more than its start.
    pub wait: Option<ServiceWait>,
    pub healthcheck: Option<Healthcheck>,
    /// What of it tack does not reproduce, said for the task's notes.
    pub unreproduced: Vec<String>,
}

/// What the compose file says.
#[derive(Debug)]
pub(super) struct Compose {
    /// The agent's service's build context and Dockerfile name.
    pub main_build: (PathBuf, String),
    /// The other services, each after those it depends on.
    pub services: Vec<ComposeService>,
    /// What the agent's service mounts, and what of its `volumes` is not
    /// reproduced.
    pub main_volumes: (Vec<ComposeVolume>, Vec<String>),
}

/// Reads the compose file at `path`, in the environment directory of the
/// task in `task_dir`.
pub(super) fn load(task_dir: &Path, path: &Path) -> Result<Compose, HarborError> {
    let env_dir = &task_dir.join("environment");
    let text = read_text(task_dir, path)?;
    let yaml: Value = serde_norway::from_str(&text).map_err(|source| HarborError::Compose {
        path: path.to_path_buf(),
        source,
    })?;
    let empty = serde_norway::Mapping::new();
    let services = yaml
        .get("services")
        .and_then(Value::as_mapping)
        .unwrap_or(&empty);
    let named: Vec<(String, &Value)> = services
        .iter()
        .filter_map(|(name, body)| Some((name.as_str()?.to_string(), body)))
        .collect();
    let main = named
        .iter()
        .position(|(name, _)| name == "main")
        .or_else(|| {
            named
                .iter()
                .position(|(_, body)| body.get("build").is_some())
        })
        .or(if named.is_empty() { None } else { Some(0) });
    let main_build = main
        .and_then(|i| build_of(named[i].1, env_dir))
        .unwrap_or_else(|| (env_dir.to_path_buf(), "Dockerfile".to_string()));
    let field = |name: &str, key: &str, message: String| HarborError::ComposeField {
        path: path.to_path_buf(),
        field: format!("services.{name}.{key}"),
        message,
    };
    let external = external_volumes(&yaml);
    let mut others = Vec::new();
    let mut depends = BTreeMap::new();
    for (i, (name, body)) in named.iter().enumerate() {
        if Some(i) == main {
            continue;
        }
        let mut service = service(name, body, task_dir, &field)?;
        let (volumes, unreproduced) = volumes_of(body, env_dir, task_dir, &external);
        service.volumes = volumes;
        service.unreproduced.extend(unreproduced);
        depends.insert(name.clone(), depends_on(body));
        others.push(service);
    }
    set_waits(&mut others, &named);
    let main_volumes = main.map_or_else(Default::default, |i| {
        volumes_of(named[i].1, env_dir, task_dir, &external)
    });
    Ok(Compose {
        main_build,
        services: in_start_order(others, &depends),
        main_volumes,
    })
}

/// A service's build context and Dockerfile, when it has a `build`.
fn build_of(body: &Value, env_dir: &Path) -> Option<(PathBuf, String)> {
    let (context, dockerfile) = match body.get("build")? {
        Value::String(context) => (context.as_str(), "Dockerfile"),
        build => (
            build.get("context").and_then(Value::as_str).unwrap_or("."),
            build
                .get("dockerfile")
                .and_then(Value::as_str)
                .unwrap_or("Dockerfile"),
        ),
    };
    Some((
        env_dir.join(harbor_variables(context)),
        dockerfile.to_string(),
    ))
}

/// `path` with Harbor's compose variables that name a place replaced:
/// `CONTEXT_DIR` is the task's environment directory, where paths are
/// joined to anyway (`${CONTEXT_DIR}/..` is the task). Any other variable
/// is left, and the path then names no directory of the task.
fn harbor_variables(path: &str) -> String {
    let mut path = path.to_string();
    for variable in ["${CONTEXT_DIR}", "$CONTEXT_DIR"] {
        if let Some(rest) = path.strip_prefix(variable) {
            path = format!(".{rest}");
        }
    }
    path
}

fn service(
    name: &str,
    body: &Value,
    task_dir: &Path,
    field: &dyn Fn(&str, &str, String) -> HarborError,
) -> Result<ComposeService, HarborError> {
    let image = body
        .get("image")
        .and_then(Value::as_str)
        .map(str::to_string);
    let build = build_of(body, &task_dir.join("environment"));
    if image.is_none() && build.is_none() {
        return Err(field(
            name,
            "image",
            "is missing, and so is `build`: a service needs one".to_string(),
        ));
    }
    let (env, mut unreproduced) =
        environment(body, task_dir).map_err(|message| field(name, "environment", message))?;
    let words = |key: &str| match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(shell::words(text))),
        Some(Value::Sequence(items)) => Ok(Some(items.iter().filter_map(scalar).collect())),
        Some(_) => Err(field(
            name,
            key,
            "is neither a string nor a list".to_string(),
        )),
    };
    let command = words("command")?;
    let entrypoint = words("entrypoint")?;
    let user = match body.get("user") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            scalar(value)
                .ok_or_else(|| field(name, "user", "is not a user name or id".to_string()))?,
        ),
    };
    let healthcheck = match body.get("healthcheck") {
        None => None,
        Some(health) => {
            healthcheck(health).map_err(|message| field(name, "healthcheck", message))?
        }
    };
    let handled = [
        "image",
        "build",
        "environment",
        "env_file",
        "command",
        "entrypoint",
        "user",
        "volumes",
        "healthcheck",
        "depends_on",
    ];
    if let Some(map) = body.as_mapping() {
        for key in map.keys().filter_map(Value::as_str) {
            if !handled.contains(&key) && !NEEDLESS.contains(&key) {
                unreproduced.push(format!("`{key}`"));
            }
        }
    }
    Ok(ComposeService {
        name: name.to_string(),
        image,
        build,
        env,
        command,
        entrypoint,
        user,
        volumes: Vec::new(),
        wait: None,
        healthcheck,
        unreproduced,
    })
}

/// A compose health check in Harbor's spelling; `None` when disabled.
fn healthcheck(health: &Value) -> Result<Option<Healthcheck>, String> {
    if health.get("disable").and_then(Value::as_bool) == Some(true) {
        return Ok(None);
    }
    let command = match health.get("test") {
        Some(Value::String(command)) => command.clone(),
        Some(Value::Sequence(items)) => {
            let words: Vec<String> = items.iter().filter_map(scalar).collect();
            match words.split_first() {
                Some((kind, rest)) if kind == "CMD-SHELL" => rest.join(" "),
                Some((kind, rest)) if kind == "CMD" && !rest.is_empty() => rest
                    .iter()
                    .map(|word| shell_quote(word))
                    .collect::<Vec<_>>()
                    .join(" "),
                Some((kind, _)) if kind == "NONE" => return Ok(None),
                _ => return Err("test must be [\"CMD\", …], [\"CMD-SHELL\", …] or a string".into()),
            }
        }
        _ => return Err("has no `test`".to_string()),
    };
    let secs = |key: &str| -> Result<Option<f64>, String> {
        match health.get(key) {
            None => Ok(None),
            Some(value) => {
                let text = scalar(value).unwrap_or_default();
                duration_secs(&text)
                    .map(Some)
                    .ok_or_else(|| format!("{key} `{text}` is not a duration like `5s` or `1m30s`"))
            }
        }
    };
    Ok(Some(Healthcheck {
        command,
        interval_sec: secs("interval")?,
        timeout_sec: secs("timeout")?,
        start_period_sec: secs("start_period")?,
        start_interval_sec: secs("start_interval")?,
        retries: health.get("retries").and_then(Value::as_u64),
    }))
}

/// A compose duration (`1m30s`, `500ms`, `10s`, `1.5h`) in seconds.
fn duration_secs(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "us" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    Some(total)
}

/// `word` as one word for `sh`.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The services `depends_on` names (a list, or a mapping of conditions).
fn depends_on(body: &Value) -> Vec<String> {
    conditions(body).into_iter().map(|(name, _)| name).collect()
}

/// The services `depends_on` names, each with its `condition` (none in
/// the list form: `service_started`).
fn conditions(body: &Value) -> Vec<(String, Option<String>)> {
    match body.get("depends_on") {
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|name| (name.to_string(), None))
            .collect(),
        Some(Value::Mapping(map)) => map
            .iter()
            .filter_map(|(name, body)| {
                let condition = body.get("condition").and_then(Value::as_str);
                Some((name.as_str()?.to_string(), condition.map(str::to_string)))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// What the trial waits for of each service, from the conditions every
/// service (the agent's included) puts on it: a job another waits to
/// complete, or a service another waits to be healthy; a condition tack
/// cannot keep is noted on the service.
fn set_waits(services: &mut [ComposeService], named: &[(String, &Value)]) {
    let mut asked: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, body) in named {
        for (target, condition) in conditions(body) {
            if let Some(condition) = condition {
                asked.entry(target).or_default().push(condition);
            }
        }
    }
    for service in services.iter_mut() {
        let Some(conditions) = asked.get(&service.name) else {
            continue;
        };
        let has = |condition: &str| conditions.iter().any(|c| c == condition);
        if has("service_completed_successfully") {
            service.wait = Some(ServiceWait::Completed);
        } else if has("service_healthy") {
            if service.healthcheck.is_some() {
                service.wait = Some(ServiceWait::Healthy);
            } else {
                service.unreproduced.push(
                    "`depends_on` waits for it to be healthy, and it has no `healthcheck`".into(),
                );
            }
        }
    }
}

/// The services in the file's order, each moved after those it depends
/// on (a cycle keeps the file's order, as far as it goes).
fn in_start_order(
    services: Vec<ComposeService>,
    depends: &BTreeMap<String, Vec<String>>,
) -> Vec<ComposeService> {
    let mut placed: Vec<String> = Vec::new();
    fn place(
        name: &str,
        depends: &BTreeMap<String, Vec<String>>,
        placed: &mut Vec<String>,
        visiting: &mut Vec<String>,
    ) {
        if placed.iter().any(|p| p == name) || visiting.iter().any(|v| v == name) {
            return;
        }
        visiting.push(name.to_string());
        for dependency in depends.get(name).into_iter().flatten() {
            if depends.contains_key(dependency) {
                place(dependency, depends, placed, visiting);
            }
        }
        visiting.pop();
        placed.push(name.to_string());
    }
    for service in &services {
        place(&service.name, depends, &mut placed, &mut Vec::new());
    }
    let mut by_name: BTreeMap<String, ComposeService> =
        services.into_iter().map(|s| (s.name.clone(), s)).collect();
    placed
        .iter()
        .filter_map(|name| by_name.remove(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_durations_read_as_seconds() {
        assert_eq!(duration_secs("10s"), Some(10.0));
        assert_eq!(duration_secs("1m30s"), Some(90.0));
        assert_eq!(duration_secs("500ms"), Some(0.5));
        assert_eq!(duration_secs("1.5h"), Some(5400.0));
        assert_eq!(duration_secs("ten"), None);
        assert_eq!(duration_secs("5"), None);
    }

    #[test]
    fn services_start_after_what_they_depend_on() {
        let yaml = "services:\n  main:\n    build: .\n    depends_on: [api]\n  \
                    api:\n    image: api:1\n    depends_on:\n      db:\n        condition: service_healthy\n  \
                    db:\n    image: postgres:16\n    command: postgres -c 'fsync=off'\n    \
                    environment:\n      POSTGRES_PASSWORD: secret\n      PORT: 5432\n      FROM_HOST:\n    \
                    healthcheck:\n      test: [\"CMD\", \"pg_isready\", \"-U\", \"a b\"]\n      interval: 2s\n      retries: 5\n    \
                    volumes: [\"./data:/var/lib/postgresql/data\"]\n    ports: [\"5432:5432\"]\n";
        let dir = tempfile::tempdir().unwrap();
        let path = compose_file(dir.path(), yaml);
        let compose = load(dir.path(), &path).unwrap();
        assert_eq!(
            compose.main_build,
            (dir.path().join("environment/."), "Dockerfile".into())
        );
        let names: Vec<&str> = compose.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["db", "api"]);
        let db = &compose.services[0];
        assert_eq!(db.image.as_deref(), Some("postgres:16"));
        assert_eq!(
            db.command.as_deref(),
            Some(&["postgres".to_string(), "-c".into(), "fsync=off".into()][..])
        );
        assert_eq!(db.env["POSTGRES_PASSWORD"], "secret");
        assert_eq!(db.env["PORT"], "5432");
        let health = db.healthcheck.as_ref().unwrap();
        assert_eq!(health.command, "pg_isready -U 'a b'");
        assert_eq!(health.interval_sec, Some(2.0));
        assert_eq!(health.retries, Some(5));
        assert_eq!(
            db.unreproduced,
            [
                "`FROM_HOST` from the host's environment",
                "`volumes: ./data:/var/lib/postgresql/data` (not a file of the task)"
            ]
        );
    }

    #[test]
    fn env_files_of_the_task_are_read_and_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("task");
        let path = compose_file(
            &task,
            "services:\n  main:\n    build: .\n  db:\n    image: postgres:16\n    \
             env_file: [db.env, ../../host.env, /etc/hostname, fifo.env]\n    \
             environment:\n      MODE: compose\n",
        );
        std::fs::write(
            task.join("environment/db.env"),
            "# db\nexport USER=tack\nPASSWORD='s3cret'\nMODE=env-file\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("host.env"), "SECRET=host\n").unwrap();
        // A FIFO would block a plain read for as long as nobody writes.
        let made = std::process::Command::new("mkfifo")
            .arg(task.join("environment/fifo.env"))
            .status()
            .unwrap();
        assert!(made.success());
        let compose = load(&task, &path).unwrap();
        let db = &compose.services[0];
        assert_eq!(db.env["USER"], "tack");
        assert_eq!(db.env["PASSWORD"], "s3cret");
        assert_eq!(db.env["MODE"], "compose");
        assert!(!db.env.contains_key("SECRET"));
        assert_eq!(
            db.unreproduced,
            [
                "env_file `../../host.env` (not a file of the task)",
                "env_file `/etc/hostname` (not a file of the task)",
                "env_file `fifo.env` (not a file of the task)"
            ]
        );
    }

    #[test]
    fn harbors_context_dir_is_the_environment_directory() {
        assert_eq!(harbor_variables("${CONTEXT_DIR}/.."), "./..");
        assert_eq!(harbor_variables("$CONTEXT_DIR"), ".");
        assert_eq!(harbor_variables("./db"), "./db");
        let dir = tempfile::tempdir().unwrap();
        let path = compose_file(
            dir.path(),
            "services:\n  main:\n    build:\n      context: ${CONTEXT_DIR}/..\n      \
             dockerfile: environment/Dockerfile\n",
        );
        let compose = load(dir.path(), &path).unwrap();
        assert_eq!(
            compose.main_build,
            (
                dir.path().join("environment/./.."),
                "environment/Dockerfile".into()
            )
        );
    }

    #[test]
    fn a_service_without_image_or_build_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = compose_file(
            dir.path(),
            "services:\n  main:\n    build: .\n  cache:\n    command: x\n",
        );
        let error = load(dir.path(), &path).unwrap_err().to_string();
        assert!(error.contains("services.cache.image is missing"), "{error}");
    }

    /// `task/environment/docker-compose.yaml` holding `yaml`.
    fn compose_file(task: &Path, yaml: &str) -> PathBuf {
        std::fs::create_dir_all(task.join("environment")).unwrap();
        let path = task.join("environment/docker-compose.yaml");
        std::fs::write(&path, yaml).unwrap();
        path
    }
}
