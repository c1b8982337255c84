use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tack_protocol::{
    Event, EventSink, RunTotals, SinkError, SpanStatus, StopReason, TrialFinished, TrialOutcome,
    TrialStarted,
};

use crate::compact::{compact, finish_pending};
use crate::fsutil::open_run_file;
use crate::liveness::{Heartbeat, claim, run_in_progress};
use crate::parts::{PART_TABLES, PartLimits, PartWriter, TrialRows, parse_part_name};
use crate::rows::{Transcript, messages_batch, spans_batch, trial_batch};
use crate::schema::{JOURNAL_DIR, MESSAGES_DIR, SPANS_DIR, TRIALS_DIR};
use crate::{Manifest, RunStatus, TraceError};

/// A run's trace directory, being written. Clones share one part writer, so
/// the trials of a run, however many run at once, go into the same parts.
#[derive(Debug, Clone)]
pub struct RunWriter {
    dir: PathBuf,
    limits: PartLimits,
    parts: Arc<Mutex<PartWriter>>,
    /// Keeps the run's claim touched while any clone lives.
    _claim: Arc<Heartbeat>,
}

impl RunWriter {
    /// Creates `root/<run-id>/` with its table directories and manifest.
    pub fn create(root: &Path, manifest: &Manifest) -> Result<RunWriter, TraceError> {
        RunWriter::create_with_limits(root, manifest, PartLimits::default())
    }

