//! Tasks across runs: the flakiest tasks of the chosen runs, one task's
//! history run by run, and the quarantine list `tack gate --quarantine`
//! reads.

use minijinja::context;
use minijinja::value::Serde;
use serde::Serialize;
use tack_analysis::history::{TaskFlakiness, TaskRun, flakiness, task_runs};

use crate::ViewError;
use crate::pages::{Chosen, chosen, render, required};
use crate::params::{Params, link};
use crate::state::Viewer;

/// Every (run, variant, task) of the chosen runs, `task` alone if given.
fn configurations(
    viewer: &Viewer,
    params: &Params,
    task: Option<&str>,
) -> Result<(Chosen, Vec<TaskRun>), ViewError> {
    let chosen = chosen(viewer, params)?;
    let refs: Vec<&tack_analysis::RunTables> = chosen.tables.iter().map(AsRef::as_ref).collect();
    let runs = task_runs(&refs, task).map_err(|source| ViewError::Analysis {
        dir: chosen
            .runs
            .first()
            .map(|r| r.dir.clone())
            .unwrap_or_default(),
        source,
    })?;
    Ok((chosen, runs))
}

/// The least disagreement a task needs to be listed for quarantine
/// (`min=`; any disagreement at all by default).
fn threshold(params: &Params) -> Result<f64, ViewError> {
    match params.get("min") {
        None => Ok(f64::MIN_POSITIVE),
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|v| (0.0..=1.0).contains(v))
            .ok_or_else(|| ViewError::BadQuery {
                field: "min",
                message: format!("`{text}` is not a share from 0 to 1 (e.g. 0.1)"),
            }),
    }
}

#[derive(Debug, Serialize)]
struct FlakyRow {
    #[serde(flatten)]
    task: TaskFlakiness,
    disagreement_text: String,
    url: String,
    trials_url: String,
}

pub(crate) fn tasks_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let min = threshold(params)?;
    let (chosen, runs) = configurations(viewer, params, None)?;
    // A task's trials are those of its suite's runs.
    let trials_url = |task: &TaskFlakiness| {
        let mut params = vec![("task", task.task.as_str())];
        let runs = chosen
            .runs
            .iter()
            .filter(|r| r.manifest.suite.name == task.suite);
        params.extend(runs.map(|r| ("run", r.manifest.run_id.as_str())));
        link("/trials", &params)
    };
    let rows: Vec<FlakyRow> = flakiness(&runs)
        .into_iter()
        .map(|task| FlakyRow {
            disagreement_text: task
                .disagreement
                .map_or("—".to_string(), |d| format!("{:.0}%", d * 100.0)),
            url: link("/task", &[("name", &task.task), ("suite", &task.suite)]),
            trials_url: trials_url(&task),
            task,
        })
        .collect();
    let quarantined = rows
        .iter()
        .filter(|r| r.task.disagreement.is_some_and(|d| d >= min))
        .count();
    let runs_params: Vec<(&str, &str)> = chosen
        .chosen_ids
        .iter()
        .map(|id| ("run", id.as_str()))
        .collect();
    let mut export = runs_params.clone();
    let min_text = params.get("min").unwrap_or("");
    if !min_text.is_empty() {
        export.push(("min", min_text));
    }
    render(
        viewer,
        "tasks.html",
        context! {
            tasks => Serde(&rows),
            runs => chosen.tables.len(),
            quarantined,
            min => min_text,
            export_url => link("/tasks/quarantine.txt", &export),
        },
    )
}

#[derive(Debug, Serialize)]
struct HistoryRow {
    #[serde(flatten)]
    run: TaskRun,
    rate: String,
    /// Against this variant's previous run: `better`, `worse` or empty.
    change: &'static str,
    url: String,
}

