//! What a run cost, for the terminal (`tack report --cost`): the table
//! `cost.html` shows, and what its labels mean.

use tack_analysis::cost::{CostReport, CostRow};
use tack_protocol::ModelSpec;

/// The cost table: per variant, the run's total, then per variant × task;
/// then the notes on unknown costs and the prices used.
pub fn cost(cost: &CostReport) -> String {
    let headers: Vec<String> = [
        "variant",
        "model",
        "task",
        "trials",
        "passed",
        "calls",
        "input",
        "cached",
        "cache-write",
        "output",
        "reasoning",
        "dollars",
        "per success",
        "unpriced calls",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let right: Vec<bool> = (0..headers.len()).map(|i| i >= 3).collect();
    // Columns of counts no call had (cached, cache-write, reasoning tokens,
    // unpriced calls) are left out, named below the table: the table then
    // fits a terminal.
    let total = &cost.total;
    let none: Vec<usize> = [
        ("cached", total.cache_read_tokens),
        ("cache-write", total.cache_write_tokens),
        ("reasoning", total.reasoning_tokens),
        ("unpriced calls", total.unknown_cost_calls),
    ]
    .into_iter()
    .filter(|(_, sum)| *sum == 0)
    .filter_map(|(name, _)| headers.iter().position(|h| h == name))
    .collect();
    let kept = |cells: Vec<String>| -> Vec<String> {
        cells
            .into_iter()
            .enumerate()
            .filter_map(|(i, cell)| (!none.contains(&i)).then_some(cell))
            .collect()
    };
    let row = |r: &CostRow| {
        let mut cells = vec![
            r.variant.clone(),
            r.model.clone(),
            r.task.clone().unwrap_or_else(|| "(all)".to_string()),
        ];
        cells.extend(r.count_cells());
        cells.extend([
            r.usd_text(),
            r.per_success_text(),
            r.unknown_cost_calls.to_string(),
        ]);
        cells
    };
    // Variant totals, the run's, a blank line, then variant × task.
    let mut rows: Vec<Vec<String>> = cost.by_variant.iter().map(row).map(kept).collect();
    rows.push(kept(row(&cost.total)));
    rows.push(Vec::new());
    rows.extend(cost.rows.iter().map(row).map(kept));
    let mut out = format!(
        "cost of run {} (price table {})\n\n",
        cost.run_id,
        cost.price_table.as_deref().unwrap_or("not recorded")
    );
    let right: Vec<bool> = right
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| (!none.contains(&i)).then_some(r))
        .collect();
    out.push_str(&super::table(&kept(headers.clone()), &rows, &right));
    out.push('\n');
    if !none.is_empty() {
        let names: Vec<&str> = none.iter().map(|&i| headers[i].as_str()).collect();
        out.push_str(&format!("none in this run: {}\n", names.join(", ")));
    }
    out.push_str(&notes(cost));
    // Variant, model and task names of imported runs come from elsewhere.
    tack_protocol::printable(&out).into_owned()
}

/// What the table's labels mean, and the prices used.
fn notes(cost: &CostReport) -> String {
    let mut out = String::new();
    if !cost.simulated.is_empty() {
        out.push_str(&format!(
            "simulated (built-in models, not an LLM; never priced): {}\n",
            cost.simulated.join(", ")
        ));
    }
    if cost.any_unknown() {
        let unpriced = cost.total.unknown_cost_calls;
        let have = if unpriced == 1 { "has" } else { "have" };
        out.push_str(&format!(
            "{} {have} no price (unpriced calls): their cost is unknown, not 0. \"≥ $x\" is a \
             lower bound (what the priced calls cost); \"unknown\" means no call was priced.\n",
            tack_protocol::count(unpriced, "model call"),
        ));
    }
    out.push_str("input tokens include cached ones; output tokens include reasoning ones.\n");
    for p in &cost.prices {
        match &p.rates {
            Some(r) => out.push_str(&format!(
                "price of {} (entry {}), $ per million tokens: input {}, cache read {}, cache write {}, output {}, reasoning {}\n",
                p.model,
                p.entry.as_deref().unwrap_or(""),
                r.input, r.cached_input, r.cache_write, r.output, r.reasoning
            )),
            None => {
                let builtin = ModelSpec::parse(&p.model).is_ok_and(|m| m.is_simulated());
                let why = if builtin {
                    "built-in model, never priced"
                } else {
                    "not in the price table"
                };
                out.push_str(&format!("price of {}: none ({why}), cost unknown\n", p.model));
            }
        }
    }
    if let Some(note) = &cost.prices_note {
        out.push_str(&format!("prices not listed: {note}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tack_analysis::cost::{CostStatus, ModelPrice};

    fn row(task: Option<&str>, unknown: u64) -> CostRow {
        CostRow {
            variant: "v".into(),
            model: "openai:gpt-x".into(),
            task: task.map(str::to_owned),
            simulated: false,
            trials: 3,
            successes: 2,
            calls: 4,
            input_tokens: 1000,
            cache_read_tokens: 100,
            cache_write_tokens: 0,
            output_tokens: 50,
            reasoning_tokens: 5,
            known_usd: 0.5,
            unknown_cost_calls: unknown,
            status: if unknown > 0 {
                CostStatus::LowerBound
            } else {
                CostStatus::Exact
            },
            usd_per_success: Some(0.25),
        }
    }

    #[test]
    fn the_table_lists_variants_the_total_and_tasks_then_the_prices() {
        let report = CostReport {
            run_id: "r".into(),
            price_table: Some("2026-01".into()),
            simulated: vec![],
            by_variant: vec![row(None, 1)],
            rows: vec![row(Some("t1"), 1)],
            total: row(None, 1),
            not_scored: row(None, 0),
            prices: vec![ModelPrice {
                model: "openai:gpt-x".into(),
                entry: None,
                rates: None,
            }],
            prices_note: None,
        };
        let text = cost(&report);
        assert!(
            text.starts_with("cost of run r (price table 2026-01)\n\n"),
            "{text}"
        );
        let t1 = text
            .lines()
            .find(|l| l.starts_with("v "))
            .unwrap_or_default();
        let cells: Vec<&str> = t1.split("  ").filter(|c| !c.is_empty()).collect();
        assert_eq!(cells[2].trim(), "(all)", "{text}");
        assert!(text.contains("≥ $0.5000"), "{text}");
        assert!(text.contains("1 model call has no price"), "{text}");
        assert!(
            text.contains("price of openai:gpt-x: none (not in the price table), cost unknown"),
            "{text}"
        );
    }
}
