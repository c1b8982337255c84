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
            "real--fix-bug--0.html",
            "chaos--fix-bug--0.html"
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
fn a_report_written_again_replaces_the_pages_of_the_one_before() {
    let report = report();
    let trials = report.files.index.parent().unwrap().join("trials");
    // A page of a trial this run does not list (an earlier report of
    // another run), and a file that is not a page.
    std::fs::write(trials.join("other--task--0.html"), "<p>stale</p>").unwrap();
    std::fs::write(trials.join("notes.txt"), "mine").unwrap();
    let out = report.files.index.parent().unwrap();
    let missing = write_report(&report._dirs.1.path().join("no-such-run"), out);
    assert!(missing.is_err());
    assert!(
        trials.join("other--task--0.html").is_file(),
        "a report that cannot open its run removes nothing"
    );
    let again = write_report(report._dirs.0.path(), out).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&trials)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "baseline--add-test--1.html",
            "baseline--fix-bug--1.html",
            "chaos--fix-bug--0.html",
            "notes.txt",
            "real--fix-bug--0.html",
        ]
    );
    assert_eq!(again.trial_pages.len(), 4);
    assert_eq!(read(&trials.join("notes.txt")), "mine");
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
    assert!(page.contains("href=\"..&#x2f;index.html\""), "{page}");
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
    assert!(position("Tool call · edit") < position("Approval · bash"));
    assert!(position("Approval · bash") < position("Model call · step 2"));
    assert!(position("Model call · step 2") < position("Check · unit tests"));
    assert!(!page.contains("<script"));
}

/// The timeline items of a trial page, each from its opening `<div class="item`.
fn items(page: &str) -> Vec<&str> {
    let trace = between(page, "<h2>Trace</h2>", "<h2>Conversation</h2>");
    // Each item is `<div id="item-N" class="item KIND…">`.
    trace.split(" class=\"item ").skip(1).collect()
}

#[test]
fn trial_page_shows_approvals_with_their_verdict() {
    let report = report();
    let page = trial_page(&report, &fixture::traced_trial_id());
    let approvals: Vec<&str> = items(&page)
        .into_iter()
        .filter(|item| item.starts_with("approval"))
        .collect();
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    let refused = approvals[0];
    assert!(
        refused.starts_with("approval error\">"),
        "a refusal is marked"
    );
    for text in [
        "<h3>Approval · bash · <span class=\"tag denied\">denied</span></h3>",
        "call-3 · step 1 · approver script: .&#x2f;approve.sh · waited 2,500 ms",
        // The command itself, not its JSON wrapping.
        "<div class=\"label\">command</div><pre>rm -rf tests &amp;&amp; cargo test</pre>",
        "rule <code>ask bash: rm *</code> · judged <code>rm -rf tests</code>",
        "<pre>deletes the tests &lt;refused&gt;</pre>",
    ] {
        assert!(refused.contains(text), "refusal lacks {text}: {refused}");
    }
    assert!(
        !page.contains(fixture::DENIAL_REASON),
        "the reason is escaped"
    );
    let approved = approvals[1];
    assert!(approved.starts_with("approval\">"), "{approved}");
    assert!(approved.contains("<span class=\"tag approved\">approved</span>"));
    assert!(approved.contains("approver approve_all · waited 0 ms"));
    assert!(approved.contains("rule <code>requires_approval</code>"));
    assert!(!approved.contains("reason"), "no reason given, none shown");
}

#[test]
fn trial_page_shows_permission_verdicts_on_tool_calls() {
    let report = report();
    let page = trial_page(&report, &fixture::traced_trial_id());
    let tools: Vec<&str> = items(&page)
        .into_iter()
        .filter(|item| item.starts_with("tool_call"))
        .collect();
    assert_eq!(tools.len(), 4);
    assert!(tools[0].contains(
        "permission <span class=\"tag permission-allow\">allow</span> · rule <code>allow bash: cat *</code> · judged <code>cat src&#x2f;lib.rs</code>"
    ));
    assert!(!tools[1].contains("permission"), "no verdict, no line");
    let denied = tools[2];
    assert!(denied.starts_with("tool_call error\">"));
    assert!(denied.contains("<span class=\"tag error-kind\">denied</span>"));
    assert!(denied.contains("permission <span class=\"tag permission-ask\">ask</span>"));
    assert!(tools[3].contains("exit code 101"));

    let page = trial_page(&report, &fixture::rule_denied_trial_id());
    assert!(page.contains(
        "<span class=\"tag permission-deny\">deny</span> · rule <code>deny bash: curl *</code>"
    ));
    assert!(page.contains("0 interventions, 1 denied tool calls"));
}

