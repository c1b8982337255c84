//! Any two variants compared, of one run or of two, as `tack compare`
//! computes it, and a flipped task's two trials side by side.

use std::path::{Path, PathBuf};

use minijinja::context;
use minijinja::value::Serde;
use tack_analysis::compare::{CompareOptions, Comparison, Side, compare, pairing};
use tack_analysis::{AnalyzeOptions, RunAnalysis, load_trial_trace};

use crate::ViewError;
use crate::pages::{render, required};
use crate::params::{Params, link};
use crate::state::Viewer;

/// One side of a comparison as the URL names it: `RUN/VARIANT` (a run id
/// is a directory name, so it holds no `/`).
fn side_of(text: &str) -> Result<(String, String), ViewError> {
    text.split_once('/')
        .filter(|(run, variant)| !run.is_empty() && !variant.is_empty())
        .map(|(run, variant)| (run.to_string(), variant.to_string()))
        .ok_or_else(|| ViewError::BadSide {
            value: text.to_string(),
        })
}

/// Both sides analysed and compared, with the pairing's drift notes.
fn comparison(
    viewer: &Viewer,
    a: &str,
    b: &str,
) -> Result<(Comparison, Vec<String>, [PathBuf; 2]), ViewError> {
    let (base_run, base_variant) = side_of(a)?;
    let (candidate_run, candidate_variant) = side_of(b)?;
    let analysed = |id: &str| -> Result<(RunAnalysis, PathBuf), ViewError> {
        let run = viewer.run(id)?;
        let tables = viewer.tables(&run.dir)?;
        let analysis =
            tack_analysis::analyze(&tables, AnalyzeOptions::everything()).map_err(|source| {
                ViewError::Analysis {
                    dir: run.dir.clone(),
                    source,
                }
            })?;
        Ok((analysis, run.dir))
    };
    let (base, base_dir) = analysed(&base_run)?;
    let (candidate, candidate_dir) = analysed(&candidate_run)?;
    // Drift is shown, not refused: the viewer is for looking.
    let pairing = pairing(
        &base.manifest,
        &candidate.manifest,
        (&base_variant, &candidate_variant),
        true,
    )
    .map_err(|error| ViewError::BadQuery {
        field: "b",
        message: error.to_string(),
    })?;
    let options = CompareOptions {
        excluded: pairing.excluded,
        ..CompareOptions::default()
    };
    let base_side = Side {
        run: &base,
        variant: &base_variant,
    };
    let candidate_side = Side {
        run: &candidate,
        variant: &candidate_variant,
    };
    let comparison = compare(base_side, candidate_side, &options)?;
    Ok((comparison, pairing.drift, [base_dir, candidate_dir]))
}

pub(crate) fn compare_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let sides: Vec<String> = viewer
        .runs()
        .iter()
        .flat_map(|run| {
            run.manifest
                .variants
                .iter()
                .map(|v| format!("{}/{}", run.manifest.run_id, v.name))
                .collect::<Vec<_>>()
        })
        .collect();
    let (Some(a), Some(b)) = (params.get("a"), params.get("b")) else {
        return render(
            viewer,
            "pick.html",
            context! {
                sides => Serde(&sides),
                a => params.get("a").unwrap_or(""),
                b => params.get("b").unwrap_or(""),
            },
        );
    };
    let (comparison, drift, _) = comparison(viewer, a, b)?;
    let flipped: Vec<(String, String)> = comparison
        .flipped()
        .map(|task| {
            let url = link("/compare/task", &[("a", a), ("b", b), ("task", &task.task)]);
            (task.task.clone(), url)
        })
        .collect();
    viewer
        .pages
        .compare(&comparison, &drift, &flipped)
        .map_err(|source| ViewError::Render {
            what: "the comparison",
            source,
        })
}

pub(crate) fn compare_task_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let (a, b) = (required(params, "a")?, required(params, "b")?);
    let name = required(params, "task")?;
    let (comparison, _, [base_dir, candidate_dir]) = comparison(viewer, a, b)?;
    let not_flipped = || ViewError::BadQuery {
        field: "task",
        message: format!(
            "`{name}` did not flip between these sides; the comparison lists those that did"
        ),
    };
    let task = comparison
        .flipped()
        .find(|task| task.task == name)
        .ok_or_else(not_flipped)?;
    let (Some(base_id), Some(candidate_id)) = (
        task.base_trial_ids.first(),
        task.candidate_trial_ids.first(),
    ) else {
        return Err(not_flipped());
    };
    let load = |dir: &Path, id: &str| {
        load_trial_trace(dir, id).map_err(|source| ViewError::Analysis {
            dir: dir.to_path_buf(),
            source,
        })
    };
    let base = load(&base_dir, base_id)?;
    let candidate = load(&candidate_dir, candidate_id)?;
    let back = link("/compare", &[("a", a), ("b", b)]);
    viewer
        .pages
        .compare_task(task, (&base, &candidate), &back)
        .map_err(|source| ViewError::Render {
            what: "the flipped task",
            source,
        })
}
