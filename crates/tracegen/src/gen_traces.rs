//! `tack-tracegen gen-traces`: a synthetic run written through tack-trace's own
//! writer, so its parts, content-addressed messages and manifest are exactly
//! what `tack run` leaves. One thread draws the trials and deals them round
//! the writers; each writer records its share as a shard of the run, and the
//! shards become one run as `tack merge` makes them (their parts adopted,
//! then compacted). Memory holds each writer's open part and message ids,
//! not the run. Encoding and compressing the parts is nine tenths of the
//! work, so writers on every core make a ten-million-trial run in under an
//! hour on two cores instead of nearly one and a half.

use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::time::Instant;

use anyhow::{Context, bail};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tack_protocol::Event;
use tack_trace::{Manifest, RunStatus, RunWriter, SuiteInfo};

use crate::synth::{Attempt, Shape, TrialSlot, trial_events};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Planned trials (variant × task × trial index); reruns add attempts.
    pub trials: u64,
    /// Mean spans per trial the step counts aim at.
    pub spans_per_trial: u32,
    pub variants: usize,
    /// `None`: enough tasks for about twenty trials per variant and task,
    /// between 10 and 500.
    pub tasks: Option<usize>,
    pub seed: u64,
    /// The run directory to create; its name is the run id.
    pub out: PathBuf,
    /// Threads that encode and write parts; the run's content does not
    /// depend on it.
    pub writers: usize,
}

/// What was generated.
#[derive(Debug, Clone, Serialize)]
pub struct GenSummary {
    pub run_dir: PathBuf,
    pub trials: u64,
    /// Rows of the trials table: trials plus reruns.
    pub attempts: u64,
    pub spans: u64,
    pub variants: usize,
    pub tasks: usize,
    pub trials_per_task: u32,
    pub seconds: f64,
    pub bytes: u64,
    pub files: u64,
}

/// The first trial starts at 2026-06-01T00:00:00Z; one starts every 400 ms
/// on average, as a run with a few dozen jobs starts them.
const RUN_START_MS: i64 = 1_780_272_000_000;

/// Writes the run; `progress` is told how many planned trials were drawn,
/// about every hundredth of them.
pub fn gen_traces(options: &GenOptions, progress: &dyn Fn(u64)) -> anyhow::Result<GenSummary> {
    let clock = Instant::now();
    let (root, run_id) = split_out(&options.out)?;
    let tasks = options.tasks.unwrap_or_else(|| {
        let per_task = options.variants.max(1) as u64 * 20;
        (options.trials / per_task).clamp(10, 500) as usize
    });
    let shape = Shape::new(
        options.trials,
        options.variants,
        tasks,
        options.spans_per_trial,
        options.seed,
    );
    let mut manifest = manifest(&shape, &run_id, options.seed);
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let writer = RunWriter::create(&root, &manifest)?;
    // The writers' shards, beside the run and hidden from run listings.
    let scratch = root.join(format!(".{run_id}.writers"));
    let shards = (0..options.writers.max(1))
        .map(|k| RunWriter::create(&scratch.join(k.to_string()), &manifest))
        .collect::<Result<Vec<_>, _>>()?;
    let (attempts, spans) = record_in_shards(&shape, &run_id, options, &shards, progress)?;
    for shard in &shards {
        shard.flush()?;
        tack_trace::adopt_parts(shard.dir(), writer.dir())?;
    }
    std::fs::remove_dir_all(&scratch).with_context(|| format!("removing {}", scratch.display()))?;
    manifest.status = RunStatus::Finished;
    manifest.finished_at = Some(tack_protocol::time::rfc3339_of_ms(
        RUN_START_MS + options.trials as i64 * 400,
    ));
    writer.close(&manifest)?;
    let (files, bytes) = disk_usage(writer.dir())?;
    Ok(GenSummary {
        run_dir: writer.dir().to_path_buf(),
        trials: options.trials,
        attempts,
        spans,
        variants: shape.variants.len(),
        tasks: shape.tasks.len(),
        trials_per_task: shape.trials_per_task,
        seconds: clock.elapsed().as_secs_f64(),
        bytes,
        files,
    })
}

