//! An external agent as a variant, end to end: a small agent written with
//! the official `openai` Python SDK (tests/fixtures/agents) runs beside a
//! native tack variant on the same two tasks, both against one loopback
//! model server. Its model calls reach the trace through the trial's
//! recording proxy, its process is a span, the sandbox lets it reach only
//! the proxy, `tack report` shows its trials and `tack compare` puts it
//! next to the native variant. The key is in no file tack wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::{Array, Int32Array, StringArray, UInt64Array};
use serde_json::Value;
use tack_testkit::{Dialect, MockServer, ServerOptions, ToolLoop};

const PLANTED_KEY: &str = "sk-test-EXTERNAL-agent-7315";

const TASK: &str = r#"
instruction = "file.txt says broken; make it say fixed."
[[checks]]
name = "fixed"
run = "grep -q fixed file.txt"
[solution]
[[solution.edits]]
path = "file.txt"
old = "broken"
new = "fixed"
"#;

fn suite(dir: &Path, base_url: &str, python: &str, profile: &str) -> PathBuf {
    let root = dir.join("suite");
    // `three` asks for more than the model does: both variants fail it.
    let unreachable = TASK.replace("grep -q fixed", "grep -q unreachable");
    for task in ["one", "two", "three"] {
        let fixture = root.join("tasks").join(task).join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        let text = if task == "three" { &unreachable } else { TASK };
        std::fs::write(root.join("tasks").join(task).join("task.toml"), text).unwrap();
        std::fs::write(fixture.join("file.txt"), format!("{task}: broken\n")).unwrap();
    }
    let agent = common::repo().join("crates/cli/tests/fixtures/agents/openai_agent.py");
    let port = base_url.rsplit(':').next().unwrap().trim_end_matches("/v1");
    let provider =
        format!("[variants.provider]\nbase_url = \"{base_url}\"\napi_key_env = \"TACK_E2E_KEY\"\n");
    let toml = format!(
        "[suite]\nname = \"external\"\n\n\
         [[variants]]\nname = \"native\"\nmodel = \"openai:gpt-4o-mini\"\n\
         [variants.harness]\ntools = [\"bash\"]\nsandbox = \"{profile}\"\n{provider}\n\
         [[variants]]\nname = \"sdk-agent\"\nmodel = \"openai:gpt-4o-mini\"\n\
         [variants.harness]\nsandbox = \"{profile}\"\nmax_wall_secs = 120\n{provider}\
         [variants.agent]\ncommand = 'echo \"the agent holds $OPENAI_API_KEY\"; \"{python}\" \"{}\"'\nsetup = 'test -n \"$TACK_INSTRUCTION\"'\n\
         env = {{ AGENT_STREAM = \"1\", DIRECT_PORT = \"{port}\" }}\n",
        agent.display()
    );
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    root
}

/// One span of the run: (trial, kind, name, input tokens, exit code, stdout).
type Span = (
    String,
    String,
    String,
    Option<u64>,
    Option<i32>,
    Option<String>,
);

fn spans(run_dir: &Path) -> Vec<Span> {
    let mut out = Vec::new();
    for batch in tack_trace::read_table(run_dir, "spans").unwrap() {
        let trial = common::column::<StringArray>(&batch, "trial_id");
        let kind = common::column::<StringArray>(&batch, "kind");
        let name = common::column::<StringArray>(&batch, "name");
        let input = common::column::<UInt64Array>(&batch, "gen_ai_usage_input_tokens");
        let exit = common::column::<Int32Array>(&batch, "exit_code");
        let stdout = common::column::<StringArray>(&batch, "stdout");
        for i in 0..batch.num_rows() {
            out.push((
                trial.value(i).to_string(),
                kind.value(i).to_string(),
                name.value(i).to_string(),
                (!input.is_null(i)).then(|| input.value(i)),
                (!exit.is_null(i)).then(|| exit.value(i)),
                (!stdout.is_null(i)).then(|| stdout.value(i).to_string()),
            ));
        }
    }
    out
}

