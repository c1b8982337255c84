//! `cost.html` and `cost.csv`: what a run cost by variant × model × task, and
//! what it was priced with. Costs the trace does not know stay unknown on the
//! page, never 0.

use crate::view::thousands;
use serde::Serialize;
use tack_analysis::cost::{CostReport, CostRow, ModelPrice, format_usd};
use tack_protocol::ModelSpec;

#[derive(Debug, Serialize)]
pub(crate) struct CostView {
    pub run_id: String,
    pub price_table: String,
    /// Variants whose results (and unpriced calls) come from built-in models.
    pub simulated: Vec<String>,
    pub unknown_calls: String,
    pub any_unknown: bool,
    pub by_variant: Vec<RowView>,
    pub rows: Vec<RowView>,
    pub total: RowView,
    /// Attempts run again and final infra errors, when there are any.
    pub not_scored: Option<RowView>,
    pub prices: Vec<PriceView>,
    pub prices_note: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RowView {
    pub variant: String,
    pub model: String,
    pub task: String,
    pub simulated: bool,
    pub trials: u32,
    pub successes: u32,
    pub calls: String,
    pub input: String,
    pub cache_read: String,
    pub cache_write: String,
    pub output: String,
    pub reasoning: String,
    pub usd: String,
    pub per_success: String,
    pub unknown_calls: String,
    /// `exact`, `lower_bound` or `unknown`, for the row's CSS class.
    pub status: &'static str,
}

#[derive(Debug, Serialize)]
pub(crate) struct PriceView {
    pub model: String,
    pub entry: String,
    pub priced: bool,
    pub input: String,
    pub cached_input: String,
    pub cache_write: String,
    pub output: String,
    pub reasoning: String,
}

pub(crate) fn cost_view(report: &CostReport) -> CostView {
    CostView {
        run_id: report.run_id.clone(),
        price_table: report
            .price_table
            .clone()
            .unwrap_or_else(|| "not recorded".to_string()),
        simulated: report.simulated.clone(),
        unknown_calls: thousands(report.total.unknown_cost_calls as f64),
        any_unknown: report.any_unknown(),
        by_variant: report.by_variant.iter().map(row_view).collect(),
        rows: report.rows.iter().map(row_view).collect(),
        total: row_view(&report.total),
        not_scored: (report.not_scored.trials > 0).then(|| row_view(&report.not_scored)),
        prices: report.prices.iter().map(price_view).collect(),
        prices_note: report.prices_note.clone(),
    }
}

fn row_view(row: &CostRow) -> RowView {
    let count = |n: u64| thousands(n as f64);
    RowView {
        variant: row.variant.clone(),
        model: row.model.clone(),
        task: row.task.clone().unwrap_or_else(|| "all tasks".to_string()),
        simulated: row.simulated,
        trials: row.trials,
        successes: row.successes,
        calls: count(row.calls),
        input: count(row.input_tokens),
        cache_read: count(row.cache_read_tokens),
        cache_write: count(row.cache_write_tokens),
        output: count(row.output_tokens),
        reasoning: count(row.reasoning_tokens),
        usd: row.usd_text(),
        per_success: row.per_success_text(),
        unknown_calls: count(row.unknown_cost_calls),
        status: row.status.as_str(),
    }
}

fn price_view(price: &ModelPrice) -> PriceView {
    let rate = |usd: Option<f64>| usd.map_or_else(|| "—".to_string(), format_usd);
    let rates = price.rates.as_ref();
    PriceView {
        model: price.model.clone(),
        entry: price.entry.clone().unwrap_or_else(|| {
            let builtin = ModelSpec::parse(&price.model).is_ok_and(|m| m.is_simulated());
            if builtin {
                "none: a built-in model is never priced".to_string()
            } else {
                "no price: cost unknown".to_string()
            }
        }),
        priced: rates.is_some(),
        input: rate(rates.map(|r| r.input)),
        cached_input: rate(rates.map(|r| r.cached_input)),
        cache_write: rate(rates.map(|r| r.cache_write)),
        output: rate(rates.map(|r| r.output)),
        reasoning: rate(rates.map(|r| r.reasoning)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::{environment, render};
    use minijinja::context;
    use minijinja::value::Serde;
    use tack_analysis::cost::{CostStatus, Rates};

    fn row(variant: &str, task: Option<&str>, usd: f64, unknown: u64, calls: u64) -> CostRow {
        let status = match unknown {
            0 => CostStatus::Exact,
            u if u >= calls => CostStatus::Unknown,
            _ => CostStatus::LowerBound,
        };
        CostRow {
            variant: variant.to_string(),
            model: if variant == "sim" {
                "sim".to_string()
            } else {
                "openai:gpt-4o".to_string()
            },
            task: task.map(str::to_owned),
            simulated: variant == "sim",
            trials: 2,
            successes: 1,
            calls,
            input_tokens: 12_000,
            cache_read_tokens: 2_000,
            cache_write_tokens: 0,
            output_tokens: 800,
            reasoning_tokens: 0,
            known_usd: usd,
            unknown_cost_calls: unknown,
            status,
            usd_per_success: (status != CostStatus::Unknown).then_some(usd),
        }
    }

    fn report() -> CostReport {
        let real = row("real", Some("fix-<bug>"), 0.0425, 1, 4);
        let sim = row("sim", Some("fix-<bug>"), 0.0, 3, 3);
        let mut total = row("all variants", None, 0.0425, 4, 7);
        total.model = String::new();
        CostReport {
            run_id: "run-1".to_string(),
            price_table: Some("2026-11-01".to_string()),
            simulated: vec!["sim".to_string()],
            by_variant: vec![row("real", None, 0.0425, 1, 4), row("sim", None, 0.0, 3, 3)],
            rows: vec![real, sim],
            total,
            // Every attempt was scored.
            not_scored: {
                let mut none = row("not scored", None, 0.0, 0, 0);
                none.trials = 0;
                none
            },
            prices: vec![
                ModelPrice {
                    model: "openai:gpt-4o".to_string(),
                    entry: Some("gpt-4o".to_string()),
                    rates: Some(Rates {
                        input: 2.5,
                        cached_input: 1.25,
                        cache_write: 2.5,
                        output: 10.0,
                        reasoning: 10.0,
                    }),
                },
                ModelPrice {
                    model: "sim".to_string(),
                    entry: None,
                    rates: None,
                },
            ],
            prices_note: None,
        }
    }

    fn page(report: &CostReport) -> String {
        let env = environment().unwrap();
        let view = cost_view(report);
        render(&env, "cost.html", context! { cost => Serde(view) }).unwrap()
    }

    #[test]
    fn unknown_and_partial_costs_are_labelled_never_zero() {
        let view = cost_view(&report());
        let statuses: Vec<&str> = view.rows.iter().map(|r| r.status).collect();
        assert_eq!(statuses, ["lower_bound", "unknown"]);
        assert_eq!(view.rows[0].usd, "≥ $0.0425");
        assert_eq!(view.rows[1].usd, "unknown");
        assert_eq!(view.rows[1].per_success, "unknown");
        let html = page(&report());
        assert!(html.contains("≥ $0.0425"), "{html}");
        assert!(!html.contains("<td class=\"num\">$0</td>"), "{html}");
        assert!(html.contains("7 model calls of scored trials"), "{html}");
    }

    #[test]
    fn the_page_says_simulated_lists_prices_and_escapes_names() {
        let html = page(&report());
        assert!(html.contains("simulated"), "{html}");
        assert!(html.contains("2026-11-01"));
        assert!(html.contains("$2.50"), "{html}");
        assert!(
            html.contains("none: a built-in model is never priced"),
            "{html}"
        );
        assert!(html.contains("fix-&lt;bug&gt;"));
        assert!(!html.contains("<script"), "no scripts: {html}");
        assert!(html.contains("href=\"cost.csv\""));
    }

    #[test]
    fn without_prices_the_page_says_why() {
        let mut report = report();
        report.prices.clear();
        report.prices_note = Some("per-model prices were not supplied".to_string());
        let html = page(&report);
        assert!(
            html.contains("per-model prices were not supplied"),
            "{html}"
        );
    }
}