/// Draws the trials on this thread and records attempt `i` with shard
/// `i mod shards`, each shard on a thread of its own; returns the attempts
/// and spans recorded.
fn record_in_shards(
    shape: &Shape,
    run_id: &str,
    options: &GenOptions,
    shards: &[RunWriter],
    progress: &dyn Fn(u64),
) -> anyhow::Result<(u64, u64)> {
    std::thread::scope(|scope| {
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for shard in shards {
            let (send, receive) = sync_channel::<Vec<Event>>(64);
            senders.push(send);
            threads.push(scope.spawn(move || -> anyhow::Result<(u64, u64)> {
                let (mut attempts, mut spans) = (0u64, 0u64);
                for events in receive {
                    attempts += 1;
                    spans += events.iter().filter(|e| is_span(e)).count() as u64;
                    shard.record_trial(events)?;
                }
                Ok((attempts, spans))
            }));
        }
        let mut dealt = 0usize;
        let every = (options.trials / 100).max(1);
        let mut next_report = every;
        draw_trials(shape, run_id, options, |events, position| {
            if position >= next_report {
                progress(position);
                next_report = position + every;
            }
            let sent = senders[dealt % senders.len()].send(events).is_ok();
            dealt += 1;
            sent
        });
        // Closing the channels ends the writers.
        drop(senders);
        let (mut attempts, mut spans) = (0, 0);
        for thread in threads {
            let Ok(recorded) = thread.join() else {
                bail!("a trace writer stopped unexpectedly; this is a bug in tack-tracegen");
            };
            let (a, s) = recorded?;
            attempts += a;
            spans += s;
        }
        Ok((attempts, spans))
    })
}

/// `out`'s parent and name; `out` must not exist yet.
fn split_out(out: &Path) -> anyhow::Result<(PathBuf, String)> {
    if out.exists() {
        bail!(
            "{} already exists; pass a new directory (the run is written there)",
            out.display()
        );
    }
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .with_context(|| format!("{} does not end in a run name", out.display()))?;
    let root = match out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((root, name.to_string()))
}

/// Draws every attempt of every planned trial in plan order (variant, task,
/// trial index) and hands each, with the trial's position in the plan, to
/// `record` until it returns false.
fn draw_trials(
    shape: &Shape,
    run_id: &str,
    options: &GenOptions,
    mut record: impl FnMut(Vec<Event>, u64) -> bool,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed ^ 0x7ac6_be9c_5eed_0001);
    let mut position = 0u64;
    for variant in &shape.variants {
        for task in &shape.tasks {
            for trial_index in 0..shape.trials_per_task {
                if position >= options.trials {
                    return;
                }
                let started = RUN_START_MS + position as i64 * 400 + rng.random_range(0..400);
                let seed = rng.random::<u64>();
                for (attempt, kind) in (0u32..).zip(Attempt::chain(&mut rng)) {
                    let slot = TrialSlot {
                        run_id,
                        variant,
                        task,
                        trial_index,
                        attempt,
                        seed,
                        started_at_ms: started + i64::from(attempt) * 60_000,
                    };
                    if !record(trial_events(shape, &slot, kind, &mut rng), position) {
                        return;
                    }
                }
                position += 1;
            }
        }
    }
}

fn is_span(event: &Event) -> bool {
    matches!(
        event,
        Event::ModelCall(_) | Event::ToolCall(_) | Event::Approval(_) | Event::Check(_)
    )
}

fn manifest(shape: &Shape, run_id: &str, seed: u64) -> Manifest {
    let suite = SuiteInfo {
        name: "synthetic".to_string(),
        path: "(generated by tack-tracegen gen-traces)".to_string(),
        content_hash: format!("{seed:064x}"),
    };
    let tasks = shape.tasks.iter().map(|t| t.name.clone()).collect();
    Manifest {
        trials_per_task: shape.trials_per_task,
        seed,
        jobs: 32,
        started_at: tack_protocol::time::rfc3339_of_ms(RUN_START_MS),
        ..Manifest::start(run_id.to_string(), suite, shape.variant_infos(), tasks)
    }
}

/// Files and bytes under `dir`.
fn disk_usage(dir: &Path) -> anyhow::Result<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            let (f, b) = disk_usage(&entry.path())?;
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += meta.len();
        }
    }
    Ok((files, bytes))
}
