//! The compare report: `index.html` with the verdict numbers, a forest plot
//! of the deltas, pass@k, the per-task flip table and the drift, and one page
//! per flipped task with the two trials side by side from the first tool
//! call where they diverge.

use std::path::{Path, PathBuf};

use minijinja::value::Serde;
use minijinja::{Environment, context};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;
use tack_analysis::compare::{Comparison, TaskComparison, first_divergence};
use tack_analysis::{SpanRow, TrialTrace, load_trial_trace};
use tack_trace::schema::{col, kind};

use crate::{ReportError, environment, render, write};

/// One row of the forest plot: a change relative to the base, with its
/// interval (both relative), e.g. -0.4 = 40% lower.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ForestRow {
    pub label: String,
    pub relative: f64,
    pub low: f64,
    pub high: f64,
}

/// Writes the compare report to `out_dir` and returns its index path.
pub fn write_compare_report(
    comparison: &Comparison,
    base_dir: &Path,
    candidate_dir: &Path,
    drift: &[String],
    out_dir: &Path,
) -> Result<PathBuf, ReportError> {
    let env = environment()?;
    let tasks_dir = out_dir.join("tasks");
    std::fs::create_dir_all(&tasks_dir).map_err(|source| ReportError::Write {
        path: tasks_dir.clone(),
        source,
    })?;
    let mut flipped = Vec::new();
    for task in comparison.flipped() {
        let (Some(base_id), Some(candidate_id)) = (
            task.base_trial_ids.first(),
            task.candidate_trial_ids.first(),
        ) else {
            continue;
        };
        let base = load_trial_trace(base_dir, base_id)?;
        let candidate = load_trial_trace(candidate_dir, candidate_id)?;
        let html = task_html(&env, task, (&base, &candidate), "../index.html")?;
        let file = format!("{}.html", safe_name(&task.task));
        write(&tasks_dir.join(&file), &html)?;
        flipped.push((task.task.clone(), format!("tasks/{file}")));
    }
    let html = index_html(&env, comparison, drift, &flipped)?;
    let index = out_dir.join("index.html");
    write(&index, &html)?;
    Ok(index)
}

/// The comparison's page; `flipped` links each flipped task to its page.
pub(crate) fn index_html(
    env: &Environment<'static>,
    comparison: &Comparison,
    drift: &[String],
    flipped: &[(String, String)],
) -> Result<String, ReportError> {
    let rows = forest_rows(comparison);
    let forest = forest_svg(&rows).map_err(|e| ReportError::Plot {
        plot: "deltas",
        message: e.to_string(),
    })?;
    render(
        env,
        "compare.html",
        context! {
            c => Serde(comparison),
            simulated => comparison.simulated(),
            forest => forest,
            drift => Serde(drift),
            flipped => Serde(flipped),
        },
    )
}

/// A flipped task's page: its (base, candidate) trials side by side from
/// their first divergence, with a link `back` to the comparison.
pub(crate) fn task_html(
    env: &Environment<'static>,
    task: &TaskComparison,
    (base, candidate): (&TrialTrace, &TrialTrace),
    back: &str,
) -> Result<String, ReportError> {
    let page = side_by_side(&task.task, task.flip.as_str(), base, candidate);
    render(
        env,
        "compare_task.html",
        context! { page => Serde(&page), back },
    )
}

