//! Spans sent while a run runs (`tack run --otlp`). The runner writes
//! traces and nothing else; this reads each finished trial back from the
//! run directory once its part is on disk (the runner closes parts on a
//! timer for it) and sends it with the same mapping `tack export otlp` uses.
//!
//! It never holds the run up: trials are announced through an unbounded
//! channel of ids, reading and sending happen on their own task, and a
//! collector that fails is left alone for a while, the spans meanwhile
//! counted as dropped, so a dead or silent collector costs spans, not time.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::trace::v1::Span;
use serde::Serialize;
use tack_analysis::{RunTables, TrialTrace};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{BATCH, Exporter, RunContext, Sent, Target, trial_spans};

/// What a run streamed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Streamed {
    pub target: Option<Target>,
    /// Trials whose spans were sent or counted as dropped.
    pub trials: u64,
    pub sent: Sent,
    /// Trials announced but never found in the run directory (the run
    /// stopped before their part was written): nothing of them was sent.
    pub unread_trials: u64,
    /// Why the unread trials were not read, when reading failed.
    pub read_error: Option<String>,
}

enum Note {
    Run(PathBuf),
    Finished(String),
}

/// Streams one run's trials to a collector.
pub struct Streamer {
    notes: mpsc::UnboundedSender<Note>,
    task: JoinHandle<Streamed>,
}

/// How long a collector that failed is left alone before the next try.
const BACKOFF: Duration = Duration::from_secs(5);
/// Longer than any run's last flush.
const FOREVER: Duration = Duration::from_secs(86_400);

impl Streamer {
    /// Starts the sending task on the current Tokio runtime; it looks for
    /// finished trials every `every`. The HTTP client is made on that task,
    /// beside the run's start rather than before it.
    pub fn start(target: Target, content: bool, every: Duration) -> Streamer {
        let (notes, inbox) = mpsc::unbounded_channel();
        let task = tokio::spawn(stream(target, content, every, inbox));
        Streamer { notes, task }
    }

    /// The run's directory, once the runner has made it.
    pub fn run_started(&self, run_dir: PathBuf) {
        // The task ends only after `finish` drops the sender.
        let _ = self.notes.send(Note::Run(run_dir));
    }

    /// A trial finished: its spans go out once its part is on disk.
    pub fn trial_finished(&self, trial_id: String) {
        let _ = self.notes.send(Note::Finished(trial_id));
    }

    /// After the run: sends what is left (the run has written every part)
    /// and says what went where. A collector that fails here gets one try.
    pub async fn finish(self) -> Streamed {
        drop(self.notes);
        self.task.await.unwrap_or_else(|join| Streamed {
            read_error: Some(format!("the OTLP stream crashed: {join}")),
            ..Streamed::default()
        })
    }
}

/// The sending task: collects finished trial ids, every `every` reads those
/// now on disk, maps and sends them.
async fn stream(
    target: Target,
    content: bool,
    every: Duration,
    mut inbox: mpsc::UnboundedReceiver<Note>,
) -> Streamed {
    let exporter = match Exporter::new(target.clone()) {
        Ok(exporter) => exporter,
        Err(error) => {
            // Nothing can be sent: every trial announced is said unread.
            let mut unread = 0;
            while let Some(note) = inbox.recv().await {
                unread += u64::from(matches!(note, Note::Finished(_)));
            }
            return Streamed {
                target: Some(target),
                unread_trials: unread,
                read_error: Some(error.to_string()),
                ..Streamed::default()
            };
        }
    };
    let mut state = State {
        exporter,
        content,
        run_dir: None,
        context: None,
        index: PartIndex::default(),
        pending: Vec::new(),
        down_until: None,
        read_error: None,
        streamed: Streamed::default(),
    };
    state.streamed.target = Some(state.exporter.target().clone());
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            note = inbox.recv() => match note {
                Some(Note::Run(dir)) => state.started(dir),
                Some(Note::Finished(id)) => state.pending.push(id),
                None => break,
            },
            _ = tick.tick() => state.send_ready(false).await,
        }
    }
    state.send_ready(true).await;
    state.streamed.unread_trials = state.pending.len() as u64;
    if !state.pending.is_empty() {
        state.streamed.read_error = state.read_error;
    }
    state.streamed
}

struct State {
    exporter: Exporter,
    content: bool,
    run_dir: Option<PathBuf>,
    /// What every span of the run carries: read once, from its manifest.
    context: Option<RunContext>,
    index: PartIndex,
    /// Finished trials not yet read back.
    pending: Vec<String>,
    /// A collector that failed is not asked again before this.
    down_until: Option<Instant>,
    /// The last failure to read the traces back: a part renamed under the
    /// reader heals at the next look; only one that never does is said.
    read_error: Option<String>,
    streamed: Streamed,
}

impl State {
    /// The run's directory is made: its manifest says what every span
    /// carries, and the parts already there hold none of its new trials.
    fn started(&mut self, run_dir: PathBuf) {
        match tack_trace::Manifest::read(&run_dir) {
            Ok(manifest) => {
                self.context = Some(RunContext {
                    run_id: manifest.run_id.clone(),
                    simulated: crate::simulated_variants(&manifest),
                    content: self.content,
                })
            }
            Err(error) => self.read_error = Some(error.to_string()),
        }
        if let Err(error) = self.index.skip_existing(&run_dir) {
            self.read_error = Some(error);
        }
        self.run_dir = Some(run_dir);
    }