#[test]
fn trial_page_shows_model_call_retries() {
    let report = report();
    let page = trial_page(&report, &fixture::traced_trial_id());
    let calls: Vec<&str> = items(&page)
        .into_iter()
        .filter(|item| item.starts_with("model_call"))
        .collect();
    assert_eq!(calls.len(), 3);
    let failed = calls[0];
    assert!(failed.starts_with("model_call error\">"));
    assert!(failed.contains(
        "<h3>Model call · step 1 · <span class=\"tag error-kind\">attempt 1 failed</span></h3>"
    ));
    assert!(failed.contains("<pre>HTTP 429: rate limited &lt;slow down&gt;</pre>"));
    assert!(
        !failed.contains("response"),
        "a failed attempt has no answer"
    );
    let retry = calls[1];
    assert!(retry.contains("<span class=\"tag retry\">retry, attempt 2</span>"));
    assert!(retry.contains("Retry: waited 1,500 ms before attempt 2."));
    assert!(retry.contains("#2 assistant"), "the retry has the answer");
    assert!(!calls[2].contains("retry"), "a first attempt is no retry");
}

#[test]
fn trial_page_header_shows_tampering_and_feedback() {
    let report = report();
    let page = trial_page(&report, &fixture::traced_trial_id());
    let header = between(&page, "<dl class=\"meta\">", "</dl>");
    assert!(
        header.contains("<dt>Feedback rounds</dt><dd>2 "),
        "{header}"
    );
    assert!(header.contains("<dt>Tampered</dt><dd><span class=\"tag tampered\">tampered</span>"));
    assert!(header.contains("<dt>Approvals</dt><dd>2 interventions, 1 denied tool calls</dd>"));
    let page = trial_page(&report, "real--fix-bug--0");
    assert!(page.contains("<dt>Tampered</dt><dd>no</dd>"));
    assert!(page.contains("<dt>Feedback rounds</dt><dd>0</dd>"));
}

#[test]
fn index_summarises_interventions_tampering_and_feedback() {
    let report = report();
    let summary = between(&report.index, "<table class=\"summary\">", "</table>");
    let head = between(summary, "<thead>", "</thead>");
    for column in [
        "Retries",
        "Interventions",
        "Denied calls",
        "Feedback rounds",
        "Tampered",
    ] {
        assert!(
            head.contains(&format!("<th>{column}</th>")),
            "no column {column}"
        );
    }
    let rows: Vec<&str> = summary.split("<tr>").skip(2).collect();
    let baseline = cells_by_heading(summary, rows[0]);
    for (heading, cell) in [
        ("Retries", "4"),
        ("Interventions", "2"),
        ("Denied calls", "2"),
        ("Feedback rounds", "2"),
        ("Sandbox denials", "3"),
        ("Tool errors", "4"),
    ] {
        assert_eq!(baseline[heading], format!("<td class=\"num\">{cell}"));
    }
    assert_eq!(baseline["Tampered"], "<td class=\"num tampered\">1");
    assert!(
        !rows[1].contains("tampered"),
        "0 is not highlighted: {}",
        rows[1]
    );
    let how = between(&report.index, "<p class=\"how-to-read\">", "</p>");
    for word in ["Interventions", "Tampered", "Feedback rounds"] {
        assert!(how.contains(word), "how-to-read lacks {word}");
    }
    let failed = between(&report.index, "<table class=\"failed\">", "</table>");
    assert_eq!(failed.matches("<span class=\"tag tampered\"").count(), 1);
    let tampered_row = between(failed, "<tr class=\"tampered-trial\">", "</tr>");
    assert!(tampered_row.contains(&fixture::traced_trial_id()));
}

