//! Runs named on the command line by URL (s3://, gs://, az://, file://):
//! fetched into tack's cache before a command reads them, uploaded after a
//! command writes them. The work is tack-store's; this is what the commands
//! share of it, and what they print.

use std::path::{Path, PathBuf};

use tack_store::{Cache, Location, Published, RemoteUrl, StoreError};

use crate::exit::{CommandError, Failure};
use crate::out::errln;

/// Exit 2 for a location or run the user named wrong, 3 for a store or disk
/// that failed.
pub fn failure(error: StoreError) -> CommandError {
    CommandError {
        kind: if error.is_usage() {
            Failure::Usage
        } else {
            Failure::Internal
        },
        error: error.into(),
    }
}

pub fn location(arg: &Path) -> Result<Location, CommandError> {
    Location::parse(arg).map_err(failure)
}

pub fn cache() -> Result<Cache, CommandError> {
    Cache::from_env().map_err(failure)
}

/// Checks that runs can be stored under `prefix` (bucket, endpoint,
/// credentials) before anything is run or merged for it.
pub async fn check(prefix: &RemoteUrl) -> Result<(), CommandError> {
    tack_store::check_prefix(prefix).await.map_err(failure)
}

/// Brings the run at `url` into the cache; returns its directory there.
pub async fn fetch(url: &RemoteUrl) -> Result<PathBuf, CommandError> {
    let fetched = tack_store::download_run(url, &cache()?)
        .await
        .map_err(failure)?;
    if fetched.transfer.files > 0 {
        errln!(
            "fetched {url}: {}, {} ({} unchanged) into {}",
            tack_protocol::count(fetched.transfer.files, "file"),
            size(fetched.transfer.bytes),
            fetched.transfer.unchanged,
            fetched.dir.display()
        );
    }
    Ok(fetched.dir)
}

/// The runs `args` name, each fetched if remote; a URL whose last segment is
/// a glob (`s3://b/runs/*-shard*of3`) names every run under its prefix that
/// matches.
pub async fn local_runs(args: &[PathBuf]) -> Result<Vec<PathBuf>, CommandError> {
    let mut dirs = Vec::new();
    for arg in args {
        match location(arg)? {
            Location::Local(dir) => dirs.push(dir),
            Location::Remote(url) => {
                for run in tack_store::expand_runs(&url).await.map_err(failure)? {
                    dirs.push(fetch(&run).await?);
                }
            }
        }
    }
    Ok(dirs)
}

/// Uploads the run written in `local_run` to `url` and keeps it as the
/// cached copy. On failure the message says where the run is and how to
/// upload it again.
pub async fn publish(local_run: &Path, url: &RemoteUrl) -> Result<Published, CommandError> {
    let published = tack_store::publish_run(local_run, url, &cache()?)
        .await
        .map_err(|error| CommandError {
            kind: Failure::Internal,
            error: anyhow::Error::new(error).context(format!(
                "the run is kept in {dir}; upload it with `tack run --resume {dir} --traces {prefix}`",
                dir = local_run.display(),
                prefix = url.parent().as_ref().unwrap_or(url),
            )),
        })?;
    errln!(
        "uploaded {}, {} to {url}",
        tack_protocol::count(published.transfer.files, "file"),
        size(published.transfer.bytes)
    );
    Ok(published)
}

fn size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}