pub(crate) fn task_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let name = required(params, "name")?;
    // A task is its suite's: one name in two suites is two tasks.
    let suite = params.get("suite").filter(|s| !s.is_empty());
    let others = params.without("name").without("suite");
    let (_, mut runs) = configurations(viewer, &others, Some(name))?;
    let suites: std::collections::BTreeSet<String> = runs.iter().map(|r| r.suite.clone()).collect();
    if let Some(suite) = suite {
        runs.retain(|r| r.suite == suite);
    }
    runs.sort_by(|a, b| {
        (&a.started_at, &a.run_id, &a.variant).cmp(&(&b.started_at, &b.run_id, &b.variant))
    });
    let summary = flakiness(&runs).into_iter().next();
    let mut rows: Vec<HistoryRow> = Vec::new();
    for run in &runs {
        let share = |r: &TaskRun| r.passed as f64 / r.trials.max(1) as f64;
        let previous = rows.iter().rev().find(|row| row.run.variant == run.variant);
        let change = match previous.map(|p| share(&p.run)) {
            Some(before) if share(run) > before => "better",
            Some(before) if share(run) < before => "worse",
            _ => "",
        };
        rows.push(HistoryRow {
            rate: format!("{:.0}%", share(run) * 100.0),
            change,
            url: link(
                "/trials",
                &[
                    ("run", &run.run_id),
                    ("variant", &run.variant),
                    ("task", name),
                ],
            ),
            run: run.clone(),
        });
    }
    rows.reverse();
    render(
        viewer,
        "task.html",
        context! {
            name,
            suite => suite.unwrap_or(""),
            // Other suites with a task of this name, when one is shown.
            others => others_of(suites, suite, name),
            rows => Serde(&rows),
            summary => Serde(&summary),
            disagreement => summary.as_ref().and_then(|s| s.disagreement).map(|d| format!("{:.0}%", d * 100.0)),
        },
    )
}

/// The other suites with a task `name`, each with its page: beside one
/// suite's page, or when several suites' are shown together.
fn others_of(
    suites: std::collections::BTreeSet<String>,
    shown: Option<&str>,
    name: &str,
) -> Vec<minijinja::Value> {
    if shown.is_none() && suites.len() < 2 {
        return Vec::new();
    }
    suites
        .into_iter()
        .filter(|s| Some(s.as_str()) != shown)
        .map(|s| {
            let url = link("/task", &[("name", name), ("suite", &s)]);
            context! { suite => s, url }
        })
        .collect()
}

/// The tasks whose identical configurations disagreed at least `min=` of
/// the time, one per line after a comment saying where the list is from.
pub(crate) fn quarantine(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let min = threshold(params)?;
    let (chosen, runs) = configurations(viewer, params, None)?;
    let ids: Vec<&str> = chosen
        .runs
        .iter()
        .map(|r| r.manifest.run_id.as_str())
        .collect();
    // Without `min=`, any disagreement at all (not "at least 0%").
    let how_often = if min > f64::MIN_POSITIVE {
        format!("in at least {:.0}% of trial pairs", min * 100.0)
    } else {
        "in some of their trial pairs".to_string()
    };
    let mut text = format!(
        "# Flaky tasks: identical configurations (run × variant) disagreed on them {how_often},\n\
         # over the runs {}.\n# From tack view; `tack gate --quarantine FILE` leaves these tasks \
         out and says so.\n",
        ids.join(", ")
    );
    // The gate leaves tasks out by name: a name flaky in two suites is
    // listed once.
    let mut listed: Vec<String> = Vec::new();
    for task in flakiness(&runs) {
        if task.disagreement.is_some_and(|d| d >= min) && !listed.contains(&task.task) {
            if listable(&task.task) {
                text.push_str(&task.task);
                text.push('\n');
            } else {
                // A run from elsewhere names its tasks: a line break in one
                // would list other tasks, a `#` quarantine a shorter name.
                text.push_str(&format!(
                    "# not listed, its name is no line of this file: {}\n",
                    tack_protocol::printable_line(&task.task)
                ));
            }
            listed.push(task.task);
        }
    }
    Ok(text)
}

/// Whether `task` reads back from a quarantine list as itself: one plain
/// name, no `#` (which starts a comment there), nothing trimmed away.
fn listable(task: &str) -> bool {
    tack_protocol::is_plain_name(task) && !task.contains('#') && task.trim() == task
}

#[cfg(test)]
mod tests {
    use super::listable;

    /// What `tack gate --quarantine` would read back as another list than
    /// the view meant: more names, a shorter one, a trimmed one.
    #[test]
    fn only_a_name_that_reads_back_as_itself_is_listed() {
        assert!(listable("leap-year-400"));
        assert!(listable("ünïcode task"));
        for name in ["a\nleap-year-400", "a#b", " padded", "a\rb", "", "x/y"] {
            assert!(!listable(name), "{name:?}");
        }
    }
}