#[test]
fn index_shows_injected_faults_per_variant_and_kind() {
    let report = report();
    let summary = between(&report.index, "<table class=\"summary\">", "</table>");
    let head = between(summary, "<thead>", "</thead>");
    assert!(
        head.ends_with("<th>Tampered</th><th>Injected faults</th>\n</tr>"),
        "{head}"
    );
    let rows: Vec<&str> = summary.split("<tr>").skip(2).collect();
    // Tampered, then injected faults: baseline 1 and 0, chaos 0 and 2.
    assert!(
        rows[0].contains("<td class=\"num tampered\">1</td><td class=\"num\">0</td>\n</tr>"),
        "{}",
        rows[0]
    );
    assert!(rows[3].starts_with("\n<td>chaos</td>"), "{}", rows[3]);
    assert!(
        rows[3].contains("<td class=\"num\">0</td><td class=\"num\">2</td>\n</tr>"),
        "{}",
        rows[3]
    );

    let breakdown = between(&report.index, "<table class=\"breakdown\">", "</table>");
    assert!(breakdown.contains("<th>Faults injected</th></tr>"));
    let rows: Vec<&str> = breakdown.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 4);
    assert!(
        rows[0].contains("<td><span class=\"muted\">none</span></td>"),
        "{}",
        rows[0]
    );
    // A failed call first, then the corrupted answers.
    assert!(rows[3].contains(
        "<td><span class=\"tag fault\">transport_error: 1</span> <span class=\"tag fault\">malformed_json: 1</span> </td>"
    ), "{}", rows[3]);

    let how = between(&report.index, "<p class=\"how-to-read\">", "</p>");
    assert!(how.contains("Injected faults are deliberate"), "{how}");
    assert!(how.contains("un-wrapped twin"), "{how}");

    let failed = between(&report.index, "<table class=\"failed\">", "</table>");
    assert_eq!(failed.matches("class=\"tag fault\"").count(), 1);
    let chaos_row = between(failed, &fixture::chaos_trial_id(), "</tr>");
    assert!(
        chaos_row.contains(">2 injected faults</span>"),
        "{chaos_row}"
    );
}

#[test]
fn a_run_without_injected_faults_has_no_fault_columns() {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run(run.path());
    std::fs::remove_file(
        run.path()
            .join("spans")
            .join(format!("{}.parquet", fixture::chaos_trial_id())),
    )
    .unwrap();
    let report = render(run);
    assert!(!report.index.contains("Injected faults"));
    assert!(!report.index.contains("Faults injected"));
    assert!(!report.index.contains("tag fault"));
    // Same column count in every row of the breakdown.
    let breakdown = between(&report.index, "<table class=\"breakdown\">", "</table>");
    assert_eq!(breakdown.matches("<th>").count(), 3);
    assert_eq!(breakdown.matches("<td>").count(), 4 * 3);
}

