//! The pages: what each path shows, made from the runs on disk at the time
//! of the request.

use hyper::StatusCode;
use minijinja::value::Serde;
use minijinja::{HtmlEscape, context};
use serde::Serialize;
use tack_analysis::browse::{BrowsedTrial, SortKey, TrialQuery, browse};
use tack_analysis::load_trial_trace;
use tack_protocol::{StopReason, TrialOutcome};

use crate::ViewError;
use crate::params::{Params, link};
use crate::runs::RunLine;
use crate::state::{STYLE, Viewer};

/// Trials on one page of the trials table.
const PAGE_SIZE: usize = 50;

/// What a request is answered with.
#[derive(Debug)]
pub(crate) enum Answer {
    Html(StatusCode, String),
    Css(String),
    /// A plain-text download (the quarantine list).
    Text(String),
    Redirect(String),
}

impl Answer {
    /// A page that says `message` (escaped) under the status's name.
    pub(crate) fn status(status: StatusCode, message: &str) -> Answer {
        let title = status.canonical_reason().unwrap_or("Error");
        let html = format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>{title} · tack view</title><link rel=\"stylesheet\" href=\"/style.css\"><link rel=\"icon\" href=\"data:,\"></head>\
             <body><nav class=\"view-nav\"><a href=\"/\">Runs</a></nav>\
             <h1>{title}</h1><p class=\"fail\">{}</p></body></html>",
            HtmlEscape(message)
        );
        Answer::Html(status, html)
    }
}

/// The answer for `path` with `params`.
pub(crate) fn page(viewer: &Viewer, path: &str, params: &Params) -> Answer {
    let made = match path {
        "/" => runs_page(viewer),
        "/trials" => trials_page(viewer, params),
        "/trial" => trial_page(viewer, params),
        "/compare" => crate::compare::compare_page(viewer, params),
        "/compare/task" => crate::compare::compare_task_page(viewer, params),
        "/tasks" => crate::tasks::tasks_page(viewer, params),
        "/task" => crate::tasks::task_page(viewer, params),
        "/tasks/quarantine.txt" => {
            return match crate::tasks::quarantine(viewer, params) {
                Ok(text) => Answer::Text(text),
                Err(error) => error_answer(&error),
            };
        }
        "/style.css" => return Answer::Css(format!("{}\n{STYLE}", tack_report::STYLE)),
        _ => {
            return Answer::status(
                StatusCode::NOT_FOUND,
                &format!("No page at {path}; the runs list is at /."),
            );
        }
    };
    match made {
        Ok(html) => Answer::Html(StatusCode::OK, html),
        Err(error) => error_answer(&error),
    }
}

fn error_answer(error: &ViewError) -> Answer {
    Answer::status(
        StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &error.to_string(),
    )
}

pub(crate) fn render(
    viewer: &Viewer,
    template: &'static str,
    ctx: minijinja::Value,
) -> Result<String, ViewError> {
    let error = |source| ViewError::Template { template, source };
    viewer
        .env
        .get_template(template)
        .map_err(error)?
        .render(ctx)
        .map_err(error)
}

/// A variant's figures as the runs list shows them.
#[derive(Debug, Serialize)]
struct VariantCell {
    name: String,
    passed: u64,
    trials: u64,
    rate: String,
    cost: Option<String>,
    simulated: bool,
    trials_url: String,
}

#[derive(Debug, Serialize)]
struct RunRow {
    #[serde(flatten)]
    line: RunLine,
    trials_url: String,
    /// None when every trial recorded passed.
    failed_url: Option<String>,
    variants: Vec<VariantCell>,
    /// Why the run's trials could not be read, where they could not.
    unreadable: Option<String>,
}

