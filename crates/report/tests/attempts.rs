//! Reports of runs with retried attempts and infra errors, and of runs too
//! large for a page per failed trial.

// Tests may panic on failure; the workspace's unwrap ban is for library code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../analysis/tests/fixture/mod.rs"]
mod fixture;

use tack_report::{FailedLimit, ReportOptions, write_report, write_report_with_prices};

fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html.find(start).unwrap_or_else(|| panic!("no {start}"));
    let to = from + html[from..].find(end).unwrap_or_else(|| panic!("no {end}"));
    &html[from + start.len()..to]
}

#[test]
fn infra_errors_and_retried_attempts_are_shown_apart() {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run_with_attempts(run.path());
    let out = tempfile::tempdir().unwrap();
    let files = write_report(run.path(), out.path()).unwrap();
    let index = std::fs::read_to_string(&files.index).unwrap();
    assert!(
        index.contains(
            "11 trials recorded (each by its last attempt), 10 scored (1 ended in an infra error and is not scored)"
        ),
        "{}",
        between(&index, "<h2>Summary</h2>", "<!-- summary -->")
    );
    assert!(index.contains("3 earlier attempts were run again"));
    // The matrix flags the cell whose trial is an infra error.
    assert!(
        index.contains("0&#x2f;1 +1 infra"),
        "{}",
        between(&index, "<table class=\"matrix\">", "</table>")
    );
    // The agent's failures and the infrastructure's are listed apart.
    let failed = between(&index, "<h2>Failed trials</h2>", "</section>");
    let infra = between(&index, "<h2>Infrastructure errors</h2>", "</section>");
    let infra_id = fixture::final_infra_error_id();
    assert!(infra.contains(&infra_id) && !failed.contains(&infra_id));
    assert!(failed.contains("real--fix-bug--0") && !infra.contains("real--fix-bug--0"));
    assert!(infra.contains("&lt;503&gt;"), "errors are escaped");
    // Earlier attempts are not listed and get no page.
    assert!(!index.contains(&fixture::cut_off_trial_id()));
    let page = files
        .trial_pages
        .iter()
        .any(|p| p.file_name().unwrap().to_string_lossy().contains(&infra_id));
    assert!(page, "the final infra error has a page");
    assert!(!index.contains("failed-left-out"), "nothing left out");
    let start = index.find("<!-- summary -->").unwrap();
    let end = index.find("<!-- /summary -->").unwrap();
    insta::assert_snapshot!(index[start..end].trim());
    // The cost page sums what was not scored apart.
    let cost = std::fs::read_to_string(&files.cost).unwrap();
    assert!(cost.contains("Not scored: attempts run again, final infra errors"));
}

#[test]
fn a_capped_report_says_how_many_failures_it_left_out() {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run(run.path());
    let out = tempfile::tempdir().unwrap();
    let options = ReportOptions {
        failed: FailedLimit {
            per_task: 1,
            total: 2,
        },
    };
    let files = write_report_with_prices(run.path(), out.path(), &options, |_| {}).unwrap();
    assert_eq!(files.trial_pages.len(), 2);
    let index = std::fs::read_to_string(&files.index).unwrap();
    let note = between(&index, "id=\"failed-left-out\">", "</p>");
    assert!(
        note.contains("Listing 2 of the 4 trials that did not pass"),
        "{note}"
    );
    assert!(note.contains("the first 1 of each variant and task, at most 2 in all"));
    assert!(note.contains("tack show traces/run-1 &lt;trial-id&gt;"));
    assert!(index.contains("baseline--fix-bug--1") && !index.contains("chaos--fix-bug--0"));
}