    /// Reads the pending trials that are on disk and sends their spans, a
    /// batch of trials per request. At the end (`last`), a collector that
    /// fails gets no second request: the rest is counted as dropped.
    async fn send_ready(&mut self, last: bool) {
        let (Some(run_dir), Some(context)) = (self.run_dir.clone(), self.context.clone()) else {
            return;
        };
        if self.pending.is_empty() {
            return;
        }
        let mut index = std::mem::take(&mut self.index);
        let ids = self.pending.clone();
        let read = tokio::task::spawn_blocking(move || {
            let read = read_trials(&run_dir, &mut index, ids, last);
            (index, read)
        })
        .await;
        let read = match read {
            Ok((index, read)) => {
                self.index = index;
                read
            }
            Err(join) => Err(format!("reading the traces back crashed: {join}")),
        };
        let (traces, unread) = match read {
            Ok(read) => read,
            Err(error) => {
                // A part renamed under the reader (the run's compaction): the
                // next look finds the trials in the part that replaced it.
                self.read_error = Some(error);
                return;
            }
        };
        self.pending = unread;
        for batch in traces.chunks(BATCH) {
            let spans: Vec<Span> = batch
                .iter()
                .flat_map(|trace| trial_spans(trace, &context))
                .collect();
            self.streamed.trials += batch.len() as u64;
            if self.down_until.is_some_and(|until| Instant::now() < until) {
                self.streamed.sent.dropped_spans += spans.len() as u64;
                continue;
            }
            if !self.exporter.send(spans, &mut self.streamed.sent).await {
                // Left alone for a while; at the end for good, so a collector
                // that is gone costs one timeout, not one per batch.
                let wait = if last { FOREVER } else { BACKOFF };
                self.down_until = Some(Instant::now() + wait);
            }
        }
    }
}

/// A read: the traces found, the ids not found yet.
type Read = (Vec<TrialTrace>, Vec<String>);

/// The traces of `ids` that the run directory holds; the ids not there yet
/// come back. Only parts `index` has not
/// seen are listed and read: each look costs the new parts, not the run.
fn read_trials(
    run_dir: &Path,
    index: &mut PartIndex,
    ids: Vec<String>,
    all_announced: bool,
) -> Result<Read, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    index.look(run_dir, &ids, all_announced)?;
    let (parts, located) = index.holding(&ids);
    if located.is_empty() {
        return Ok((Vec::new(), ids));
    }
    let tables = RunTables::open_parts(run_dir, &parts).map_err(|e| text(&e))?;
    let traces = tack_analysis::load_trials(&tables, &located).map_err(|e| text(&e))?;
    let found: HashSet<&str> = traces.iter().map(|t| t.trial.trial_id.as_str()).collect();
    index.forget(&found);
    let unread = ids
        .iter()
        .filter(|id| !found.contains(id.as_str()))
        .cloned()
        .collect();
    Ok((traces, unread))
}

/// Which part holds each finished trial not yet sent, from the run's parts
/// as they appear.
#[derive(Debug, Default)]
struct PartIndex {
    /// Part file names already read.
    seen: HashSet<String>,
    /// Trial id → the part holding it, and the look that found it.
    located: HashMap<String, (String, u64)>,
    looks: u64,
}

/// Looks after which a trial found in a part but never announced is
/// forgotten: a part is visible a moment before its trials are announced,
/// never for long; what stays unclaimed was written by the run's
/// compaction, or is a trial of an earlier session.
const UNCLAIMED_LOOKS: u64 = 5;

impl PartIndex {
    /// The parts there before the run's first trial: they hold none of its
    /// trials.
    fn skip_existing(&mut self, run_dir: &Path) -> Result<(), String> {
        self.seen.extend(part_names(run_dir)?);
        Ok(())
    }

    /// Reads the trial ids of the parts not seen before. With
    /// `all_announced`, only the ids in `pending` are kept.
    fn look(
        &mut self,
        run_dir: &Path,
        pending: &[String],
        all_announced: bool,
    ) -> Result<(), String> {
        self.looks += 1;
        let looks = self.looks;
        let wanted: HashSet<&str> = pending.iter().map(String::as_str).collect();
        self.located.retain(|id, (_, found)| {
            wanted.contains(id.as_str()) || looks.saturating_sub(*found) <= UNCLAIMED_LOOKS
        });
        let new: Vec<String> = part_names(run_dir)?
            .into_iter()
            .filter(|name| !self.seen.contains(name))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        for (part, ids) in tack_trace::trial_ids_in(run_dir, &new).map_err(|e| e.to_string())? {
            for id in ids {
                if !all_announced || wanted.contains(id.as_str()) {
                    self.located.insert(id, (part.clone(), looks));
                }
            }
            self.seen.insert(part);
        }
        Ok(())
    }

    /// The parts holding those of `ids` that were found, and those ids.
    fn holding(&self, ids: &[String]) -> (Vec<String>, Vec<String>) {
        let mut parts = BTreeSet::new();
        let mut located = Vec::new();
        for id in ids {
            if let Some((part, _)) = self.located.get(id) {
                parts.insert(part.clone());
                located.push(id.clone());
            }
        }
        (parts.into_iter().collect(), located)
    }

    fn forget(&mut self, sent: &HashSet<&str>) {
        self.located.retain(|id, _| !sent.contains(id.as_str()));
    }
}

/// The names of the run's trials part files.
fn part_names(run_dir: &Path) -> Result<Vec<String>, String> {
    let files = tack_trace::table_files(run_dir, tack_trace::schema::TRIALS_DIR)
        .map_err(|e| e.to_string())?;
    Ok(files
        .iter()
        .filter_map(|path| path.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .collect())
}
