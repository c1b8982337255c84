// Tests may panic on failure; the workspace's unwrap ban is for library code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The trace-directory fixture of tack-analysis's tests, shared by path so
// both crates test against the same Parquet files.
#[path = "../../analysis/tests/fixture/mod.rs"]
mod fixture;

use std::path::Path;
use tack_report::{ReportError, ReportFiles, write_report};

struct Report {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    files: ReportFiles,
    index: String,
}

fn report() -> Report {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run(run.path());
    render(run)
}

fn render(run: tempfile::TempDir) -> Report {
    let out = tempfile::tempdir().unwrap();
    let files = write_report(run.path(), &out.path().join("report")).unwrap();
    let index = std::fs::read_to_string(&files.index).unwrap();
    Report {
        _dirs: (run, out),
        files,
        index,
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn trial_page(report: &Report, trial_id: &str) -> String {
    let name = format!("{trial_id}.html");
    let path = report
        .files
        .trial_pages
        .iter()
        .find(|p| p.file_name().unwrap() == name.as_str())
        .unwrap_or_else(|| panic!("no page for {trial_id}: {:?}", report.files.trial_pages));
    read(path)
}

#[test]
fn writes_an_index_and_a_page_per_failed_trial() {
    let report = report();
    assert!(report.files.index.ends_with("report/index.html"));
    let names: Vec<String> = report
        .files
        .trial_pages
        .iter()
        .map(|p| {
            assert!(p.is_file());
            assert_eq!(p.parent().unwrap().file_name().unwrap(), "trials");
            p.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "baseline--fix-bug--1.html",
            "baseline--add-test--1.html",
            "real--fix-bug--0.html"
        ]
    );
    for name in &names {
        let link = format!("href=\"trials/{name}\"");
        assert!(report.index.contains(&link), "missing link {link}");
    }
    assert!(
        !report.index.contains("baseline--fix-bug--0.html"),
        "passed trials get no page"
    );
}

#[test]
fn banner_names_the_simulated_variants() {
    let report = report();
    let start = report
        .index
        .find("id=\"simulated-banner\"")
        .expect("banner");
    let banner = &report.index[start..start + report.index[start..].find("</div>").unwrap()];
    assert!(banner.contains("Results from simulated models"));
    assert!(banner.contains("baseline (model sim)"), "{banner}");
    assert!(banner.contains("unused (model oracle)"), "{banner}");
    assert!(banner.contains("not a real LLM"));
    assert!(!banner.contains("real (model"), "{banner}");
}

#[test]
fn no_banner_without_simulated_models() {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run(run.path());
    let mut manifest = fixture::manifest();
    for variant in &mut manifest.variants {
        variant.simulated = false;
    }
    manifest.write(run.path()).unwrap();
    let report = render(run);
    assert!(!report.index.contains("simulated-banner"));
    assert!(!report.index.contains("Results from simulated models"));
}

#[test]
fn index_is_self_contained_with_inline_svg_plots() {
    let report = report();
    assert_eq!(report.index.matches("<svg").count(), 3);
    assert!(!report.index.contains("<?xml"));
    assert!(!report.index.contains("<script"), "no JavaScript");
    assert!(!report.index.contains("http://") || only_svg_namespace(&report.index));
    assert!(!report.index.contains("https://"));
    // Labels survive plotters' naive font backend as <text> elements.
    assert!(report.index.contains("baseline (sim)"));
    assert!(report.index.contains("no successes") || report.index.contains(">500<"));
    assert!(report.index.contains("<text"));
}

fn only_svg_namespace(html: &str) -> bool {
    html.matches("http://").count() == html.matches("http://www.w3.org/2000/svg").count()
}

#[test]
fn index_shows_matrix_and_escaped_errors() {
    let report = report();
    // Auto-escaping writes `/` as `&#x2f;`.
    assert!(report.index.contains("1&#x2f;2"));
    assert!(
        report.index.contains("hsl(120, 65%, 80%)"),
        "a 1/1 cell is green"
    );
    assert!(report.index.contains("rate limited &lt;429&gt;"));
    assert!(!report.index.contains("<429>"));
}

#[test]
fn trial_page_shows_the_trace_escaped_and_in_order() {
    let report = report();
    let page = trial_page(&report, &fixture::traced_trial_id());
    assert!(page.contains("href=\"../index.html\""));
    assert!(
        !page.contains(fixture::HOSTILE),
        "tool output must be escaped"
    );
    assert!(page.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
    assert!(
        page.contains("warning: x &lt; y"),
        "stderr is shown, escaped"
    );
    for text in [
        "You are a careful coding agent.",
        "Fix the bug in src&#x2f;lib.rs.",
        "Let me look at the code.",
        "&quot;command&quot;: &quot;cat src&#x2f;lib.rs&quot;",
        "{not json",
        "not valid JSON, shown as written",
        "cargo test",
        "test result: FAILED. 1 passed; 1 failed",
        "verification_failed",
    ] {
        assert!(page.contains(text), "trial page lacks {text}");
    }
    assert!(page.contains("class=\"tag error-kind\">invalid_json<"));
    let position = |text: &str| page.find(text).unwrap_or_else(|| panic!("no {text}"));
    assert!(position("Model call · step 1") < position("Tool call · bash"));
    assert!(position("Tool call · bash") < position("Tool call · edit"));
    assert!(position("Tool call · edit") < position("Model call · step 2"));
    assert!(position("Model call · step 2") < position("Check · unit tests"));
    assert!(!page.contains("<script"));
}

#[test]
fn a_trial_without_spans_still_gets_a_page() {
    let report = report();
    let page = trial_page(&report, "real--fix-bug--0");
    assert!(page.contains("No spans were recorded"));
    assert!(page.contains("model_error"));
}

#[test]
fn summary_table_snapshot() {
    let report = report();
    let start = report.index.find("<!-- summary -->").unwrap();
    let end = report.index.find("<!-- /summary -->").unwrap();
    insta::assert_snapshot!(report.index[start..end].trim());
}

fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html.find(start).unwrap_or_else(|| panic!("no {start}"));
    let to = from + html[from..].find(end).unwrap_or_else(|| panic!("no {end}"));
    &html[from + start.len()..to]
}

#[test]
fn variants_section_highlights_differing_settings_first() {
    let report = report();
    let section = between(&report.index, "<!-- variants -->", "<!-- /variants -->");
    assert!(
        report.index.find("<!-- variants -->") < report.index.find("<!-- summary -->"),
        "variants come before the summary"
    );
    // Columns in manifest order, with model, simulated tag and description.
    let head = between(section, "<thead>", "</thead>");
    let position = |text: &str| head.find(text).unwrap_or_else(|| panic!("no {text}"));
    assert!(position("<th>baseline</th>") < position("<th>real</th>"));
    assert!(position("<th>real</th>") < position("<th>unused</th>"));
    assert!(head.contains("<td>sim <span class=\"tag sim\">simulated</span></td>"));
    assert!(head.contains("<td>openai:gpt-4o</td>"));
    assert!(head.contains("<td>baseline variant</td>"));
    // Baseline alone shows stdout only: the first row, marked.
    let body = between(section, "<tbody>", "</tbody>");
    let rows: Vec<&str> = body.split("<tr").skip(1).collect();
    assert!(
        rows[0].starts_with(" class=\"differs\"><th class=\"setting\">Tool results <span class=\"tag differs-tag\">differs</span></th>"),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains("<td class=\"odd\">stdout_only</td><td>full</td><td>full</td>"),
        "the odd value out is marked: {}",
        rows[0]
    );
    let same: Vec<&&str> = rows.iter().filter(|r| !r.contains("differs")).collect();
    assert_eq!(same.len(), rows.len() - 1, "only tool results differ");
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.contains(&format!(">{name}</th>")))
            .unwrap_or_else(|| panic!("no row {name}"))
    };
    assert!(row("Max steps").contains("<td>10</td><td>10</td><td>10</td>"));
    assert!(row("Output limit").contains("<td>32,768 bytes</td>"));
    // Sim parameters only apply to the sim model.
    assert!(row("Sim skill").contains("<td>0.7</td><td>—</td><td>—</td>"));
    // The long prompt is shortened, the whole text one click away.
    let prompt = row("System prompt");
    assert!(prompt.contains("<details><summary title=\"You are a careful coding agent."));
    assert!(prompt.contains("…</summary>"));
    assert!(prompt.contains("and answer with a short summary when done.</div></details>"));
    assert!(
        report.index.contains("1 setting differs between variants"),
        "the section says what is highlighted"
    );
}

