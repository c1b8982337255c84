//! Any two variants compared, of one run or of two, as `tack compare`
//! computes it, and a flipped task's two trials side by side.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::context;
use minijinja::value::Serde;
use tack_analysis::compare::{CompareError, CompareOptions, Comparison, Side, compare, pairing};
use tack_analysis::{RunTables, load_trial_trace};

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

/// A comparison as the pages show it: what `tack compare` computes, the
/// pairing's drift notes, and each side's run directory.
#[derive(Debug)]
pub(crate) struct Compared {
    comparison: Comparison,
    drift: Vec<String>,
    dirs: [PathBuf; 2],
}

/// Both sides analysed and compared; kept by the viewer while both runs'
/// files stay as they were (the flipped tasks' pages ask for it again, and
/// the bootstrap is the slow part).
fn comparison(viewer: &Viewer, a: &str, b: &str) -> Result<Arc<Compared>, ViewError> {
    let (base_run, base_variant) = side_of(a)?;
    let (candidate_run, candidate_variant) = side_of(b)?;
    let opened = |id: &str| -> Result<(Arc<RunTables>, PathBuf), ViewError> {
        let run = viewer.run(id)?;
        Ok((viewer.tables(&run.dir)?, run.dir))
    };
    let (base_tables, base_dir) = opened(&base_run)?;
    let (candidate_tables, candidate_dir) = opened(&candidate_run)?;
    let key = (a.to_string(), b.to_string());
    let tables = [base_tables, candidate_tables];
    if let Some(kept) = viewer.kept_comparison(&key, &tables) {
        return Ok(kept);
    }
    let side = |tables: &RunTables, dir: &Path, variant: &str| {
        Side::load(tables, variant).map_err(|error| match error {
            CompareError::Read(source) => ViewError::Analysis {
                dir: dir.to_path_buf(),
                source,
            },
            error => ViewError::Compare(error),
        })
    };
    let base = side(&tables[0], &base_dir, &base_variant)?;
    let candidate = side(&tables[1], &candidate_dir, &candidate_variant)?;
    // Drift is shown, not refused: the viewer is for looking.
    let pairing = pairing(
        tables[0].manifest(),
        tables[1].manifest(),
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
    let compared = Arc::new(Compared {
        comparison: compare(&base, &candidate, &options)?,
        drift: pairing.drift,
        dirs: [base_dir, candidate_dir],
    });
    viewer.keep_comparison(key, tables, compared.clone());
    Ok(compared)
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
        // A side named that is no run's variant (a link from elsewhere, a
        // typo): said, not silently replaced by the first one.
        let unknown: Vec<&str> = [params.get("a"), params.get("b")]
            .into_iter()
            .flatten()
            .filter(|side| !sides.iter().any(|known| known == side))
            .collect();
        return render(
            viewer,
            "pick.html",
            context! {
                sides => Serde(&sides),
                a => params.get("a").unwrap_or(""),
                b => params.get("b").unwrap_or(""),
                unknown => Serde(&unknown),
            },
        );
    };
    let compared = comparison(viewer, a, b)?;
    let flipped: Vec<(String, String)> = compared
        .comparison
        .flipped()
        .map(|task| {
            let url = link("/compare/task", &[("a", a), ("b", b), ("task", &task.task)]);
            (task.task.clone(), url)
        })
        .collect();
    viewer
        .pages
        .compare(&compared.comparison, &compared.drift, &flipped)
        .map_err(|source| ViewError::Render {
            what: "the comparison",
            source,
        })
}

pub(crate) fn compare_task_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let (a, b) = (required(params, "a")?, required(params, "b")?);
    let name = required(params, "task")?;
    let compared = comparison(viewer, a, b)?;
    let [base_dir, candidate_dir] = &compared.dirs;
    let not_flipped = || ViewError::BadQuery {
        field: "task",
        message: format!(
            "`{name}` did not flip between these sides; the comparison lists those that did"
        ),
    };
    let task = compared
        .comparison
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
    let base = load(base_dir, base_id)?;
    let candidate = load(candidate_dir, candidate_id)?;
    let back = link("/compare", &[("a", a), ("b", b)]);
    viewer
        .pages
        .compare_task(task, (&base, &candidate), &back)
        .map_err(|source| ViewError::Render {
            what: "the flipped task",
            source,
        })
}
