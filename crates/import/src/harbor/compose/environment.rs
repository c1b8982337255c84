//! A compose service's environment: its `environment` (a mapping or a list
//! of `NAME=value`) over the variables of its `env_file`s. What compose
//! would take from the host is not reproduced, and said.

use std::collections::BTreeMap;
use std::path::Path;

use serde_norway::Value;

use super::super::read_text;

/// The service's variables and what of them is not reproduced; `Err` says
/// what is wrong with its `environment`.
pub(super) fn environment(
    body: &Value,
    task_dir: &Path,
) -> Result<(BTreeMap<String, String>, Vec<String>), String> {
    let mut unreproduced = Vec::new();
    let mut env = BTreeMap::new();
    match body.get("environment") {
        None => {}
        Some(Value::Mapping(map)) => {
            for (key, value) in map {
                let Some(key) = key.as_str() else { continue };
                match scalar(value) {
                    Some(value) => {
                        env.insert(key.to_string(), value);
                    }
                    None => unreproduced.push(format!("`{key}` from the host's environment")),
                }
            }
        }
        Some(Value::Sequence(items)) => {
            for item in items.iter().filter_map(Value::as_str) {
                match item.split_once('=') {
                    Some((key, value)) => {
                        env.insert(key.to_string(), value.to_string());
                    }
                    None => unreproduced.push(format!("`{item}` from the host's environment")),
                }
            }
        }
        Some(_) => return Err("is neither a mapping nor a list of NAME=value".to_string()),
    }
    env_files(body, task_dir, &mut env, &mut unreproduced);
    Ok((env, unreproduced))
}

/// The variables of a service's `env_file` (one path or a list, relative
/// to the compose file), under those `environment` sets. A file outside
/// the task is not read.
fn env_files(
    body: &Value,
    task_dir: &Path,
    env: &mut BTreeMap<String, String>,
    unreproduced: &mut Vec<String>,
) {
    let files: Vec<&str> = match body.get("env_file") {
        Some(Value::String(file)) => vec![file.as_str()],
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(|item| item.as_str().or_else(|| item.get("path")?.as_str()))
            .collect(),
        _ => return,
    };
    let env_dir = task_dir.join("environment");
    for file in files {
        let Ok(text) = read_text(task_dir, &env_dir.join(file)) else {
            unreproduced.push(format!("env_file `{file}` (not a file of the task)"));
            continue;
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            if let Some((key, value)) = line.split_once('=') {
                let value = value.trim();
                let unquoted = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                    .unwrap_or(value);
                env.entry(key.trim().to_string())
                    .or_insert_with(|| unquoted.to_string());
            }
        }
    }
}

/// A YAML scalar as the text compose passes on; `None` for null (a value
/// compose takes from the host) and for collections.
pub(super) fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
