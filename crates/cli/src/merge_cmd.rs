//! `tack merge`: the shard runs of one plan (`tack run --shard`) combined
//! into one run that `tack report`, `compare` and `query` read like any
//! other.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use clap::Args;
use tack_protocol::count;
use tack_trace::ShardRuns;

use crate::exit::{Classify, CommandResult, Failure};
use crate::out::{errln, outln};

const AFTER_HELP: &str = "\
Every run must be a shard (`tack run --shard`) of the same plan: the same suite content, variants
and their configuration, tasks, trials per task, seed and shard count, with no task or environment
drift between them, each shard index once, and no trial twice.

Exit codes:
  0  merged
  2  the runs do not belong together (the message names the run and what
     differs), a shard is missing (see --allow-partial) or still running, or
     OUT already exists
  3  the merged run could not be written";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct MergeArgs {
    /// The shard runs: trace directories (traces/<run-id>), run ids (looked up under --traces),
    /// or URLs (s3://BUCKET/PREFIX/<run-id>, gs://, az://, file://); a URL's last segment may be
    /// a glob, e.g. 's3://bucket/runs/*-shard*of3' (quoted, so the shell leaves it alone).
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Where run ids given as RUNS are looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// The merged run: a directory, traces/<run-id>, or a URL, s3://BUCKET/PREFIX/<run-id>;
    /// must not exist yet.
    #[arg(long)]
    out: PathBuf,
    /// Merge although some shards are missing; the merged run is then marked interrupted.
    #[arg(long)]
    allow_partial: bool,
    /// Print one JSON object instead of text: the merged run (`run_id`, `run`: where it is),
    /// the shard runs, the trial attempts and whether every shard was there (`complete`).
    #[arg(long)]
    json: bool,
}

pub async fn run(args: MergeArgs) -> CommandResult {
    let mut dirs = Vec::new();
    for dir in crate::store_arg::local_runs(&args.runs).await? {
        dirs.push(crate::run_arg::resolve_run(
            &dir.to_string_lossy(),
            &args.traces,
        )?);
    }
    let shards = ShardRuns::open(&dirs, args.allow_partial).or_fail(Failure::Usage)?;
    let out = Out::of(&args.out).await?;
    shards
        .write(&out.dir, out.run_id.clone(), std::env::args().collect())
        .or_fail(Failure::Internal)?;
    if let Some(url) = &out.url {
        crate::store_arg::publish(&out.dir, url).await?;
    }
    if args.json {
        let object = serde_json::json!({
            "run_id": out.run_id,
            "run": out.shown,
            "shards": shards.shards().len(),
            "trial_attempts": shards.trials(),
            "complete": shards.complete(),
        });
        outln!("{object}")?;
    } else {
        outln!(
            "merged {} ({}) into {}",
            count(shards.shards().len(), "shard run"),
            // A trial run again is there once per attempt.
            count(shards.trials(), "trial attempt"),
            out.shown
        )?;
    }
    if !shards.complete() {
        errln!("note: shards are missing; the merged run is marked interrupted");
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the merged run is written, and where it goes from there.
struct Out {
    run_id: String,
    /// Written here: `--out` itself, or a staging directory for a URL.
    dir: PathBuf,
    url: Option<tack_store::RemoteUrl>,
    shown: String,
}

impl Out {
    async fn of(arg: &Path) -> Result<Out, crate::exit::CommandError> {
        let location = crate::store_arg::location(arg)?;
        let name = match &location {
            tack_store::Location::Local(dir) => dir
                .file_name()
                .and_then(|name| name.to_str())
                .map(str::to_string),
            tack_store::Location::Remote(url) => url.name(),
        };
        // The run id, which readers check is a plain name (Manifest::read).
        let run_id = name
            .filter(|name| tack_protocol::is_plain_name(name))
            .ok_or_else(|| {
                anyhow!("--out {location}: name the run directory, e.g. traces/<run-id>")
            })
            .or_fail(Failure::Usage)?;
        let shown = location.to_string();
        match location {
            tack_store::Location::Local(dir) => {
                if dir.exists() {
                    return Err(anyhow!(
                        "--out {} already exists; choose a new run directory",
                        dir.display()
                    ))
                    .or_fail(Failure::Usage);
                }
                Ok(Out {
                    run_id,
                    dir,
                    url: None,
                    shown,
                })
            }
            tack_store::Location::Remote(url) => {
                crate::store_arg::check(&url).await?;
                if tack_store::run_exists(&url)
                    .await
                    .map_err(crate::store_arg::failure)?
                {
                    return Err(anyhow!(
                        "--out {url} already holds a run; choose a new run URL"
                    ))
                    .or_fail(Failure::Usage);
                }
                // Staging belongs to tack: what an earlier, failed merge to
                // the same URL left there is rebuilt from the shards.
                let dir = crate::store_arg::cache()?.staging().join(&run_id);
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("could not clear {}", dir.display()))
                        .or_fail(Failure::Internal)?;
                }
                Ok(Out {
                    run_id,
                    dir,
                    url: Some(url),
                    shown,
                })
            }
        }
    }
}