fn safe_name(task: &str) -> String {
    task.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The success rate and every metric both sides have, as relative changes.
pub(crate) fn forest_rows(c: &Comparison) -> Vec<ForestRow> {
    let mut rows = Vec::new();
    let base_rate = c.base.success_rate;
    if let (Some(low), Some(high)) = (c.success.ci_low, c.success.ci_high)
        && base_rate > 0.0
    {
        rows.push(ForestRow {
            label: "success rate".to_string(),
            relative: c.success.delta / base_rate,
            low: low / base_rate,
            high: high / base_rate,
        });
    }
    for m in &c.metrics {
        if let (Some(base), Some(relative), Some(low), Some(high)) =
            (m.base, m.relative, m.ci_low, m.ci_high)
            && base != 0.0
        {
            rows.push(ForestRow {
                label: m.name.clone(),
                relative,
                low: low / base,
                high: high / base,
            });
        }
    }
    rows
}

const ROW_HEIGHT: u32 = 34;
const FONT: &str = "sans-serif";

fn forest_svg(rows: &[ForestRow]) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    if rows.is_empty() {
        return Ok(svg);
    }
    let extent = rows
        .iter()
        .flat_map(|r| [r.low.abs(), r.high.abs(), r.relative.abs()])
        .fold(0.1f64, f64::max)
        .min(5.0)
        * 1.15;
    let n = rows.len();
    {
        let height = 70 + ROW_HEIGHT * n as u32;
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Change from base (95% CI, relative)", (FONT, 17))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(150)
            .build_cartesian_2d(-extent..extent, -0.5f64..n as f64 - 0.5)?;
        let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
        let y_fmt = |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(n - 1 - i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&y_fmt)
            .x_label_formatter(&|x| format!("{:+.0}%", x * 100.0))
            .label_style((FONT, 13))
            .draw()?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, -0.5), (0.0, n as f64 - 0.5)],
            BLACK.stroke_width(1),
        )))?;
        let clamp = |x: f64| x.clamp(-extent, extent);
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let y = (n - 1 - i) as f64;
            ErrorBar::new_horizontal(
                y,
                clamp(r.low),
                clamp(r.relative),
                clamp(r.high),
                RGBColor(70, 120, 190).stroke_width(2),
                10,
            )
        }))?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let y = (n - 1 - i) as f64;
            let style = TextStyle::from((FONT, 12).into_font())
                .color(&RGBColor(34, 34, 34))
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            EmptyElement::at((clamp(r.relative), y))
                + Circle::new((0, 0), 4, RGBColor(70, 120, 190).filled())
                + Text::new(format!("{:+.1}%", r.relative * 100.0), (0, -7), style)
        }))?;
        root.present()?;
    }
    Ok(svg)
}

/// One trial's tool calls for the side-by-side view.
#[derive(Debug, Clone, Serialize)]
struct CallView {
    step: Option<u32>,
    tool: String,
    arguments: String,
    result: String,
    error_kind: Option<String>,
    /// The first call where the two trials differ.
    diverges: bool,
    /// Before the divergence: the same on both sides.
    shared: bool,
}

#[derive(Debug, Clone, Serialize)]
struct TrialColumn {
    trial_id: String,
    outcome: String,
    steps: u32,
    calls: Vec<CallView>,
    checks: Vec<(String, bool, String)>,
}

#[derive(Debug, Clone, Serialize)]
struct SideBySide {
    task: String,
    flip: String,
    divergence: Option<usize>,
    base: TrialColumn,
    candidate: TrialColumn,
}

fn side_by_side(task: &str, flip: &str, base: &TrialTrace, candidate: &TrialTrace) -> SideBySide {
    let divergence = first_divergence(base, candidate);
    SideBySide {
        task: task.to_string(),
        flip: flip.to_string(),
        divergence,
        base: column(base, divergence),
        candidate: column(candidate, divergence),
    }
}

fn column(trace: &TrialTrace, divergence: Option<usize>) -> TrialColumn {
    let calls = trace
        .spans
        .iter()
        .filter(|s| s.kind == kind::TOOL_CALL)
        .enumerate()
        .map(|(i, s)| call_view(s, i, divergence))
        .collect();
    let checks = trace
        .spans
        .iter()
        .filter(|s| s.kind == kind::CHECK)
        .map(|s| {
            (
                s.name.clone(),
                s.check_passed.unwrap_or(false),
                tail(s.check_output.as_deref().unwrap_or(""), 1500),
            )
        })
        .collect();
    TrialColumn {
        trial_id: trace.trial.trial_id.clone(),
        outcome: trace.trial.outcome.clone(),
        steps: trace.trial.counts.get(col::STEPS),
        calls,
        checks,
    }
}

fn call_view(span: &SpanRow, index: usize, divergence: Option<usize>) -> CallView {
    CallView {
        step: span.step,
        tool: span.tool_name.clone().unwrap_or_default(),
        arguments: tail(span.tool_arguments.as_deref().unwrap_or(""), 1500),
        result: tail(span.tool_result.as_deref().unwrap_or(""), 1500),
        error_kind: span.error_kind.clone(),
        diverges: divergence == Some(index),
        shared: divergence.is_none_or(|at| index < at),
    }
}

/// The last `max` characters, marked when cut.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let kept: String = text.chars().skip(count - max).collect();
    format!("[… {} characters before]\n{kept}", count - max)
}
