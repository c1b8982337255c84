//! `tack view` through the binary, over HTTP: the token guards every page;
//! the runs list, the trials table (filters, search, sort, pages), a
//! trial's trajectory and a comparison answer from a run the test wrote;
//! and a run full of markup an agent or a task could write is shown as
//! text on every page.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use common::viewer::{Viewer, demo_run, get, hostile_suite, links};

const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn total(html: &str) -> usize {
    let at = html
        .find("id=\"total\">")
        .expect("the page says how many trials match");
    html[at + 11..].split('<').next().unwrap().parse().unwrap()
}

#[test]
fn the_viewer_shows_runs_trials_a_trial_and_a_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let run = demo_run(dir.path());
    let run_id = run["run"]["run_id"].as_str().unwrap();
    let trials = run["run"]["trials"].as_array().unwrap();
    let failed = trials
        .iter()
        .filter(|t| t["outcome"] == "verification_failed")
        .count();
    assert!(
        failed > 0,
        "the demo's sim-stdout variant fails some trials"
    );
    let viewer = Viewer::start(&dir.path().join("traces"), 5);

    // Without the token nothing is shown; a wrong token is refused too.
    let refused = get(&viewer.base, "/", None);
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("access token"), "{}", refused.body);
    assert_eq!(get(&viewer.base, "/?token=0123", None).status, 403);
    assert_eq!(
        get(&viewer.base, "/trials", Some("tack_view_token=nope")).status,
        403
    );
    let cookie = viewer.cookie();
    // The token under another viewer's cookie name is not this one's.
    let token = cookie.split('=').nth(1).unwrap();
    let other = format!("tack_view_token={token}");
    assert_eq!(get(&viewer.base, "/trials", Some(&other)).status, 403);
    let page = |path: &str| {
        let answer = get(&viewer.base, path, Some(&cookie));
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        assert_eq!(
            answer.header("content-security-policy"),
            Some(CSP),
            "{path}"
        );
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
        answer.body
    };

    let runs = page("/");
    assert!(runs.contains(run_id), "{runs}");
    assert!(runs.contains("finished"), "{runs}");
    assert!(
        runs.contains("12 / 12"),
        "every planned trial finished: {runs}"
    );
    assert!(
        runs.contains("http-equiv=\"refresh\" content=\"5\""),
        "{runs}"
    );
    let style = get(&viewer.base, "/style.css", Some(&cookie));
    assert_eq!(
        style.header("content-type"),
        Some("text/css; charset=utf-8")
    );
    assert!(style.body.contains(".outcome-passed"));

    // The trials table: every trial, then filtered, searched, sorted.
    assert_eq!(total(&page(&format!("/trials?run={run_id}"))), trials.len());
    let failing = page(&format!("/trials?run={run_id}&outcome=verification_failed"));
    assert_eq!(total(&failing), failed);
    let slugify = trials
        .iter()
        .filter(|t| t["task"] == "slugify-dashes")
        .count();
    assert_eq!(
        total(&page("/trials?q=slugify")),
        slugify,
        "search over tool calls"
    );
    assert_eq!(total(&page("/trials?q=no+such+text+anywhere")), 0);
    let by_tokens = page("/trials?sort=tokens&order=desc");
    assert_eq!(total(&by_tokens), trials.len());
    let most = trials
        .iter()
        .map(|t| {
            let usage = &t["usage"];
            usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
        })
        .max()
        .unwrap();
    let first_row = by_tokens.split("<tbody>").nth(1).unwrap();
    assert!(
        first_row
            .split("</tr>")
            .next()
            .unwrap()
            .contains(&format!(">{most}<"))
    );
    let bad = get(&viewer.base, "/trials?sort=colour", Some(&cookie));
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("steps, tokens, cost"), "{}", bad.body);
    assert_eq!(
        get(&viewer.base, "/trials?run=nope", Some(&cookie)).status,
        404
    );
    // The runs page's "failed trials" shows every trial that did not pass.
    let not_passed = trials.iter().filter(|t| t["outcome"] != "passed").count();
    let failed_link = links(&runs, "/trials?")
        .into_iter()
        .find(|l| l.contains("outcome="))
        .unwrap();
    assert_eq!(total(&page(&failed_link)), not_passed, "{failed_link}");
    // A filter no run has is refused, naming what there is; a page past the
    // end shows the last one; a trial not in the run is not found.
    for (path, says) in [
        ("/trials?outcome=bogus", "use one of not_passed, passed"),
        ("/trials?variant=bogus", "no run shown has variant `bogus`"),
        ("/trials?task=bogus", "no run shown has task `bogus`"),
    ] {
        let refused = get(&viewer.base, path, Some(&cookie));
        assert_eq!(refused.status, 400, "{path}");
        assert!(refused.body.contains(says), "{path}: {}", refused.body);
    }
    let last = page("/trials?page=999");
    assert_eq!(total(&last), trials.len());
    assert!(!links(&last, "/trial?").is_empty(), "{last}");
    assert_eq!(
        get(
            &viewer.base,
            &format!("/trial?run={run_id}&id=nope"),
            Some(&cookie)
        )
        .status,
        404
    );

    // A failed trial: its trajectory, with a jump to the first failing step.
    let trial_link = links(&failing, "/trial?").into_iter().next().unwrap();
    let trial = page(&trial_link);
    assert!(trial.contains("verification_failed"), "{trial}");
    let jump = links(&trial, "#item-")
        .into_iter()
        .next()
        .expect("a jump link");
    assert!(trial.contains(&format!("id=\"{}\"", &jump[1..])), "{jump}");

    // The comparison, and a flipped task side by side.
    let sides = format!("a={run_id}%2Fsim-full&b={run_id}%2Fsim-stdout");
    let pick = page("/compare");
    assert!(
        pick.contains(&format!("{run_id}&#x2f;sim-stdout")),
        "{pick}"
    );
    let comparison = page(&format!("/compare?{sides}"));
    assert!(
        comparison.contains("Difference in success rate"),
        "{comparison}"
    );
    let flipped = links(&comparison, "/compare/task?");
    assert!(!flipped.is_empty(), "{comparison}");
    let side_by_side = page(&flipped[0]);
    assert!(side_by_side.contains("candidate"), "{side_by_side}");

    // Tasks: the flaky ones (a variant whose trials of the task disagree),
    // exported as a quarantine list that tack gate leaves out.
    let mut flaky: Vec<&str> = Vec::new();
    for t in trials {
        let same = |u: &&serde_json::Value| u["task"] == t["task"] && u["variant"] == t["variant"];
        let mixed = trials
            .iter()
            .filter(same)
            .any(|u| u["outcome"] != t["outcome"]);
        let task = t["task"].as_str().unwrap();
        if mixed && !flaky.contains(&task) {
            flaky.push(task);
        }
    }
    assert!(
        !flaky.is_empty(),
        "the demo's sim-stdout is flaky on some task"
    );
    let tasks = page("/tasks");
    assert!(tasks.contains(flaky[0]), "{tasks}");
    let history = page(&format!("/task?name={}", flaky[0]));
    assert!(
        history.contains("sim-stdout") && history.contains(run_id),
        "{history}"
    );
    // A task is its suite's: the tasks page links each with its suite, and
    // another suite's task of the name is not this one.
    assert!(tasks.contains("&amp;suite=demo"), "{tasks}");
    let of_demo = page(&format!("/task?name={}&suite=demo", flaky[0]));
    assert!(of_demo.contains(run_id), "{of_demo}");
    let of_other = page(&format!("/task?name={}&suite=other", flaky[0]));
    assert!(of_other.contains("No scored trial"), "{of_other}");
    let export = get(&viewer.base, "/tasks/quarantine.txt", Some(&cookie));
    assert_eq!(
        export.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // Without `min=`, any disagreement: said so, not "at least 0%".
    assert!(
        export
            .body
            .contains("disagreed on them in some of their trial pairs"),
        "{}",
        export.body
    );
    let mut listed: Vec<&str> = export
        .body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect();
    listed.sort();
    flaky.sort();
    assert_eq!(listed, flaky, "{}", export.body);
    let list = dir.path().join("quarantine.txt");
    // One name more, that no task has: said, not silently counted.
    std::fs::write(&list, format!("{}\nnosuchtask\n", export.body)).unwrap();
    let gate = common::tack(&[
        "gate",
        dir.path().join("traces").join(run_id).to_str().unwrap(),
        "--variants",
        "sim-full,sim-stdout",
        "--quarantine",
        list.to_str().unwrap(),
        "--max-drop",
        "0.99",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&gate.stderr).to_string();
    assert!(
        stderr.contains("lists 1 task neither run has (a typo?): nosuchtask"),
        "{stderr}"
    );
    let typo_only = dir.path().join("typo.txt");
    std::fs::write(&typo_only, "nosuchtask\n").unwrap();
    let said = common::tack(&[
        "gate",
        dir.path().join("traces").join(run_id).to_str().unwrap(),
        "--variants",
        "sim-full,sim-stdout",
        "--quarantine",
        typo_only.to_str().unwrap(),
        "--max-drop",
        "99%",
    ]);
    let said = String::from_utf8_lossy(&said.stdout).to_string();
    assert!(
        said.contains("left out (")
            && said.contains("): the 1 name it lists is a task of neither run"),
        "{said}"
    );
    let gate = common::stdout_json(&gate);
    let unpaired = gate["comparison"]["unpaired"].as_array().unwrap();
    for task in &flaky {
        let left = unpaired.iter().find(|u| u["task"] == *task).unwrap();
        assert!(
            left["reason"]
                .as_str()
                .unwrap()
                .starts_with("quarantined by"),
            "{left}"
        );
    }
    let missing = get(&viewer.base, "/compare?a=nope&b=x%2Fy", Some(&cookie));
    assert_eq!(missing.status, 400);
    // The form's own RUN/VARIANT (minijinja escapes the `/`).
    assert!(
        missing.body.contains("RUN&#x2f;VARIANT"),
        "{}",
        missing.body
    );
    // One side only, and no run's: the picker says so.
    let picker = get(&viewer.base, "/compare?a=garbage", Some(&cookie));
    assert_eq!(picker.status, 200);
    assert!(
        picker
            .body
            .contains("No run here has the variant <code>garbage</code>"),
        "{}",
        picker.body
    );

    // A copy of the run whose trials table is cut short says so on the
    // runs page, rather than looking like a run with no trials.
    let traces = dir.path().join("traces");
    let copy_id = "20000101-000000-demo-copy";
    let damaged = traces.join(copy_id);
    common::copy_dir(&traces.join(run_id), &damaged);
    let manifest = damaged.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace(run_id, copy_id)).unwrap();
    for part in std::fs::read_dir(damaged.join("trials")).unwrap() {
        let part = part.unwrap().path();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&part)
            .unwrap()
            .set_len(100)
            .unwrap();
    }
    let runs = page("/");
    assert_eq!(runs.matches("cannot be read: ").count(), 1, "{runs}");
    assert!(runs.contains("not a complete Parquet file"), "{runs}");
}