    /// As [`RunWriter::create`], closing parts at `limits`.
    pub fn create_with_limits(
        root: &Path,
        manifest: &Manifest,
        limits: PartLimits,
    ) -> Result<RunWriter, TraceError> {
        let dir = root.join(&manifest.run_id);
        for sub in [TRIALS_DIR, SPANS_DIR, MESSAGES_DIR, JOURNAL_DIR] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).map_err(|e| TraceError::io(&path, e))?;
        }
        // Claimed before its manifest says it runs: a reader never sees
        // a running run without a writer.
        let claim = claim(&dir)?;
        manifest.write(&dir)?;
        RunWriter::over(dir, limits, claim)
    }

    /// Continues writing a run that stopped: new trials go into new parts
    /// beside the old ones. Recover the run's journals first
    /// ([`recover_journals`]): a journal left here would be taken for a
    /// trial of this process.
    pub fn reopen(run_dir: &Path, manifest: &Manifest) -> Result<RunWriter, TraceError> {
        if run_in_progress(run_dir) {
            return Err(TraceError::Format {
                path: run_dir.to_path_buf(),
                message: "another tack process is writing this run (see run.pid); wait for it \
                          to end or stop it first"
                    .to_string(),
            });
        }
        let journal = run_dir.join(JOURNAL_DIR);
        fs::create_dir_all(&journal).map_err(|e| TraceError::io(&journal, e))?;
        let claim = claim(run_dir)?;
        manifest.write(run_dir)?;
        RunWriter::over(run_dir.to_path_buf(), PartLimits::default(), claim)
    }

    fn over(dir: PathBuf, limits: PartLimits, claim: Heartbeat) -> Result<RunWriter, TraceError> {
        let parts = PartWriter::open(&dir, limits)?;
        Ok(RunWriter {
            dir,
            limits,
            parts: Arc::new(Mutex::new(parts)),
            _claim: Arc::new(claim),
        })
    }

    fn parts(&self) -> MutexGuard<'_, PartWriter> {
        // A panic while holding the lock leaves at worst a part that is not
        // yet visible; its trials still have their journals.
        self.parts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes every finished trial readable: the open part is closed.
    pub fn flush(&self) -> Result<(), TraceError> {
        self.parts().flush()
    }

    /// Closes the open part if it opened at least `age` ago: called on a
    /// timer, it bounds how long a finished trial stays invisible to readers
    /// of the running run when no other trial finishes to close its part.
    pub fn flush_older_than(&self, age: std::time::Duration) -> Result<(), TraceError> {
        self.parts().flush_older_than(age)
    }

    /// Closes the open part, compacts the run's parts, writes the final
    /// manifest and marks the run as no longer in progress.
    pub fn close(&self, manifest: &Manifest) -> Result<(), TraceError> {
        self.flush()?;
        compact(&self.dir, self.limits)?;
        manifest.write(&self.dir)?;
        crate::liveness::release(&self.dir)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records a finished trial whose events were kept elsewhere (an import,
    /// a synthetic trace): its rows go into the open part as
    /// [`TrialRecorder::finish`] puts them, but no journal is written, so
    /// the events are lost if the process dies before the part closes. The
    /// first event must be `TrialStarted`, the last `TrialFinished`.
    pub fn record_trial(&self, events: Vec<Event>) -> Result<(), TraceError> {
        let Some(Event::TrialStarted(started)) = events.first() else {
            return Err(TraceError::Format {
                path: self.dir.clone(),
                message: "a recorded trial must start with TrialStarted".to_string(),
            });
        };
        let started = started.clone();
        let events: Vec<(u64, Event)> = (0u64..).zip(events).collect();
        let rows = trial_rows(&self.dir, &started, &events, None)?;
        self.parts().append(rows)
    }

    /// Starts recording a trial: its journal is created and the start event
    /// written to it.
    pub fn trial(&self, started: TrialStarted) -> Result<TrialRecorder, TraceError> {
        let path = self
            .dir
            .join(JOURNAL_DIR)
            .join(format!("{}.jsonl", started.trial_id));
        let journal = crate::fsutil::create_fresh(&path).map_err(|e| TraceError::io(&path, e))?;
        let mut recorder = TrialRecorder {
            run_dir: self.dir.clone(),
            parts: self.parts.clone(),
            journal_path: path,
            journal,
            started: started.clone(),
            events: Vec::new(),
            pending: Vec::new(),
        };
        recorder
            .record(Event::TrialStarted(started))
            .map_err(|e| TraceError::io(&recorder.journal_path, std::io::Error::other(e)))?;
        Ok(recorder)
    }
}

/// One line of a trial's journal.
#[derive(Serialize, Deserialize)]
pub(crate) struct JournalLine {
    pub seq: u64,
    pub event: Event,
}

/// Records one trial: every event is appended to the journal as it arrives
/// (a call's span with the message that follows it at once, in one
/// write); `finish` hands the trial's rows to the run's open part.
#[derive(Debug)]
pub struct TrialRecorder {
    run_dir: PathBuf,
    parts: Arc<Mutex<PartWriter>>,
    journal_path: PathBuf,
    journal: File,
    started: TrialStarted,
    events: Vec<(u64, Event)>,
    /// Journal lines not written yet: a model or tool call's span waits
    /// here for the message recorded right after it (the answer, the
    /// result), so that the pair costs one write. A write is most of what
    /// an event costs the machine with a thousand trials at once.
    pending: Vec<u8>,
}

impl EventSink for TrialRecorder {
    fn record(&mut self, event: Event) -> Result<(), SinkError> {
        let seq = self.events.len() as u64;
        let line = JournalLine { seq, event };
        let held = self.pending.len();
        if let Err(error) = serde_json::to_writer(&mut self.pending, &line) {
            // No half line reaches the journal with the next write.
            self.pending.truncate(held);
            return Err(error.into());
        }
        self.pending.push(b'\n');
        // A failed call is not followed by its message: a retry may wait.
        let followed = matches!(
            &line.event,
            Event::ModelCall(call) if call.status == SpanStatus::Ok
        ) || matches!(&line.event, Event::ToolCall(_));
        self.events.push((seq, line.event));
        if !followed {
            self.write_pending()?;
        }
        Ok(())
    }
}

impl Drop for TrialRecorder {
    /// A span still held goes to the journal (best effort: a recorder is
    /// dropped unfinished only when its trial was cut off).
    fn drop(&mut self) {
        let _ = self.write_pending();
    }
}

impl TrialRecorder {
    pub fn trial_id(&self) -> &str {
        &self.started.trial_id
    }

    fn write_pending(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.journal.write_all(&self.pending)?;
        self.pending.clear();
        Ok(())
    }

    /// Adds the trial's rows to the run's open part. The journal stays until
    /// that part is on disk. The last event must be `TrialFinished`.
    pub fn finish(self) -> Result<(), TraceError> {
        let rows = trial_rows(
            &self.run_dir,
            &self.started,
            &self.events,
            Some(self.journal_path.clone()),
        )?;
        self.parts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .append(rows)
    }
}

fn trial_rows(
    run_dir: &Path,
    started: &TrialStarted,
    events: &[(u64, Event)],
    journal: Option<PathBuf>,
) -> Result<TrialRows, TraceError> {
    let finished = events
        .iter()
        .rev()
        .find_map(|(_, e)| match e {
            Event::TrialFinished(f) => Some(f),
            _ => None,
        })
        .ok_or_else(|| TraceError::Format {
            path: run_dir.to_path_buf(),
            message: format!("trial {} has no TrialFinished event", started.trial_id),
        })?;
    let transcript = Transcript::of(events);
    let entries: Vec<_> = transcript.entries.iter().collect();
    Ok(TrialRows {
        spans: spans_batch(started, events, &transcript)?,
        messages: messages_batch(started, &entries)?,
        trials: trial_batch(started, finished, &transcript)?,
        journal,
    })
}

/// Turns the journals of trials that never made it into a part (tack was
/// killed) into rows, so an interrupted run keeps every event it recorded: a
/// trial that had finished is stored as it ended, one cut off is stored as
/// `cancelled` with the reason. Returns how many trials were recovered; a run
/// still in progress is left alone. The manifest of a recovered run that
/// still says `running` is marked `interrupted`.
pub fn recover_journals(run_dir: &Path) -> Result<usize, TraceError> {
    if run_in_progress(run_dir) {
        return Ok(0);
    }
    crate::fsutil::check_run_dirs(run_dir)?;
    finish_pending(run_dir)?;
    remove_partial_parts(run_dir)?;
    let journals = journal_files(run_dir)?;
    let mut recovered = 0;
    if !journals.is_empty() {
        // A crash between a part's rename and its journals' removal leaves
        // journals of trials that are already stored.
        let stored = stored_trial_ids(run_dir)?;
        let mut parts = PartWriter::open(run_dir, PartLimits::default())?;
        for path in journals {
            match recover_journal(run_dir, &path, &stored)? {
                Some(rows) => {
                    parts.append(rows)?;
                    recovered += 1;
                }
                None => fs::remove_file(&path).map_err(|e| TraceError::io(&path, e))?,
            }
        }
        parts.flush()?;
    }
    let mut manifest = Manifest::read(run_dir)?;
    if manifest.status == RunStatus::Running {
        manifest.status = RunStatus::Interrupted;
        manifest.write(run_dir)?;
    }
    Ok(recovered)
}

fn journal_files(run_dir: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let dir = run_dir.join(JOURNAL_DIR);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| TraceError::io(&dir, e))?.path();
        if path.extension().is_some_and(|ext| ext == "jsonl") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parts a dead process was still writing: their trials are in journals.
/// A part is complete once its trials file is there (it is renamed last), so
/// a spans or messages file without one is removed too.
fn remove_partial_parts(run_dir: &Path) -> Result<(), TraceError> {
    for table in PART_TABLES {
        let dir = run_dir.join(table);
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let orphan = table != TRIALS_DIR
                && parse_part_name(&name).is_some()
                && !run_dir.join(TRIALS_DIR).join(&name).exists();
            if name.ends_with(".partial") || orphan {
                let path = entry.path();
                fs::remove_file(&path).map_err(|e| TraceError::io(&path, e))?;
            }
        }
    }
    Ok(())
}

