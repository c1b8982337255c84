//! A running run's trials as their journals say, before their rows are in
//! a part: what a viewer shows of a run while it runs.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use tack_protocol::{Event, TrialOutcome};

use crate::schema::JOURNAL_DIR;
use crate::writer::JournalLine;

/// One journalled trial: started, and finished when its last line says so.
#[derive(Debug, Clone, PartialEq)]
pub struct JournaledTrial {
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    /// `None` while the trial runs.
    pub outcome: Option<TrialOutcome>,
}

/// A finished trial's `TrialFinished` line is at most this far from its
/// journal's end; only that much is read, whatever the journal's length.
const TAIL: u64 = 64 * 1024;

/// The trials journalled in `run_dir` (a journal stays until its trial's
/// part is written), in no particular order. A journal that cannot be read,
/// or whose first line is not complete yet, is left out.
pub fn journaled_trials(run_dir: &Path) -> Vec<JournaledTrial> {
    let Ok(entries) = std::fs::read_dir(run_dir.join(JOURNAL_DIR)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| journaled(&entry.path()))
        .collect()
}

/// The most of a journal's first line read: a trial's start, its task and
/// variant names and configuration, is a few KiB.
const FIRST_LINE: u64 = 1 << 20;

fn journaled(path: &Path) -> Option<JournaledTrial> {
    let mut file = crate::fsutil::open_run_file(path).ok()?;
    let mut first = String::new();
    // A trial's first line (its start) is short; a journal of a run from
    // elsewhere may hold a gigabyte with no line break.
    BufReader::new((&mut file).take(FIRST_LINE))
        .read_line(&mut first)
        .ok()?;
    let Ok(JournalLine {
        event: Event::TrialStarted(started),
        ..
    }) = serde_json::from_str::<JournalLine>(&first)
    else {
        return None;
    };
    let length = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(TAIL)))
        .ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    let last = tail.trim_end().rsplit('\n').next().unwrap_or("");
    let outcome = match serde_json::from_str::<JournalLine>(last) {
        Ok(JournalLine {
            event: Event::TrialFinished(finished),
            ..
        }) => Some(finished.outcome),
        _ => None,
    };
    Some(JournaledTrial {
        trial_id: started.trial_id,
        variant: started.variant,
        task: started.task,
        outcome,
    })
}