fn runs_page(viewer: &Viewer) -> Result<String, ViewError> {
    let rows: Vec<RunRow> = viewer
        .runs()
        .iter()
        .map(|run| {
            let summaries = viewer.summaries(&run.dir);
            let recorded = summaries.as_ref().map_or(0, |summaries| {
                summaries
                    .iter()
                    .map(|v| v.trials + v.infra_errors + v.cancelled)
                    .sum()
            });
            let passed: u64 = summaries
                .as_ref()
                .map_or(0, |summaries| summaries.iter().map(|v| v.passed).sum());
            let line = run.line(recorded);
            let id = line.id.as_str();
            let unreadable = summaries.as_ref().err().map(ToString::to_string);
            let variants = summaries
                .map(|summaries| {
                    summaries
                        .iter()
                        .map(|v| VariantCell {
                            name: v.variant.clone(),
                            passed: v.passed,
                            trials: v.trials,
                            // No scored trial: no rate, where 0% would be a claim.
                            rate: match v.trials {
                                0 => "—".to_string(),
                                _ => format!("{:.0}%", v.success_rate * 100.0),
                            },
                            cost: v.cost_usd.map(|c| format!("${c:.4}")),
                            simulated: v.simulated,
                            trials_url: link("/trials", &[("run", id), ("variant", &v.variant)]),
                        })
                        .collect()
                })
                .unwrap_or_default();
            RunRow {
                trials_url: link("/trials", &[("run", id)]),
                failed_url: (passed < recorded)
                    .then(|| link("/trials", &[("run", id), ("outcome", NOT_PASSED)])),
                variants,
                unreadable,
                line,
            }
        })
        .collect();
    render(
        viewer,
        "runs.html",
        context! {
            runs => Serde(&rows),
            roots => viewer.roots_text(),
            refresh => viewer.options.refresh_secs,
        },
    )
}

/// A header of the trials table: its label and the URL that sorts by it.
#[derive(Debug, Serialize)]
struct SortLink {
    label: &'static str,
    url: String,
    /// `▲`/`▼` on the column the page is sorted by.
    mark: &'static str,
}

#[derive(Debug, Serialize)]
struct TrialLine {
    run_id: String,
    variant: String,
    task: String,
    trial_index: u32,
    attempt: u32,
    outcome: String,
    stop_reason: String,
    steps: u32,
    tokens: u64,
    cost: Option<String>,
    duration: String,
    error: Option<String>,
    url: String,
}

/// The runs a page is about (`run=` in its URL, every run without), with
/// their tables; runs that have recorded nothing yet are named apart.
pub(crate) struct Chosen {
    pub all_ids: Vec<String>,
    pub chosen_ids: Vec<String>,
    pub runs: Vec<crate::runs::FoundRun>,
    pub tables: Vec<std::sync::Arc<tack_analysis::RunTables>>,
    pub unreadable: Vec<String>,
}

pub(crate) fn chosen(viewer: &Viewer, params: &Params) -> Result<Chosen, ViewError> {
    let all_runs = viewer.runs();
    let chosen_ids = params.all("run");
    if let Some(missing) = chosen_ids
        .iter()
        .find(|id| !all_runs.iter().any(|run| &run.manifest.run_id == *id))
    {
        return Err(ViewError::NoSuchRun {
            run: missing.clone(),
            roots: viewer.roots_text(),
        });
    }
    let all_ids = all_runs.iter().map(|r| r.manifest.run_id.clone()).collect();
    let runs: Vec<_> = all_runs
        .into_iter()
        .filter(|run| chosen_ids.is_empty() || chosen_ids.contains(&run.manifest.run_id))
        .collect();
    let mut tables = Vec::new();
    let mut unreadable = Vec::new();
    for run in &runs {
        match viewer.tables(&run.dir) {
            Ok(opened) => tables.push(opened),
            // A run that has recorded nothing yet (just started) has no
            // table to read; it is named, as is a run that cannot be read.
            Err(error) => unreadable.push(if tack_trace::run_in_progress(&run.dir) {
                format!("{} (running, nothing recorded yet)", run.manifest.run_id)
            } else {
                format!("{} ({error})", run.manifest.run_id)
            }),
        }
    }
    Ok(Chosen {
        all_ids,
        chosen_ids,
        runs,
        tables,
        unreadable,
    })
}

