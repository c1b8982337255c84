//! Which failed trials an analysis lists: all of them, or at a million
//! trials the first few of each variant and task.

use crate::frame::Frame;
use crate::rollup::first_per_task;
use crate::{AnalysisError, FailedLimit};
use polars::prelude::*;
use std::path::Path;
use tack_trace::schema::{TRIALS_DIR, col};

/// The failed trials to list, and how many failed in all.
pub(crate) struct Failed {
    pub ids: Vec<String>,
    pub total: u64,
}

/// The failed trials of `kept` (the rollup's failed rows: every failed
/// final attempt, or the first `limit.per_task` of each variant and task)
/// that `limit` lists, of `total` failed: the first `per_task` of each
/// variant and task by trial index, then at most `total`, taking every
/// variant and task's first failure before any one's second, the variants in
/// turn (manifest order): each variant's first failing task, then each
/// one's second, …
pub(crate) fn select(
    kept: Option<LazyFrame>,
    total: u64,
    dir: &Path,
    limit: Option<FailedLimit>,
    variants: &[String],
    tasks: &[String],
) -> Result<Failed, AnalysisError> {
    let none = Failed {
        ids: Vec::new(),
        total,
    };
    let Some(kept) = kept else {
        return Ok(none);
    };
    let Some(limit) = limit else {
        let frame = Frame::collect(kept, dir, TRIALS_DIR)?;
        return Ok(Failed {
            ids: frame.strs(col::TRIAL_ID)?,
            total,
        });
    };
    if limit.per_task == 0 || limit.total == 0 {
        return Ok(none);
    }
    let frame = Frame::collect(first_per_task(kept, limit.per_task), dir, TRIALS_DIR)?;
    let ids = frame.strs(col::TRIAL_ID)?;
    let variant = frame.strs(col::VARIANT)?;
    let task = frame.strs(col::TASK)?;
    let index = frame.u32s(col::TRIAL_INDEX)?;
    let position = |list: &[String], name: &str| list.iter().position(|n| n == name);
    // Rank within its variant and task: rows come sorted by trial index.
    let mut keyed: Vec<Keyed> = Vec::with_capacity(ids.len());
    let mut rank = 0;
    for i in 0..ids.len() {
        let same_cell = i > 0 && variant[i] == variant[i - 1] && task[i] == task[i - 1];
        rank = if same_cell { rank + 1 } else { 0 };
        keyed.push((
            rank,
            position(variants, &variant[i]).unwrap_or(usize::MAX),
            position(tasks, &task[i]).unwrap_or(usize::MAX),
            index[i],
            ids[i].clone(),
        ));
    }
    keyed.sort();
    let mut fair = take_turns(keyed);
    fair.truncate(limit.total);
    Ok(Failed {
        ids: fair.into_iter().map(|(_, _, (.., id))| id).collect(),
        total,
    })
}

/// A failure keyed by rank, variant and task position, trial index.
type Keyed = (usize, usize, usize, u32, String);

/// `keyed` (sorted) reordered so that within a rank the variants take
/// turns: each variant's next task before any variant's one after. A cap
/// smaller than one rank (a thousand tasks, five hundred pages) then lists
/// every variant's failures, not only the first variant's.
fn take_turns(keyed: Vec<Keyed>) -> Vec<(usize, usize, Keyed)> {
    let mut turns: std::collections::HashMap<(usize, usize), usize> =
        std::collections::HashMap::new();
    let mut fair: Vec<(usize, usize, Keyed)> = keyed
        .into_iter()
        .map(|entry| {
            let turn = turns.entry((entry.0, entry.1)).or_default();
            let this = *turn;
            *turn += 1;
            (entry.0, this, entry)
        })
        .collect();
    fair.sort();
    fair
}
