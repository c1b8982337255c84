//! Finding runs under a traces directory (`traces/<run-id>/`, each with its
//! manifest) by path or id, and trials in a run by id, with errors that
//! list what is there instead.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::{Manifest, TraceError};

/// A run or trial that is not where it was looked for.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error(
        "no run `{run}`: {} a run's trace directory (no manifest.json); {listing}",
        match tried.as_slice() {
            [one] => format!("{} is not", one.display()),
            tried => format!(
                "neither {} is",
                tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" nor ")
            ),
        }
    )]
    NoRun {
        run: String,
        /// Where it was looked for: the path given, and the run id under
        /// the traces directory when that is another place.
        tried: Vec<PathBuf>,
        /// The newest runs there are, or that there are none.
        listing: String,
    },
    #[error(
        "no trial `{trial}` in {}: {listing}; `tack query \"select trial_id, outcome from trials\" {}` lists them all",
        run_dir.display(),
        run_dir.display()
    )]
    NoTrial {
        trial: String,
        run_dir: PathBuf,
        /// The trial ids closest to the one asked for.
        listing: String,
    },
    #[error(
        "name a trial of {}: {listing}; `tack query \"select trial_id, outcome from trials\" {}` lists them all",
        run_dir.display(),
        run_dir.display()
    )]
    TrialNotNamed { run_dir: PathBuf, listing: String },
    #[error("not a run's trace directory (traces/<run-id>)")]
    NotARun(#[source] TraceError),
    #[error("the directory must be named after its run id, {run_id}; rename it back")]
    Renamed { run_id: String },
    #[error("a merged run cannot be resumed; resume its shards, then merge again")]
    Merged,
}

