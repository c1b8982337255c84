//! `tack merge`: the shard runs of one plan (`tack run --shard`) combined
//! into one run that `tack report`, `compare` and `query` read like any
//! other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use tack_trace::{Manifest, RunStatus};

use crate::exit::{Classify, CommandResult, Failure};

const AFTER_HELP: &str = "\
Every run must be a shard (`tack run --shard`) of the same plan: the same suite content, variants
and their configuration, tasks, trials per task, seed and shard count, with no task or environment
drift between them, each shard index once, and no trial twice.

Exit codes:
  0  merged
  2  the runs do not belong together (the message names the run and what differs), a shard is
     missing (see --allow-partial) or still running, or OUT already exists
  3  the merged run could not be written";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct MergeArgs {
    /// The shard runs' trace directories (traces/<run-id>), or their URLs
    /// (s3://BUCKET/PREFIX/<run-id>, gs://, az://, file://); a URL's last segment may be a glob,
    /// e.g. 's3://bucket/runs/*-shard*of3' (quoted, so the shell leaves it alone).
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// The merged run: a directory, traces/<run-id>, or a URL, s3://BUCKET/PREFIX/<run-id>;
    /// must not exist yet.
    #[arg(long)]
    out: PathBuf,
    /// Merge although some shards are missing; the merged run is then marked interrupted.
    #[arg(long)]
    allow_partial: bool,
}

pub async fn run(args: MergeArgs) -> CommandResult {
    let dirs = crate::store_arg::local_runs(&args.runs).await?;
    let shards = read_shards(&dirs).or_fail(Failure::Usage)?;
    let complete = check_together(&shards, args.allow_partial).or_fail(Failure::Usage)?;
    let trials = trial_files(&shards).or_fail(Failure::Usage)?;
    let out = Out::of(&args.out).await?;
    copy_tables(&shards, &out.dir).or_fail(Failure::Internal)?;
    let manifest = merged_manifest(&shards, out.run_id.clone(), complete);
    manifest.write(&out.dir).or_fail(Failure::Internal)?;
    if let Some(url) = &out.url {
        crate::store_arg::publish(&out.dir, url).await?;
    }
    println!(
        "merged {} shard runs ({} trials) into {}",
        shards.len(),
        trials,
        out.shown
    );
    if !complete {
        eprintln!("note: shards are missing; the merged run is marked interrupted");
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
        let run_id = name
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

struct ShardRun {
    dir: PathBuf,
    manifest: Manifest,
}

fn read_shards(runs: &[PathBuf]) -> anyhow::Result<Vec<ShardRun>> {
    runs.iter()
        .map(|dir| {
            let manifest = Manifest::read(dir)
                .with_context(|| format!("{} is not a run's trace directory", dir.display()))?;
            if manifest.shard.is_none() {
                bail!(
                    "run {} is not a shard (it was not run with --shard); only shards of one plan can be merged",
                    manifest.run_id
                );
            }
            if tack_trace::run_in_progress(dir) {
                bail!("run {} is still running; merge it once it has finished", manifest.run_id);
            }
            Ok(ShardRun {
                dir: dir.clone(),
                manifest,
            })
        })
        .collect()
}

/// Checks that the shards are slices of one plan measured on one setup, and
/// says whether every shard is there.
fn check_together(shards: &[ShardRun], allow_partial: bool) -> anyhow::Result<bool> {
    let Some(first) = shards.first() else {
        bail!("no runs to merge");
    };
    let base = &first.manifest;
    let mut seen = BTreeSet::new();
    for shard in shards {
        let m = &shard.manifest;
        if let Some(what) = base.plan_difference(m) {
            bail!(
                "run {} does not belong with run {}: {what}; shards must come from one plan",
                m.run_id,
                base.run_id
            );
        }
        let drift = tack_trace::drift(base, m);
        if !drift.tasks.is_empty() || !drift.environment.is_empty() {
            bail!(
                "run {} drifted from run {}: {}",
                m.run_id,
                base.run_id,
                drift.describe().join("; ")
            );
        }
        if let Some(index) = m.shard.as_ref().map(|s| s.index)
            && !seen.insert(index)
        {
            bail!(
                "run {} is shard {index}, which another run already is",
                m.run_id
            );
        }
    }
    let count = base.shard.as_ref().map_or(0, |s| s.count);
    let missing: Vec<String> = (1..=count)
        .filter(|index| !seen.contains(index))
        .map(|index| format!("{index}/{count}"))
        .collect();
    if !missing.is_empty() && !allow_partial {
        bail!(
            "shard(s) {} missing; pass every shard's run, or --allow-partial to merge without them",
            missing.join(", ")
        );
    }
    Ok(missing.is_empty())
}

/// Counts the trials, refusing a trial id recorded by two shards.
fn trial_files(shards: &[ShardRun]) -> anyhow::Result<usize> {
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    for shard in shards {
        for trial_id in tack_trace::stored_trial_ids(&shard.dir)? {
            if let Some(other) = owner.insert(trial_id.clone(), &shard.manifest.run_id) {
                bail!(
                    "trial {trial_id} is in both run {other} and run {}; each trial must come from one shard",
                    shard.manifest.run_id
                );
            }
        }
    }
    Ok(owner.len())
}

/// Copies every shard's parts, and the journals of trials a shard was
/// interrupted in (so `tack report` can recover them as for any run), then
/// compacts: the merged run has as few parts as a single run would, and a
/// message that several shards stored is kept once.
fn copy_tables(shards: &[ShardRun], out: &Path) -> anyhow::Result<()> {
    for shard in shards {
        tack_trace::adopt_parts(&shard.dir, out).with_context(|| {
            format!(
                "could not copy run {} into {}",
                shard.manifest.run_id,
                out.display()
            )
        })?;
    }
    tack_trace::compact(out, tack_trace::PartLimits::default())
        .with_context(|| format!("could not compact {}", out.display()))?;
    Ok(())
}

fn merged_manifest(shards: &[ShardRun], run_id: String, complete: bool) -> Manifest {
    let manifests: Vec<&Manifest> = shards.iter().map(|s| &s.manifest).collect();
    let mut merged = manifests[0].clone();
    merged.run_id = run_id;
    merged.shard = None;
    merged.merged_from = manifests.iter().map(|m| m.run_id.clone()).collect();
    merged.command_line = std::env::args().collect();
    merged.started_at = manifests
        .iter()
        .map(|m| m.started_at.clone())
        .min()
        .unwrap_or_default();
    // RFC 3339 times in UTC sort as text.
    merged.finished_at = manifests.iter().filter_map(|m| m.finished_at.clone()).max();
    let all_finished = manifests.iter().all(|m| m.status == RunStatus::Finished);
    merged.status = if complete && all_finished {
        RunStatus::Finished
    } else {
        RunStatus::Interrupted
    };
    if let Some(print) = merged.fingerprint.as_mut() {
        for (variant, fingerprint) in &mut print.variants {
            let answered: BTreeSet<String> = manifests
                .iter()
                .filter_map(|m| m.fingerprint.as_ref()?.variants.get(variant))
                .flat_map(|v| v.models_answered.iter().cloned())
                .collect();
            fingerprint.models_answered = answered.into_iter().collect();
        }
    }
    merged
}
