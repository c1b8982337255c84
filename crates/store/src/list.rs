//! Finding runs under a prefix.

use futures::StreamExt;
use globset::Glob;
use object_store::{ObjectStoreExt, path::Path as ObjectPath};
use tack_trace::Manifest;

use crate::client::{open, remote_error};
use crate::{RemoteUrl, StoreError};

/// The runs directly under `prefix` (each `<prefix>/<run-id>` holding a
/// manifest), sorted. Runs still being uploaded have no manifest yet and are
/// not listed.
pub async fn list_runs(prefix: &RemoteUrl) -> Result<Vec<RemoteUrl>, StoreError> {
    let store = open(prefix)?;
    let listed = match store.list_with_delimiter(Some(&prefix.object_path())).await {
        Ok(listed) => listed.common_prefixes,
        Err(object_store::Error::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(remote_error(prefix, "list the runs", e)),
    };
    let mut runs = Vec::new();
    for dir in listed {
        let Some(name) = dir.filename() else {
            continue;
        };
        let run = prefix.join(name);
        match store.head(&manifest_path(&run)).await {
            Ok(_) => runs.push(run),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(remote_error(&run, "read the manifest", e)),
        }
    }
    runs.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    Ok(runs)
}

/// The runs a command-line URL names: itself, or, when its last segment is a
/// glob (`s3://b/runs/*-shard*of3`), every run under its parent that matches,
/// as a shell expands paths; shells cannot expand URLs.
pub async fn expand_runs(url: &RemoteUrl) -> Result<Vec<RemoteUrl>, StoreError> {
    let name = url.name().unwrap_or_default();
    if !name.contains(['*', '?', '[', '{']) {
        return Ok(vec![url.clone()]);
    }
    let bad_glob = |reason: String| StoreError::Location {
        location: url.to_string(),
        reason,
    };
    let pattern = Glob::new(&name)
        .map_err(|e| bad_glob(format!("`{name}` is not a glob: {e}")))?
        .compile_matcher();
    let parent = url
        .parent()
        .ok_or_else(|| bad_glob("the glob has no parent prefix".to_string()))?;
    let runs: Vec<RemoteUrl> = list_runs(&parent)
        .await?
        .into_iter()
        .filter(|run| run.name().is_some_and(|name| pattern.is_match(name)))
        .collect();
    if runs.is_empty() {
        return Err(bad_glob(format!("no run under {parent} matches `{name}`")));
    }
    Ok(runs)
}

/// Checks, with one listing request, that `prefix` can be used: the bucket
/// exists, the endpoint answers and the credentials are accepted. A run
/// bound for `prefix` calls it before its first trial, not after its last;
/// the right to write is only known when the upload is tried.
pub async fn check_prefix(prefix: &RemoteUrl) -> Result<(), StoreError> {
    let store = open(prefix)?;
    let mut listing = store.list(Some(&prefix.object_path()));
    match listing.next().await {
        None | Some(Ok(_)) | Some(Err(object_store::Error::NotFound { .. })) => Ok(()),
        Some(Err(e)) => Err(remote_error(prefix, "list the prefix", e)),
    }
}

/// Whether `run` holds a manifest, i.e. a run was stored there.
pub async fn run_exists(run: &RemoteUrl) -> Result<bool, StoreError> {
    let store = open(run)?;
    match store.head(&manifest_path(run)).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(remote_error(run, "look for a manifest", e)),
    }
}

fn manifest_path(run: &RemoteUrl) -> ObjectPath {
    run.object_path().join(Manifest::FILE_NAME)
}