/// The ids of the runs under `traces` (directories with a manifest), sorted:
/// ids start with their start time, so oldest first.
pub fn run_ids(traces: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(traces) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join(Manifest::FILE_NAME).is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

/// `run` as a path holding a manifest, else as a run id under `traces`; the
/// error lists the newest runs there.
pub fn find_run(run: &str, traces: &Path) -> Result<PathBuf, RunsError> {
    let mut tried = vec![PathBuf::from(run)];
    if traces.join(run) != tried[0] {
        tried.push(traces.join(run));
    }
    if let Some(found) = tried
        .iter()
        .find(|dir| dir.join(Manifest::FILE_NAME).is_file())
    {
        return Ok(found.clone());
    }
    let runs = run_ids(traces);
    let listing = if runs.is_empty() {
        format!("there are no runs under {}", traces.display())
    } else {
        let newest: Vec<&str> = runs.iter().rev().take(5).map(String::as_str).collect();
        format!(
            "runs under {} (newest first): {}",
            traces.display(),
            newest.join(", ")
        )
    };
    Err(RunsError::NoRun {
        run: run.to_string(),
        tried,
        listing,
    })
}

/// The error of a command given a run but no trial: some of its trial ids.
pub fn trial_not_named(run_dir: &Path) -> RunsError {
    let listing = match trial_outcomes(run_dir) {
        Some(outcomes) if !outcomes.is_empty() => worth_a_look(outcomes),
        _ => closest(crate::stored_trial_ids(run_dir).unwrap_or_default(), ""),
    };
    RunsError::TrialNotNamed {
        run_dir: run_dir.to_path_buf(),
        listing,
    }
}

/// Every stored trial's id and outcome, when the trials table reads.
fn trial_outcomes(run_dir: &Path) -> Option<Vec<(String, String)>> {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    let columns = [crate::schema::col::TRIAL_ID, crate::schema::col::OUTCOME];
    let batches = crate::read_table_files(
        run_dir,
        crate::schema::TRIALS_DIR,
        crate::Columns::Only(&columns),
    )
    .ok()?;
    let mut outcomes = Vec::new();
    for (_, batch) in batches {
        let ids = batch.column_by_name(columns[0])?.as_string_opt::<i32>()?;
        let ends = batch.column_by_name(columns[1])?.as_string_opt::<i32>()?;
        for i in 0..batch.num_rows() {
            if ids.is_valid(i) && ends.is_valid(i) {
                outcomes.push((ids.value(i).to_string(), ends.value(i).to_string()));
            }
        }
    }
    Some(outcomes)
}

/// Up to five trials, those that did not pass first (the ones a reader
/// opens a trial to understand), each with how it ended.
fn worth_a_look(mut outcomes: Vec<(String, String)>) -> String {
    let total = outcomes.len();
    outcomes.sort_by(|a, b| (a.1 == "passed", &a.0).cmp(&(b.1 == "passed", &b.0)));
    let listed: Vec<String> = (outcomes.iter().take(5))
        .map(|(id, outcome)| format!("{id} ({outcome})"))
        .collect();
    format!(
        "{}, e.g. {}",
        tack_protocol::count(total, "trial"),
        listed.join(", ")
    )
}

/// The error for a trial `trial` that `run_dir` does not hold: it names up
/// to five of the run's trial ids, the nearest to `trial` (a typo) first,
/// then those sharing the longest start with it.
pub fn no_trial(run_dir: &Path, trial: &str) -> RunsError {
    let stored = crate::stored_trial_ids(run_dir).unwrap_or_default();
    RunsError::NoTrial {
        trial: trial.to_string(),
        run_dir: run_dir.to_path_buf(),
        listing: closest(stored, trial),
    }
}

fn closest(stored: HashSet<String>, trial: &str) -> String {
    let mut ids: Vec<String> = stored.into_iter().collect();
    let total = ids.len();
    let shared = |id: &String| {
        id.chars()
            .zip(trial.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    ids.sort_by(|a, b| shared(b).cmp(&shared(a)).then_with(|| a.cmp(b)));
    // A typo's nearest ids first (`sim-tigth--x` finds `sim-tight--x`),
    // then those that share the longest start with it.
    let mut listed = tack_protocol::nearest(trial, ids.iter().map(String::as_str));
    for id in ids {
        if listed.len() >= 5 {
            break;
        }
        if !listed.contains(&id) {
            listed.push(id);
        }
    }
    let ids = listed;
    if ids.is_empty() {
        "the run has no finished trials".to_string()
    } else {
        format!(
            "{}, e.g. {}",
            tack_protocol::count(total, "trial"),
            ids.join(", ")
        )
    }
}

/// The manifest of the run in `dir`, if it can be resumed there: a run's
/// directory named after its run id (trials are found by it), and not a
/// merge of shards (those are resumed shard by shard).
pub fn resumable_run(dir: &Path) -> Result<Manifest, RunsError> {
    let manifest = Manifest::read(dir).map_err(RunsError::NotARun)?;
    let name = dir.file_name().and_then(|n| n.to_str());
    if name != Some(manifest.run_id.as_str()) {
        return Err(RunsError::Renamed {
            run_id: manifest.run_id,
        });
    }
    if !manifest.merged_from.is_empty() {
        return Err(RunsError::Merged);
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::manifest;

    fn write_run(traces: &Path, dir: &str, run_id: &str) -> PathBuf {
        let dir = traces.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        manifest(run_id).write(&dir).unwrap();
        dir
    }

    #[test]
    fn runs_are_found_by_path_or_id_and_the_newest_are_listed() {
        let traces = tempfile::tempdir().unwrap();
        let old = write_run(traces.path(), "20260101-a", "20260101-a");
        write_run(traces.path(), "20260202-b", "20260202-b");
        std::fs::create_dir(traces.path().join("not-a-run")).unwrap();
        assert_eq!(run_ids(traces.path()), ["20260101-a", "20260202-b"]);
        assert_eq!(find_run("20260101-a", traces.path()).unwrap(), old);
        assert_eq!(
            find_run(old.to_str().unwrap(), Path::new("x")).unwrap(),
            old
        );
        let error = find_run("nope", traces.path()).unwrap_err().to_string();
        assert!(
            error.starts_with("no run `nope`: neither nope nor ")
                && error.ends_with("(newest first): 20260202-b, 20260101-a"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_trial_lists_the_closest_ids() {
        let ids: HashSet<String> = ["v--a--0", "v--b--0", "w--a--0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            closest(ids, "v--b--1"),
            "3 trials, e.g. v--b--0, v--a--0, w--a--0"
        );
        assert_eq!(
            closest(HashSet::new(), "x"),
            "the run has no finished trials"
        );
        let error = no_trial(Path::new("r"), "t").to_string();
        assert!(error.starts_with("no trial `t` in r: the run has no finished trials; "));
    }

    #[test]
    fn only_a_run_under_its_own_name_and_not_merged_is_resumable() {
        let traces = tempfile::tempdir().unwrap();
        let dir = write_run(traces.path(), "r1", "r1");
        assert_eq!(resumable_run(&dir).unwrap().run_id, "r1");
        let renamed = write_run(traces.path(), "copy", "r1");
        assert!(matches!(
            resumable_run(&renamed),
            Err(RunsError::Renamed { .. })
        ));
        let mut merged = manifest("m");
        merged.merged_from = vec!["r1".into()];
        let dir = traces.path().join("m");
        std::fs::create_dir(&dir).unwrap();
        merged.write(&dir).unwrap();
        assert!(matches!(resumable_run(&dir), Err(RunsError::Merged)));
        let error = resumable_run(&traces.path().join("none")).unwrap_err();
        assert!(std::error::Error::source(&error).is_some());
    }

    #[test]
    fn a_misspelt_trial_id_lists_the_nearest_first() {
        let ids: HashSet<String> = [
            "sim-tight--leap-year--0",
            "sim-tight--leap-year--1",
            "sim-tight--median-even--0",
            "sim-loose--leap-year--0",
            "sim-tidy--slugify--0",
            "sim-tiny--slugify--0",
            "sim-tidal--slugify--0",
        ]
        .map(String::from)
        .into();
        let listed = closest(ids, "sim-tigth--median-even--0");
        assert!(
            listed.starts_with("7 trials, e.g. sim-tight--median-even--0, "),
            "{listed}"
        );
    }

    #[test]
    fn a_run_named_without_a_trial_lists_those_that_did_not_pass_first() {
        let outcomes = [
            ("a--t--0", "passed"),
            ("b--t--0", "failed"),
            ("c--t--0", "passed"),
            ("d--t--0", "infra_error"),
        ]
        .map(|(id, end)| (id.to_string(), end.to_string()))
        .to_vec();
        assert_eq!(
            worth_a_look(outcomes),
            "4 trials, e.g. b--t--0 (failed), d--t--0 (infra_error), a--t--0 (passed), c--t--0 (passed)"
        );
    }
}