#[test]
fn an_external_agent_runs_as_a_variant_beside_a_native_one() {
    let Some(python) = common::sdk_python() else {
        return;
    };
    let profile = common::sandbox_profile();
    let tool_loop = ToolLoop {
        steps: 1,
        tool: "bash".to_string(),
        argument: "sed -i s/broken/fixed/ file.txt".to_string(),
        final_text: "file.txt is fixed".to_string(),
        ..ToolLoop::default()
    };
    let options = ServerOptions {
        expected_key: PLANTED_KEY.to_string(),
        ..ServerOptions::default()
    };
    let server = MockServer::start_tool_loop(Dialect::OpenAi, tool_loop, options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path(), &server.base_url(), &python, profile);
    let (traces, reports) = (dir.path().join("traces"), dir.path().join("reports"));
    let json = common::run_suite(
        &suite,
        dir.path(),
        &["--jobs", "2"],
        &[("TACK_E2E_KEY", PLANTED_KEY)],
    );
    let trials = json["run"]["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 6, "{json}");
    for trial in trials {
        let expected = if trial["task"] == "three" {
            "verification_failed"
        } else {
            "passed"
        };
        assert_eq!(trial["outcome"], expected, "{trial}");
    }

    let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
    let spans = spans(&run_dir);
    for task in ["one", "two"] {
        let trial = format!("sdk-agent--{task}--0");
        let of_trial: Vec<&Span> = spans.iter().filter(|s| s.0 == trial).collect();
        let calls: Vec<&&Span> = of_trial.iter().filter(|s| s.1 == "model_call").collect();
        // The tool call, then the final answer: both through the proxy.
        assert_eq!(calls.len(), 2, "{of_trial:#?}");
        assert!(
            calls.iter().all(|c| c.2 == "gpt-4o-mini" && c.3 > Some(0)),
            "{calls:#?}"
        );
        let agent = of_trial
            .iter()
            .find(|s| s.2 == "agent")
            .expect("the agent's span");
        assert_eq!(agent.4, Some(0), "{agent:#?}");
        let stdout = agent.5.as_deref().unwrap_or_default();
        eprintln!(
            "{trial} under {profile}: {} model calls; the agent printed: {stdout}",
            calls.len()
        );
        assert!(stdout.contains("file.txt is fixed"), "{stdout}");
        // An agent that prints its environment prints the proxy's stand-in
        // for the key (the files below are searched for the real one).
        assert!(
            stdout.contains("the agent holds tack-stand-in-"),
            "{stdout}"
        );
        if profile == "strict" {
            assert!(
                stdout.contains("direct connection: refused"),
                "the agent reached the model server around the proxy: {stdout}"
            );
        }
        assert!(of_trial.iter().any(|s| s.1 == "check"), "{of_trial:#?}");
    }
    // The server saw the real key, put in place of the stand-in by the proxy.
    assert!(server.requests().iter().all(|r| r.auth_matches));

    // The report lists the external variant; compare sets it beside the
    // native one on the same tasks.
    let index = PathBuf::from(json["report"].as_str().expect("the run's report"));
    let report = std::fs::read_to_string(&index).unwrap();
    let compare = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "compare",
            run_dir.to_str().unwrap(),
            "--variants",
            "native,sdk-agent",
            "--json",
            "--no-report",
        ])
        .output()
        .unwrap();
    assert!(
        compare.status.success(),
        "{}",
        String::from_utf8_lossy(&compare.stderr)
    );
    let compared: Value = serde_json::from_slice(&compare.stdout).unwrap();
    let text = compared.to_string();
    assert!(
        text.contains("sdk-agent") && text.contains("native"),
        "{text}"
    );
    assert!(
        report.contains("sdk-agent"),
        "the report omits the external variant"
    );
    // `tack show` opens an external trial like any other.
    let show = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["show", run_dir.to_str().unwrap(), "sdk-agent--one--0"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.status.success(),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    assert!(
        shown.contains("gpt-4o-mini") && shown.contains("agent"),
        "{shown}"
    );

    let mut written = Vec::new();
    common::files_below(&traces, &mut written);
    common::files_below(&reports, &mut written);
    for file in written {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(
            !text.contains(PLANTED_KEY),
            "{} holds the API key",
            file.display()
        );
    }
}

