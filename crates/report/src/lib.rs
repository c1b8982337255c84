//! Presentations of an analysis: the HTML report of a run (`index.html`
//! with summary, variants, plots, task matrix and failed trials, and one
//! page per non-passed trial with its whole trace), the compare report, and
//! the terminal's text ([`text`]).
//!
//! It must not depend on `tack-runner` or `tack-harness`, and libraries never
//! print: it returns pages and text for the CLI to write.
//!
//! Pages are self-contained (inline CSS and SVG, no JavaScript, nothing
//! fetched) so a report directory can be archived or mailed as is. Templates
//! are embedded and rendered with auto-escaping on: tool output and model
//! text are untrusted and must never become markup.
//!
//! [`text`] renders the same analysis results for the terminal.

mod compare_page;
mod cost_page;
mod plots;
pub mod text;
mod trial_page;
mod variants;
mod view;

use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior, context};
use std::path::{Path, PathBuf};
use tack_analysis::compare::{Comparison, TaskComparison};
use tack_analysis::cost::CostReport;
use tack_analysis::{
    AnalysisError, AnalyzeOptions, RunAnalysis, RunTables, TRACE_BATCH, TrialTrace,
    analyze_for_pages, trial_traces_in_batches,
};

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
/// Re-exported for [`ReportOptions`].
pub use tack_analysis::FailedLimit;

/// The reports' style sheet: inline in every static page, served as a
/// file by `tack view` (whose pages allow no inline style or script).
pub const STYLE: &str = include_str!("../templates/report.css");

const TEMPLATES: [(&str, &str); 10] = [
    ("base.html", include_str!("../templates/base.html")),
    ("report.css", STYLE),
    ("compare.html", include_str!("../templates/compare.html")),
    (
        "compare_task.html",
        include_str!("../templates/compare_task.html"),
    ),
    ("cost.html", include_str!("../templates/cost.html")),
    (
        "failed_table.html",
        include_str!("../templates/failed_table.html"),
    ),
    ("index.html", include_str!("../templates/index.html")),
    ("summary.html", include_str!("../templates/summary.html")),
    ("trial.html", include_str!("../templates/trial.html")),
    ("variants.html", include_str!("../templates/variants.html")),
];

/// What a report lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportOptions {
    /// Which failed trials the index lists and gets a page for: a run of a
    /// million trials cannot have a page per failure. The rest are counted,
    /// and `tack show` opens any of them.
    pub failed: FailedLimit,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            failed: FailedLimit {
                per_task: 5,
                total: 500,
            },
        }
    }
}

/// Analyses `run_dir` (a `traces/<run-id>/` directory) and writes the report
/// to `out_dir`, creating it if needed.
pub fn write_report(run_dir: &Path, out_dir: &Path) -> Result<ReportFiles, ReportError> {
    write_report_with_prices(run_dir, out_dir, &ReportOptions::default(), |_| {})
}

/// [`write_report`] with `options`, letting the caller list the models'
/// prices on the cost page (`set_prices`): the price table lives with the
/// providers, which this crate does not depend on.
pub fn write_report_with_prices(
    run_dir: &Path,
    out_dir: &Path,
    options: &ReportOptions,
    set_prices: impl FnOnce(&mut CostReport),
) -> Result<ReportFiles, ReportError> {
    let tables = RunTables::open(run_dir)?;
    let analyze_options = AnalyzeOptions {
        every_trial: false,
        failed: Some(options.failed),
    };
    let mut analysis = analyze_for_pages(&tables, analyze_options)?;
    let env = environment()?;
    let trials_dir = out_dir.join("trials");
    std::fs::create_dir_all(&trials_dir).map_err(|source| ReportError::Write {
        path: trials_dir.clone(),
        source,
    })?;
    remove_pages(&trials_dir)?;
    // A batch of traces at a time, the pages written before the next is read.
    let mut written = Vec::with_capacity(analysis.failed_trials.len());
    analysis.failed_trials =
        trial_traces_in_batches(&tables, &analysis.failed_trials, TRACE_BATCH, |traces| {
            written.extend(write_trial_pages(&env, &trials_dir, &traces)?);
            Ok::<_, ReportError>(())
        })?;
    let trial_pages = in_listed_order(written, &analysis.failed_trials);
    let mut cost = tack_analysis::cost::cost_report_of(&tables)?;
    set_prices(&mut cost);
    let cost_csv = out_dir.join("cost.csv");
    write(&cost_csv, &cost.to_csv())?;
    let cost_view = cost_page::cost_view(&cost);
    let cost = out_dir.join("cost.html");
    let html = render(&env, "cost.html", context! { cost => Serde(cost_view) })?;
    write(&cost, &html)?;
    let index = out_dir.join("index.html");
    write(&index, &render_index(&env, &analysis, options, run_dir)?)?;
    Ok(ReportFiles {
        index,
        trial_pages,
        cost,
        cost_csv,
    })
}

/// `pages` (as `(trial id, path)`) in the order the failed-trials table
/// lists their trials.
fn in_listed_order(
    pages: Vec<(String, PathBuf)>,
    listed: &[tack_analysis::TrialRow],
) -> Vec<PathBuf> {
    let mut by_trial: std::collections::HashMap<String, PathBuf> = pages.into_iter().collect();
    listed
        .iter()
        .filter_map(|row| by_trial.remove(&row.trial_id))
        .collect()
}