fn trials_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let Chosen {
        all_ids,
        chosen_ids: chosen,
        runs,
        tables,
        unreadable,
    } = chosen(viewer, params)?;
    let mut variants: Vec<String> = Vec::new();
    let mut tasks: Vec<String> = Vec::new();
    for run in &runs {
        variants.extend(run.manifest.variants.iter().map(|v| v.name.clone()));
        tasks.extend(run.manifest.tasks.iter().cloned());
    }
    variants.sort();
    variants.dedup();
    tasks.sort();
    tasks.dedup();
    known(params, "variant", &variants)?;
    known(params, "task", &tasks)?;
    let mut query = trial_query(params)?;
    let table_refs: Vec<&tack_analysis::RunTables> = tables.iter().map(AsRef::as_ref).collect();
    let find = |query: &TrialQuery| {
        browse(&table_refs, query).map_err(|source| ViewError::Analysis {
            dir: runs.first().map(|r| r.dir.clone()).unwrap_or_default(),
            source,
        })
    };
    let mut found = find(&query)?;
    // A page past the end (a bookmark, a narrower filter) shows the last.
    if found.rows.is_empty() && found.total > 0 {
        query.offset = (found.total - 1) / PAGE_SIZE * PAGE_SIZE;
        found = find(&query)?;
    }
    let lines: Vec<TrialLine> = found.rows.iter().map(TrialLine::of).collect();
    let page_params = params.without("page");
    let pages = found.total.div_ceil(PAGE_SIZE).max(1);
    let page = query.offset / PAGE_SIZE + 1;
    let page_url = |n: usize| page_params.with("page", &n.to_string()).url("/trials");
    let sorts = sort_links(&query, &page_params);
    render(
        viewer,
        "trials.html",
        context! {
            total => found.total,
            first => query.offset + 1,
            trials => Serde(&lines),
            page, pages,
            prev => (page > 1).then(|| page_url(page - 1)),
            next => (page < pages).then(|| page_url(page + 1)),
            sorts => Serde(&sorts),
            runs => Serde(&all_ids),
            chosen_runs => Serde(&chosen),
            variants => Serde(&variants),
            tasks => Serde(&tasks),
            outcomes => outcome_choices(),
            stops => StopReason::ALL.map(StopReason::as_str).to_vec(),
            chosen_variant => params.get("variant").unwrap_or(""),
            chosen_task => params.get("task").unwrap_or(""),
            chosen_outcome => params.get("outcome").unwrap_or(""),
            chosen_stop => params.get("stop").unwrap_or(""),
            search => params.get("q").unwrap_or(""),
            sort => query.sort.as_str(),
            order => if query.descending { "desc" } else { "asc" },
            unreadable => Serde(&unreadable),
        },
    )
}

impl TrialLine {
    /// A found trial as the table lists it.
    fn of(row: &BrowsedTrial) -> TrialLine {
        let t = &row.trial;
        TrialLine {
            url: link("/trial", &[("run", &row.run_id), ("id", &t.trial_id)]),
            run_id: row.run_id.clone(),
            variant: t.variant.clone(),
            task: t.task.clone(),
            trial_index: t.trial_index,
            attempt: t.trial_attempt,
            outcome: t.outcome.clone(),
            stop_reason: t.stop_reason.clone(),
            steps: t.counts.get(tack_trace::schema::col::STEPS),
            tokens: t.total_tokens,
            cost: t.cost_usd.map(|c| format!("${c:.4}")),
            duration: format!("{:.1} s", t.duration_ms as f64 / 1000.0),
            error: t.error.clone(),
        }
    }
}

/// The table's column headings as links: sort by the column, ascending,
/// or descending when it is the current sort and ascends.
fn sort_links(query: &TrialQuery, page_params: &Params) -> Vec<SortLink> {
    SortKey::ALL
        .into_iter()
        .map(|key| {
            let current = query.sort == key;
            let order = if current && !query.descending {
                "desc"
            } else {
                "asc"
            };
            SortLink {
                label: key.as_str(),
                url: page_params
                    .with("sort", key.as_str())
                    .with("order", order)
                    .url("/trials"),
                mark: match (current, query.descending) {
                    (false, _) => "",
                    (true, false) => "▲",
                    (true, true) => "▼",
                },
            }
        })
        .collect()
}

