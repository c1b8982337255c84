//! The HTML report of a run: `index.html` (variants, summary, plots, task
//! matrix, failed trials) and one page per non-passed trial with its whole
//! trace.
//!
//! Pages are self-contained (inline CSS and SVG, no JavaScript, nothing
//! fetched) so a report directory can be archived or mailed as is. Templates
//! are embedded and rendered with auto-escaping on: tool output and model
//! text are untrusted and must never become markup.

mod compare_page;
mod cost_page;
mod plots;
mod trial_page;
mod variants;
mod view;

use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior, context};
use std::path::{Path, PathBuf};
use tack_analysis::cost::CostReport;
use tack_analysis::{AnalysisError, RunAnalysis, analyze_run, load_trial_trace};

/// The files a report consists of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    pub index: PathBuf,
    /// One per non-passed trial, in the order of the failed-trials table.
    pub trial_pages: Vec<PathBuf>,
    /// `cost.html` and `cost.csv`: cost by variant × model × task.
    pub cost: PathBuf,
    pub cost_csv: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    #[error("could not render {template}: {source:#}; this is a bug in tack-report's templates")]
    Template {
        template: &'static str,
        source: minijinja::Error,
    },
    #[error("could not draw the plot \"{plot}\": {message}; this is a bug in tack-report")]
    Plot { plot: &'static str, message: String },
    #[error("could not write {path}: {source}; check that the output directory is writable")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub use compare_page::write_compare_report;

const TEMPLATES: [(&str, &str); 8] = [
    ("base.html", include_str!("../templates/base.html")),
    ("compare.html", include_str!("../templates/compare.html")),
    (
        "compare_task.html",
        include_str!("../templates/compare_task.html"),
    ),
    ("cost.html", include_str!("../templates/cost.html")),
    ("index.html", include_str!("../templates/index.html")),
    ("summary.html", include_str!("../templates/summary.html")),
    ("trial.html", include_str!("../templates/trial.html")),
    ("variants.html", include_str!("../templates/variants.html")),
];

/// Analyses `run_dir` (a `traces/<run-id>/` directory) and writes the report
/// to `out_dir`, creating it if needed.
pub fn write_report(run_dir: &Path, out_dir: &Path) -> Result<ReportFiles, ReportError> {
    write_report_with_prices(run_dir, out_dir, |_| {})
}

/// [`write_report`], letting the caller list the models' prices on the cost
/// page (`set_prices`): the price table lives with the providers, which this
/// crate does not depend on.
pub fn write_report_with_prices(
    run_dir: &Path,
    out_dir: &Path,
    set_prices: impl FnOnce(&mut CostReport),
) -> Result<ReportFiles, ReportError> {
    let analysis = analyze_run(run_dir)?;
    let env = environment()?;
    let trials_dir = out_dir.join("trials");
    std::fs::create_dir_all(&trials_dir).map_err(|source| ReportError::Write {
        path: trials_dir.clone(),
        source,
    })?;
    let mut trial_pages = Vec::new();
    for trial in &analysis.failed_trials {
        let trace = load_trial_trace(run_dir, &trial.trial_id)?;
        let view = trial_page::trial_view(&trace);
        let html = render(&env, "trial.html", context! { trial => Serde(view) })?;
        let path = trials_dir.join(trial_page::file_name(&trial.trial_id));
        write(&path, &html)?;
        trial_pages.push(path);
    }
    let mut cost = tack_analysis::cost::cost_report(run_dir)?;
    set_prices(&mut cost);
    let cost_csv = out_dir.join("cost.csv");
    write(&cost_csv, &cost.to_csv())?;
    let cost_view = cost_page::cost_view(&cost);
    let cost = out_dir.join("cost.html");
    let html = render(&env, "cost.html", context! { cost => Serde(cost_view) })?;
    write(&cost, &html)?;
    let index = out_dir.join("index.html");
    write(&index, &render_index(&env, &analysis)?)?;
    Ok(ReportFiles {
        index,
        trial_pages,
        cost,
        cost_csv,
    })
}

fn render_index(env: &Environment<'static>, analysis: &RunAnalysis) -> Result<String, ReportError> {
    let plots = plots::all(&analysis.variants)
        .map_err(|(plot, message)| ReportError::Plot { plot, message })?;
    let ctx = context! {
        header => Serde(view::header(analysis)),
        simulated => Serde(view::simulated(analysis)),
        variants => Serde(variants::variants(&analysis.manifest.variants)),
        summary => Serde(view::summary(&analysis.variants)),
        any_faults => view::any_faults(&analysis.variants),
        plots => Serde(plots),
        matrix => Serde(view::matrix(&analysis.matrix, &analysis.variants)),
        failed => Serde(view::failed(&analysis.failed_trials)),
        trial_count => analysis.trials.len(),
    };
    render(env, "index.html", ctx)
}

/// All templates, escaping HTML whatever the template's name, and failing on
/// undefined variables so a template typo is an error, not a blank cell.
fn environment() -> Result<Environment<'static>, ReportError> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .map_err(|source| ReportError::Template {
                template: name,
                source,
            })?;
    }
    Ok(env)
}

fn render(
    env: &Environment<'static>,
    template: &'static str,
    ctx: minijinja::Value,
) -> Result<String, ReportError> {
    let error = |source| ReportError::Template { template, source };
    env.get_template(template)
        .map_err(error)?
        .render(ctx)
        .map_err(error)
}

fn write(path: &Path, contents: &str) -> Result<(), ReportError> {
    std::fs::write(path, contents).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}
