//! The terminal's renderings of analysis results: what `tack query`,
//! `tack report --cost`, `tack compare`, `tack show` and the end of `tack
//! run` print, and the account of an agent run that `tack exec` and `tack
//! chat` give as it happens. Like the HTML pages, they only present: every
//! figure comes from tack-analysis or the events, and the caller prints.

mod compare;
mod cost;
mod events;
mod query;
mod summary;
mod trial;

pub use compare::{comparison, simulated_note};
pub use cost::cost;
pub use events::{chat_event, exec_event, exec_outcome};
pub use query::{query_csv, query_json, query_table};
pub use summary::{SummaryTrial, harness_errors, infra_errors, run_summary};
pub use trial::{TrialStyle, trial, trial_json};

/// Columns padded to their widest value, a rule under the headers; `right`
/// aligns a column to the right (numbers). Trailing blanks are trimmed.
pub fn table(headers: &[String], rows: &[Vec<String>], right: &[bool]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(width(cell));
            }
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(width(cell));
                if right.get(i).copied().unwrap_or(false) {
                    format!("{}{cell}", " ".repeat(pad))
                } else {
                    format!("{cell}{}", " ".repeat(pad))
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(headers);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&line(&rule));
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_and_numbers_align_right() {
        let headers = strings(&["name", "n"]);
        let rows = vec![strings(&["a", "10"]), strings(&["long-name", "2"]), vec![]];
        let text = table(&headers, &rows, &[false, true]);
        assert_eq!(
            text,
            "name        n\n---------  --\na          10\nlong-name   2\n\n"
        );
    }
}