#[test]
fn trial_page_marks_injected_faults_and_rate_limit_waits() {
    let report = report();
    let page = trial_page(&report, &fixture::chaos_trial_id());
    let header = between(&page, "<dl class=\"meta\">", "</dl>");
    assert_eq!(
        fixture::CHAOS_RATE_LIMIT_WAIT_MS,
        250 + 1200,
        "the waits below"
    );
    assert!(
        header.contains("<dt>Injected faults</dt><dd><span class=\"tag fault\">2</span>"),
        "{header}"
    );
    assert!(
        header.contains("<dt>Rate-limit wait</dt><dd>1,450 ms</dd>"),
        "{header}"
    );
    let items = items(&page);
    assert_eq!(items.len(), 5);
    let transport = items[0];
    assert!(transport.starts_with("model_call error\">"), "{transport}");
    // The reader is led to it: the first failing step.
    assert!(
        page.contains(
            "<a id=\"first-failure\" href=\"#item-0\">Jump to the first failing step</a>"
        )
    );
    assert!(transport.contains(
        "<h3>Model call · step 1 · <span class=\"tag error-kind\">attempt 1 failed</span> · <span class=\"tag fault\" title=\"injected on purpose by the chaos wrapper\">injected fault: transport_error</span></h3>"
    ), "{transport}");
    assert!(
        transport.contains("<div class=\"rate-limit-note\">waited 250 ms for the rate limit</div>")
    );
    assert!(transport.contains("<pre>injected transport error (chaos) &lt;boom&gt;</pre>"));
    let malformed = items[1];
    assert!(
        malformed.starts_with("model_call\">"),
        "a successful call: {malformed}"
    );
    assert!(malformed.contains("<span class=\"tag retry\">retry, attempt 2</span>"));
    assert!(
        malformed.contains(">injected fault: malformed_json</span></h3>"),
        "{malformed}"
    );
    assert!(
        !malformed.contains("rate limit"),
        "no wait, no note: {malformed}"
    );
    let broken = items[2];
    assert!(broken.starts_with("tool_call error\">"));
    assert!(
        broken.contains(
            "<span class=\"tag error-kind\">invalid_json</span> <span class=\"tag fault\""
        ),
        "{broken}"
    );
    assert!(
        broken.contains(">after injected fault: malformed_json</span></h3>"),
        "{broken}"
    );
    let clean = items[3];
    assert!(!clean.contains("fault"), "{clean}");
    assert!(
        clean.contains("waited 1,200 ms for the rate limit"),
        "{clean}"
    );

    // Pages of trials without faults or waits say nothing about them.
    let page = trial_page(&report, &fixture::traced_trial_id());
    assert!(!page.contains("tag fault"));
    assert!(!page.contains("Injected faults"));
    assert!(!page.contains("for the rate limit"));
    assert!(!page.contains("Rate-limit wait"));
}

#[test]
fn a_run_traced_before_permissions_still_renders() {
    let run = tempfile::tempdir().unwrap();
    fixture::write_run_as(run.path(), |_| true);
    let report = render(run);
    let summary = between(&report.index, "<table class=\"summary\">", "</table>");
    assert!(
        !summary.contains("num tampered"),
        "old traces never tampered"
    );
    let page = trial_page(&report, &fixture::traced_trial_id());
    assert!(!page.contains("Approval ·"));
    assert!(!page.contains("permission <span"));
    assert!(page.contains("<dt>Tampered</dt><dd>no</dd>"));
    // Attempts were recorded before retry waits were.
    assert!(page.contains("Retry: attempt 2, sent without a wait."));
    // Nor were faults or rate-limit waits: no fault columns, no tags.
    assert!(!report.index.contains("Injected faults"));
    assert!(!report.index.contains("tag fault"));
    let page = trial_page(&report, &fixture::chaos_trial_id());
    assert!(!page.contains("tag fault"));
    assert!(!page.contains("for the rate limit"));
    assert!(page.contains("<span class=\"tag error-kind\">invalid_json</span></h3>"));
}

#[test]
fn a_run_where_every_trial_passed_has_no_trial_pages() {
    let run = tempfile::tempdir().unwrap();
    fixture::manifest().write(run.path()).unwrap();
    let passed: Vec<_> = fixture::trials()
        .into_iter()
        .filter(|t| t.outcome == tack_protocol::TrialOutcome::Passed)
        .collect();
    fixture::write_trials(run.path(), &passed);
    let report = render(run);
    assert!(report.files.trial_pages.is_empty());
    assert!(report.index.contains("Every trial passed."));
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

/// A summary row's cells by the heading of their column.
fn cells_by_heading<'a>(
    summary: &'a str,
    row: &'a str,
) -> std::collections::HashMap<&'a str, &'a str> {
    let head = between(summary, "<thead>", "</thead>");
    let headings = head
        .split("<th>")
        .skip(1)
        .map(|h| h.split("</th>").next().unwrap_or_default());
    // Each cell as `<td class="…">value`, up to its closing tag.
    let cells = row
        .split("</td>")
        .filter_map(|chunk| chunk.rfind("<td").map(|at| &chunk[at..]));
    headings.zip(cells).collect()
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
        report.index.find("<!-- summary -->") < report.index.find("<!-- variants -->"),
        "the results come before the variants' settings"
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
        5,
        "a header and 4 variants"
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
