use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use tack_protocol::{
    Event, EventSink, RunTotals, SinkError, StopReason, TrialFinished, TrialOutcome, TrialStarted,
    Usage,
};

use crate::fsutil::temporary_path;
use crate::rows::{messages_batch, spans_batch, trial_batch};
use crate::schema::{JOURNAL_DIR, MESSAGES_DIR, SPANS_DIR, TRIALS_DIR};
use crate::{Manifest, RunStatus, TraceError};

/// Holds the id of the process writing the run, while it runs.
const PID_FILE: &str = "run.pid";

/// Whether a live process is still writing this run: its journals belong to
/// trials in progress, not to a crash.
pub fn run_in_progress(run_dir: &Path) -> bool {
    fs::read_to_string(run_dir.join(PID_FILE))
        .ok()
        .and_then(|pid| pid.trim().parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

/// A run's trace directory, being written.
#[derive(Debug, Clone)]
pub struct RunWriter {
    dir: PathBuf,
}

impl RunWriter {
    /// Creates `root/<run-id>/` with its table directories and manifest.
    pub fn create(root: &Path, manifest: &Manifest) -> Result<RunWriter, TraceError> {
        let dir = root.join(&manifest.run_id);
        for sub in [TRIALS_DIR, SPANS_DIR, MESSAGES_DIR, JOURNAL_DIR] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).map_err(|e| TraceError::io(&path, e))?;
        }
        manifest.write(&dir)?;
        let pid = dir.join(PID_FILE);
        fs::write(&pid, std::process::id().to_string()).map_err(|e| TraceError::io(&pid, e))?;
        Ok(RunWriter { dir })
    }

    /// Writes the final manifest and marks the run as no longer in progress.
    pub fn close(&self, manifest: &Manifest) -> Result<(), TraceError> {
        manifest.write(&self.dir)?;
        let pid = self.dir.join(PID_FILE);
        fs::remove_file(&pid).map_err(|e| TraceError::io(&pid, e))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts recording a trial: its journal is created and the start event
    /// written to it.
    pub fn trial(&self, started: TrialStarted) -> Result<TrialRecorder, TraceError> {
        let path = self
            .dir
            .join(JOURNAL_DIR)
            .join(format!("{}.jsonl", started.trial_id));
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| TraceError::io(&path, e))?;
        let mut recorder = TrialRecorder {
            run_dir: self.dir.clone(),
            journal_path: path,
            journal,
            started: started.clone(),
            events: Vec::new(),
        };
        recorder
            .record(Event::TrialStarted(started))
            .map_err(|e| TraceError::io(&recorder.journal_path, std::io::Error::other(e.0)))?;
        Ok(recorder)
    }
}

#[derive(Serialize, Deserialize)]
struct JournalLine {
    seq: u64,
    event: Event,
}

/// Records one trial: every event is appended to the journal and flushed as it
/// arrives; `finish` turns the trial into Parquet.
#[derive(Debug)]
pub struct TrialRecorder {
    run_dir: PathBuf,
    journal_path: PathBuf,
    journal: File,
    started: TrialStarted,
    events: Vec<(u64, Event)>,
}

impl EventSink for TrialRecorder {
    fn record(&mut self, event: Event) -> Result<(), SinkError> {
        let seq = self.events.len() as u64;
        let line = JournalLine { seq, event };
        let mut text = serde_json::to_string(&line).map_err(|e| SinkError(e.to_string()))?;
        text.push('\n');
        self.journal.write_all(text.as_bytes())?;
        self.journal.flush()?;
        self.events.push((seq, line.event));
        Ok(())
    }
}

impl TrialRecorder {
    pub fn trial_id(&self) -> &str {
        &self.started.trial_id
    }

    /// Writes the trial's rows to the three tables and removes the journal.
    /// The last event must be `TrialFinished`.
    pub fn finish(self) -> Result<(), TraceError> {
        write_trial(&self.run_dir, &self.started, &self.events)?;
        fs::remove_file(&self.journal_path).map_err(|e| TraceError::io(&self.journal_path, e))
    }
}