#[test]
fn variants_section_snapshot() {
    let report = report();
    insta::assert_snapshot!(
        between(&report.index, "<!-- variants -->", "<!-- /variants -->").trim()
    );
}

#[test]
fn outcomes_have_their_own_table() {
    let report = report();
    let summary = between(&report.index, "<table class=\"summary\">", "</table>");
    assert!(!summary.contains("outcome-"), "the summary stays numeric");
    let breakdown = between(&report.index, "<table class=\"breakdown\">", "</table>");
    assert!(breakdown.contains("<span class=\"tag outcome-limit\">limit: 1</span>"));
    assert!(breakdown.contains("<span class=\"tag\">step_limit: 1</span>"));
    assert_eq!(
        breakdown.matches("<tr>").count(),
        4,
        "a header and 3 variants"
    );
}

#[test]
fn rendering_twice_gives_identical_files() {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run(run.path());
    let out = tempfile::tempdir().unwrap();
    let first = write_report(run.path(), &out.path().join("a")).unwrap();
    let second = write_report(run.path(), &out.path().join("b")).unwrap();
    assert_eq!(read(&first.index), read(&second.index));
    assert_eq!(first.trial_pages.len(), second.trial_pages.len());
    for (a, b) in first.trial_pages.iter().zip(&second.trial_pages) {
        assert_eq!(read(a), read(b), "{}", a.display());
    }
}

#[test]
fn a_run_without_trials_is_an_analysis_error() {
    let run = tempfile::tempdir().unwrap();
    fixture::manifest().write(run.path()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = write_report(run.path(), out.path()).unwrap_err();
    assert!(matches!(err, ReportError::Analysis(_)));
    assert!(err.to_string().contains("did the run start?"), "{err}");
}

/// Writes the fixture's report to $TACK_REPORT_PREVIEW for eyeballing; a
/// no-op otherwise.
#[test]
fn preview() {
    let Some(out) = std::env::var_os("TACK_REPORT_PREVIEW") else {
        return;
    };
    let run = tempfile::tempdir().unwrap();
    fixture::write_run(run.path());
    write_report(run.path(), Path::new(&out)).unwrap();
}