#[test]
fn a_machine_that_cannot_narrow_the_network_refuses_external_agents_before_any_trial() {
    if common::sandbox_profile() != "strict" {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path(), "http://127.0.0.1:9/v1", "python3", "strict");
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["run", suite.to_str().unwrap(), "--traces"])
        .arg(dir.path().join("traces"))
        .env(tack_sandbox::DISABLE_ENV, "landlock_net")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sdk-agent"), "{stderr}");
    assert!(stderr.contains("recording proxy"), "{stderr}");
    assert!(
        !dir.path().join("traces").exists()
            || std::fs::read_dir(dir.path().join("traces"))
                .unwrap()
                .next()
                .is_none()
    );
}

/// mini-swe-agent from PyPI (optional: `.ci/run` installs it when PyPI has
/// it and sets `TACK_MINI_SWE_AGENT` to its `mini`), run as a variant
/// through the proxy against a loopback server scripted with its protocol:
/// a bash tool call that fixes the task, then its submit command.
#[test]
fn mini_swe_agent_runs_through_the_proxy() {
    let Some(mini) = std::env::var_os("TACK_MINI_SWE_AGENT").map(PathBuf::from) else {
        eprintln!(
            "skipped: TACK_MINI_SWE_AGENT is not set (.ci/run installs mini-swe-agent when it can)"
        );
        return;
    };
    let profile = common::sandbox_profile();
    let bash = |id: &str, command: &str| {
        tack_testkit::ScriptedResponse::tool_calls(vec![tack_testkit::ScriptedCall::new(
            id,
            "bash",
            serde_json::json!({ "command": command }).to_string(),
        )])
    };
    let script = vec![
        bash("call_fix", "sed -i s/broken/fixed/ file.txt"),
        bash("call_submit", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ];
    let options = ServerOptions {
        expected_key: PLANTED_KEY.to_string(),
        ..ServerOptions::default()
    };
    let server = MockServer::start_background(Dialect::OpenAi, script, options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("suite");
    let fixture = root.join("tasks/one/fixture");
    std::fs::create_dir_all(&fixture).unwrap();
    std::fs::write(root.join("tasks/one/task.toml"), TASK).unwrap();
    std::fs::write(fixture.join("file.txt"), "broken\n").unwrap();
    let toml = format!(
        "[suite]\nname = \"mini\"\n\n[[variants]]\nname = \"mini-swe-agent\"\nmodel = \"openai:gpt-4o-mini\"\n\
         [variants.harness]\nsandbox = \"{profile}\"\nmax_wall_secs = 300\n\
         [variants.provider]\nbase_url = \"{}\"\napi_key_env = \"TACK_E2E_KEY\"\n\
         [variants.agent]\ncommand = '\"{}\" --yolo --exit-immediately -m \"openai/$TACK_MODEL\" -t \"$TACK_INSTRUCTION\" -o \"$HOME/trajectory.json\"'\n\
         env = {{ MSWEA_CONFIGURED = \"true\", MSWEA_SILENT_STARTUP = \"1\", MSWEA_COST_TRACKING = \"ignore_errors\", LITELLM_LOCAL_MODEL_COST_MAP = \"True\" }}\n",
        server.base_url(),
        mini.display()
    );
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    let json = common::run_suite(&root, dir.path(), &[], &[("TACK_E2E_KEY", PLANTED_KEY)]);
    let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
    let spans = spans(&run_dir);
    let agent = spans
        .iter()
        .find(|s| s.2 == "agent")
        .expect("the agent's span");
    assert_eq!(
        json["run"]["trials"][0]["outcome"], "passed",
        "{json}\nthe agent printed: {:?}",
        agent.5
    );
    let calls = spans.iter().filter(|s| s.1 == "model_call").count();
    assert_eq!(calls, 2, "{spans:#?}");
    assert!(server.requests().iter().all(|r| r.auth_matches));
}