fn write_trial(
    run_dir: &Path,
    started: &TrialStarted,
    events: &[(u64, Event)],
) -> Result<(), TraceError> {
    let finished = events
        .iter()
        .rev()
        .find_map(|(_, e)| match e {
            Event::TrialFinished(f) => Some(f.clone()),
            _ => None,
        })
        .ok_or_else(|| TraceError::Format {
            path: run_dir.to_path_buf(),
            message: format!("trial {} has no TrialFinished event", started.trial_id),
        })?;
    let tool_calls = events
        .iter()
        .filter(|(_, e)| matches!(e, Event::ToolCall(_)))
        .count() as u32;
    let file = format!("{}.parquet", started.trial_id);
    // Spans and messages first: a trial row only appears once its details are
    // readable, so readers that start from `trials/` never miss them.
    write_parquet(
        &run_dir.join(SPANS_DIR).join(&file),
        &spans_batch(started, events)?,
    )?;
    write_parquet(
        &run_dir.join(MESSAGES_DIR).join(&file),
        &messages_batch(started, events)?,
    )?;
    write_parquet(
        &run_dir.join(TRIALS_DIR).join(&file),
        &trial_batch(started, &finished, tool_calls)?,
    )
}

fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<(), TraceError> {
    let parquet_error = |source| TraceError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let temporary = temporary_path(path);
    let file = File::create(&temporary).map_err(|e| TraceError::io(&temporary, e))?;
    let level = ZstdLevel::try_new(3).map_err(parquet_error)?;
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .build();
    let mut writer =
        ArrowWriter::try_new(file, batch.schema(), Some(properties)).map_err(parquet_error)?;
    writer.write(batch).map_err(parquet_error)?;
    let file = writer.into_inner().map_err(parquet_error)?;
    file.sync_all().map_err(|e| TraceError::io(&temporary, e))?;
    fs::rename(&temporary, path).map_err(|e| TraceError::io(path, e))
}

/// Turns the journals of trials that never finished (tack was killed) into
/// Parquet, marked `cancelled` with the reason, so an interrupted run keeps
/// every event it recorded. Returns how many trials were recovered; a run
/// still in progress is left alone. The manifest of a recovered run that
/// still says `running` is marked `interrupted`.
pub fn recover_journals(run_dir: &Path) -> Result<usize, TraceError> {
    if run_in_progress(run_dir) {
        return Ok(0);
    }
    let journal_dir = run_dir.join(JOURNAL_DIR);
    let Ok(entries) = fs::read_dir(&journal_dir) else {
        return Ok(0);
    };
    let mut recovered = 0;
    for entry in entries {
        let path = entry.map_err(|e| TraceError::io(&journal_dir, e))?.path();
        if path.extension().is_some_and(|ext| ext == "jsonl") {
            recover_journal(run_dir, &path)?;
            recovered += 1;
        }
    }
    let mut manifest = Manifest::read(run_dir)?;
    if manifest.status == RunStatus::Running {
        manifest.status = RunStatus::Interrupted;
        manifest.write(run_dir)?;
    }
    Ok(recovered)
}

fn recover_journal(run_dir: &Path, path: &Path) -> Result<(), TraceError> {
    let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut events: Vec<(u64, Event)> = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| TraceError::io(path, e))?;
        // The line being written when tack died may be torn; everything
        // before it is intact.
        match serde_json::from_str::<JournalLine>(&line) {
            Ok(entry) => events.push((entry.seq, entry.event)),
            Err(_) => break,
        }
    }
    let Some(Event::TrialStarted(started)) = events.first().map(|(_, e)| e.clone()) else {
        return Err(TraceError::Format {
            path: path.to_path_buf(),
            message:
                "journal does not start with TrialStarted; delete it if the trial is not needed"
                    .to_string(),
        });
    };
    if !events
        .iter()
        .any(|(_, e)| matches!(e, Event::TrialFinished(_)))
    {
        let steps = events
            .iter()
            .filter(|(_, e)| matches!(e, Event::ModelCall(_)))
            .count() as u32;
        let tool_calls = events
            .iter()
            .filter(|(_, e)| matches!(e, Event::ToolCall(_)))
            .count() as u32;
        let mut usage = Usage::default();
        for (_, event) in &events {
            if let Event::ModelCall(call) = event {
                usage += call.usage;
            }
        }
        let finished = TrialFinished {
            outcome: TrialOutcome::Cancelled,
            stop_reason: StopReason::Cancelled,
            totals: RunTotals {
                steps,
                usage,
                tool_calls,
                ..RunTotals::default()
            },
            feedback_rounds: 0,
            tampered: false,
            checks_passed: None,
            duration_ms: 0,
            finished_at_ms: started.started_at_ms,
            error: Some(
                "the run was interrupted before this trial finished; recovered from its journal"
                    .to_string(),
            ),
        };
        events.push((events.len() as u64, Event::TrialFinished(finished)));
    }
    write_trial(run_dir, &started, &events)?;
    fs::remove_file(path).map_err(|e| TraceError::io(path, e))
}