/// Every tag in `html` (escaped text holds no `<`): none is a script, no
/// attribute is an event handler, no URL runs script.
fn assert_inert(path: &str, html: &str) {
    for tag in html
        .split('<')
        .skip(1)
        .map(|rest| rest.split('>').next().unwrap())
    {
        let tag = tag.to_ascii_lowercase();
        assert!(!tag.starts_with("script"), "{path}: a script tag: <{tag}>");
        // Attribute values are quoted, their quotes escaped: what is left
        // outside quotes is names.
        let outside: String = tag.split('"').step_by(2).collect();
        assert!(
            !outside
                .split_whitespace()
                .any(|word| word.starts_with("on") && word.contains('=')),
            "{path}: an event handler: <{tag}>"
        );
        assert!(
            !tag.contains("=\"javascript:"),
            "{path}: a script URL: <{tag}>"
        );
    }
}

#[test]
fn markup_from_a_trace_is_shown_as_text_on_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let suite = hostile_suite(dir.path());
    let run = common::run_suite(&suite, dir.path(), &[], &[]);
    let run_id = run["run"]["run_id"].as_str().unwrap();
    let viewer = Viewer::start(&dir.path().join("traces"), 0);
    let cookie = viewer.cookie();
    let mut pages = vec![
        "/".to_string(),
        "/trials".to_string(),
        "/trials?q=%3Cscript%3E".to_string(),
        "/compare".to_string(),
        format!("/compare?a={run_id}%2Foracle&b={run_id}%2Fsim"),
        "/tasks".to_string(),
        "/task?name=x-task".to_string(),
        // The error page echoes what it was asked for.
        "/trials?sort=%3Cscript%3Ealert(5)%3C%2Fscript%3E".to_string(),
        "/%3Cscript%3Ealert(6)%3C%2Fscript%3E".to_string(),
    ];
    let trials = get(&viewer.base, "/trials", Some(&cookie)).body;
    let searched = get(&viewer.base, "/trials?q=%3Cscript%3E", Some(&cookie)).body;
    assert!(
        searched.contains("id=\"total\">2<"),
        "both checks printed it: {searched}"
    );
    // The instruction is in no tool call or output: found in the messages.
    let instructed = get(&viewer.base, "/trials?q=Fix+value.txt.", Some(&cookie)).body;
    assert!(instructed.contains("id=\"total\">2<"), "{instructed}");
    pages.extend(links(&trials, "/trial?"));
    let comparison = get(&viewer.base, &pages[4], Some(&cookie)).body;
    assert!(
        comparison.contains("Difference in success rate"),
        "{comparison}"
    );
    pages.extend(links(&comparison, "/compare/task?"));
    assert!(
        pages.len() >= 10,
        "two trials and a flipped task: {pages:?}"
    );
    let mut shown = Vec::new();
    for path in &pages {
        let answer = get(&viewer.base, path, Some(&cookie));
        assert_inert(path, &answer.body);
        assert_eq!(answer.header("content-security-policy"), Some(CSP));
        if answer
            .body
            .contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;")
        {
            shown.push(path.as_str());
        }
    }
    // The text is there, escaped: on both trials' pages and the side by side.
    assert!(
        shown.len() >= 3,
        "the hostile text is shown as text on {shown:?}"
    );
}

/// What `tack view` cannot show or listen on is refused up front (exit 2),
/// the argument named: a file given as a traces directory, a host that
/// does not resolve.
#[test]
fn a_file_or_an_unknown_host_is_refused_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, "not runs").unwrap();
    let file_arg = file.to_str().unwrap();
    for (args, says) in [
        (
            vec!["view", file_arg],
            "afile is a file; tack view shows directories of runs",
        ),
        (
            vec!["view", "--host", "nosuch.invalid"],
            "--host nosuch.invalid: cannot resolve it",
        ),
    ] {
        let output = common::tack(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