/// The outcome filter's value for every trial that did not pass: what the
/// runs page's "failed trials" links to.
const NOT_PASSED: &str = "not_passed";

/// Every outcome but a pass (and `unverified`, which no run's trial has).
fn not_passed() -> impl Iterator<Item = &'static str> {
    TrialOutcome::ALL
        .into_iter()
        .filter(|o| !matches!(o, TrialOutcome::Passed | TrialOutcome::Unverified))
        .map(TrialOutcome::as_str)
}

/// The outcome filter's choices: any that did not pass, then each outcome.
fn outcome_choices() -> Vec<&'static str> {
    std::iter::once(NOT_PASSED)
        .chain(TrialOutcome::ALL.map(TrialOutcome::as_str))
        .collect()
}

/// Refuses a `field` filter value that none of the shown runs has: a typo
/// would otherwise show an empty table as if nothing matched.
fn known(params: &Params, field: &'static str, names: &[String]) -> Result<(), ViewError> {
    match params.all(field).into_iter().find(|v| !names.contains(v)) {
        None => Ok(()),
        Some(value) => Err(ViewError::BadQuery {
            field,
            message: format!(
                "no run shown has {field} `{value}`; they have {}",
                names.join(", ")
            ),
        }),
    }
}

/// The trials table's query from the URL.
fn trial_query(params: &Params) -> Result<TrialQuery, ViewError> {
    let sort = match params.get("sort") {
        None => SortKey::Trial,
        Some(text) => SortKey::parse(text).ok_or_else(|| ViewError::BadQuery {
            field: "sort",
            message: format!(
                "`{text}` is not a column to sort by; use one of {}",
                SortKey::ALL.map(SortKey::as_str).join(", ")
            ),
        })?,
    };
    let page: usize = match params.get("page") {
        None => 1,
        Some(text) => text
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| ViewError::BadQuery {
                field: "page",
                message: format!("`{text}` is not a page number (1, 2, …)"),
            })?,
    };
    let mut outcomes = Vec::new();
    for text in params.all("outcome") {
        if text == NOT_PASSED {
            outcomes.extend(not_passed().map(str::to_string));
        } else if TrialOutcome::ALL.iter().any(|o| o.as_str() == text) {
            outcomes.push(text);
        } else {
            return Err(ViewError::BadQuery {
                field: "outcome",
                message: format!(
                    "`{text}` is not an outcome; use one of {}",
                    outcome_choices().join(", ")
                ),
            });
        }
    }
    Ok(TrialQuery {
        variants: params.all("variant"),
        tasks: params.all("task"),
        outcomes,
        stop_reasons: params.all("stop"),
        search: params.get("q").map(str::to_string),
        sort,
        descending: params.get("order") == Some("desc"),
        offset: (page - 1).saturating_mul(PAGE_SIZE),
        limit: PAGE_SIZE,
    })
}

pub(crate) fn required<'a>(params: &'a Params, field: &'static str) -> Result<&'a str, ViewError> {
    params.get(field).ok_or_else(|| ViewError::BadQuery {
        field,
        message: format!("missing; the address needs {field}=…"),
    })
}

fn trial_page(viewer: &Viewer, params: &Params) -> Result<String, ViewError> {
    let run = viewer.run(required(params, "run")?)?;
    let id = required(params, "id")?;
    let trace = load_trial_trace(&run.dir, id).map_err(|source| ViewError::Analysis {
        dir: run.dir.clone(),
        source,
    })?;
    let back = link("/trials", &[("run", &run.manifest.run_id)]);
    viewer
        .pages
        .trial(&trace, &back, "the run's trials")
        .map_err(|source| ViewError::Render {
            what: "the trial",
            source,
        })
}