/// Ids of the trials the run's tables hold.
pub fn stored_trial_ids(run_dir: &Path) -> Result<HashSet<String>, TraceError> {
    let mut ids = HashSet::new();
    if !run_dir.join(TRIALS_DIR).is_dir() {
        return Ok(ids);
    }
    for path in crate::table_files(run_dir, TRIALS_DIR)? {
        ids.extend(crate::reader::trial_ids_of(&path)?);
    }
    Ok(ids)
}

/// The longest journal line read: one event, its outputs cut to their
/// limits, is far shorter.
const MAX_JOURNAL_LINE: u64 = 256 << 20;

/// The rows of one journal's trial, or `None` when a part already holds it
/// or it recorded nothing.
fn recover_journal(
    run_dir: &Path,
    path: &Path,
    stored: &HashSet<String>,
) -> Result<Option<TrialRows>, TraceError> {
    let file = open_run_file(path).map_err(|e| TraceError::io(path, e))?;
    let mut events: Vec<(u64, Event)> = Vec::new();
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    loop {
        line.clear();
        // A line is one event, whose outputs are cut to their limits: one
        // longer than any tack writes is a damaged (or hostile) journal.
        let read = (&mut reader)
            .take(MAX_JOURNAL_LINE + 1)
            .read_line(&mut line)
            .map_err(|e| TraceError::io(path, e))?;
        if read == 0 {
            break;
        }
        if read as u64 > MAX_JOURNAL_LINE {
            return Err(TraceError::Format {
                path: path.to_path_buf(),
                message: format!(
                    "holds a line longer than {} MiB, more than tack writes: the journal is \
                     damaged; remove it to give up the trial it holds",
                    MAX_JOURNAL_LINE >> 20
                ),
            });
        }
        // The line being written when tack died may be torn; everything
        // before it is intact.
        match serde_json::from_str::<JournalLine>(&line) {
            Ok(entry) => events.push((entry.seq, entry.event)),
            Err(_) => break,
        }
    }
    if events.is_empty() {
        // Killed before the journal's first line was complete: the trial
        // recorded nothing, and runs again on resume.
        return Ok(None);
    }
    let Some(Event::TrialStarted(started)) = events.first().map(|(_, e)| e.clone()) else {
        return Err(TraceError::Format {
            path: path.to_path_buf(),
            message:
                "journal does not start with TrialStarted; delete it if the trial is not needed"
                    .to_string(),
        });
    };
    if stored.contains(&started.trial_id) {
        return Ok(None);
    }
    let counted = RunTotals::of(events.iter().map(|(_, e)| e));
    match events.iter_mut().find_map(|(_, e)| match e {
        Event::TrialFinished(finished) => Some(finished),
        _ => None,
    }) {
        // Journals written before `tool_calls` was a total read it as 0;
        // the calls themselves are in the journal.
        Some(finished) => finished.totals.tool_calls = counted.tool_calls,
        None => {
            // The journal's last write is when the trial was last heard of.
            let last_heard_ms = fs::symlink_metadata(path)
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(started.started_at_ms, |since| since.as_millis() as i64);
            events.push((
                events.len() as u64,
                Event::TrialFinished(cut_off(&started, counted, last_heard_ms)),
            ));
        }
    }
    trial_rows(run_dir, &started, &events, Some(path.to_path_buf())).map(Some)
}

/// How a trial cut off by a crash ended: cancelled, with what it had used
/// and as long as it had run when last heard of (`last_heard_ms`).
fn cut_off(started: &TrialStarted, totals: RunTotals, last_heard_ms: i64) -> TrialFinished {
    let finished_at_ms = last_heard_ms.max(started.started_at_ms);
    TrialFinished {
        outcome: TrialOutcome::Cancelled,
        stop_reason: StopReason::Cancelled,
        totals,
        feedback_rounds: 0,
        tampered: false,
        checks_passed: None,
        duration_ms: u64::try_from(finished_at_ms - started.started_at_ms).unwrap_or(0),
        finished_at_ms,
        error: Some(
            "the run was interrupted before this trial finished; recovered from its journal"
                .to_string(),
        ),
    }
}