/// Removes the pages an earlier report wrote to `dir`: a page of a trial
/// this report does not list would pass for one of its own. Only the
/// pages, `*.html`: whatever else is there is not the report's. (Writing
/// over the old pages also cost more than writing new ones: a
/// million-trial report's 500 pages took 0.17-0.2 s over their old ones,
/// 0.1-0.12 s into an empty directory, as ext4 writes out a file replaced
/// by truncation when it is closed; the whole report, removing them first,
/// was no faster than the noise shows.)
fn remove_pages(dir: &Path) -> Result<(), ReportError> {
    let failed = |source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let path = entry.path();
        let is_file = entry.file_type().map_err(failed)?.is_file();
        if is_file && path.extension().is_some_and(|ext| ext == "html") {
            std::fs::remove_file(&path).map_err(|source| ReportError::Write { path, source })?;
        }
    }
    Ok(())
}

/// A page per trace in `dir`, in the order of `traces`, each with its
/// trial's id. Rendering five hundred pages is most of a small run's
/// report, so it is spread over the cores.
fn write_trial_pages(
    env: &Environment<'static>,
    dir: &Path,
    traces: &[TrialTrace],
) -> Result<Vec<(String, PathBuf)>, ReportError> {
    tack_trace::map_on_cores(traces, 16, |trace| {
        let view = trial_page::trial_view(trace);
        let ctx = context! {
            trial => Serde(view), back => "../index.html", back_label => "the run",
        };
        let html = render(env, "trial.html", ctx)?;
        let path = dir.join(trial_page::file_name(&trace.trial.trial_id));
        write(&path, &html)?;
        Ok((trace.trial.trial_id.clone(), path))
    })
}

fn render_index(
    env: &Environment<'static>,
    analysis: &RunAnalysis,
    options: &ReportOptions,
    run_dir: &Path,
) -> Result<String, ReportError> {
    let plots = plots::all(&analysis.variants)
        .map_err(|(plot, message)| ReportError::Plot { plot, message })?;
    let ctx = context! {
        header => Serde(view::header(analysis)),
        simulated => Serde(view::simulated(analysis)),
        variants => Serde(variants::variants(&analysis.manifest.variants)),
        summary => Serde(view::summary(&analysis.variants)),
        count_headings => view::count_headings(),
        any_faults => view::any_faults(&analysis.variants),
        plots => Serde(plots),
        matrix => Serde(view::matrix(&analysis.matrix, &analysis.variants)),
        failed => Serde(view::failed(&analysis.failed_trials, false)),
        infra => Serde(view::failed(&analysis.failed_trials, true)),
        listing => Serde(view::listing(analysis, &options.failed)),
        attempts => Serde(view::attempts(analysis)),
        view_command => format!("tack view {}", run_dir.display()),
    };
    render(env, "index.html", ctx)
}

/// The report's pages in another frame: `tack view` gives its own
/// `base.html` (its style sheet linked, its navigation) and its own links.
#[derive(Debug)]
pub struct Pages {
    env: Environment<'static>,
}

impl Pages {
    /// The report's templates with `base` (a template with a `title` and a
    /// `content` block) as `base.html`.
    pub fn with_base(base: &'static str) -> Result<Pages, ReportError> {
        let mut env = environment()?;
        env.add_template("base.html", base)
            .map_err(|source| ReportError::Template {
                template: "base.html",
                source,
            })?;
        Ok(Pages { env })
    }

    /// `trace`'s page, its back link to `back` (an URL) named `back_label`.
    pub fn trial(
        &self,
        trace: &TrialTrace,
        back: &str,
        back_label: &str,
    ) -> Result<String, ReportError> {
        let ctx = context! {
            trial => Serde(trial_page::trial_view(trace)), back, back_label,
        };
        render(&self.env, "trial.html", ctx)
    }

    /// The comparison's page, as `tack compare` writes it; `flipped` pairs
    /// each flipped task with the URL of its side-by-side page.
    pub fn compare(
        &self,
        comparison: &Comparison,
        drift: &[String],
        flipped: &[(String, String)],
    ) -> Result<String, ReportError> {
        compare_page::index_html(&self.env, comparison, drift, flipped)
    }

    /// A flipped task's two trials side by side, linking `back`.
    pub fn compare_task(
        &self,
        task: &TaskComparison,
        trials: (&TrialTrace, &TrialTrace),
        back: &str,
    ) -> Result<String, ReportError> {
        compare_page::task_html(&self.env, task, trials, back)
    }
}

/// The report's templates (see [`html_environment`]).
fn environment() -> Result<Environment<'static>, ReportError> {
    html_environment(&TEMPLATES)
}

/// `templates` (name, source), escaping HTML whatever a template's name,
/// and failing on undefined variables so a template typo is an error, not
/// a blank cell: how every page tack shows is rendered (the reports, and
/// `tack view`'s own pages).
pub fn html_environment(
    templates: &[(&'static str, &'static str)],
) -> Result<Environment<'static>, ReportError> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    for &(name, source) in templates {
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
