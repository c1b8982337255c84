//! `tack permissions check` end to end: the whole permissions corpus through
//! the real binary (exit codes and JSON), the text output of a sample, words
//! after `--` as an argv, and usage errors; and the engine's asking parts
//! through the rules approver, as the harness wires them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn tack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .output()
        .unwrap()
}

fn check(workspace: &Path, extra: &[&str], command: &str) -> Output {
    let mut args = vec![
        "permissions",
        "check",
        "--workspace",
        workspace.to_str().unwrap(),
    ];
    args.extend(extra);
    args.extend(["--", command]);
    tack(&args)
}

fn expected_code(verdict: &str) -> i32 {
    match verdict {
        "allow" => 0,
        "ask" => 10,
        "deny" => 11,
        other => panic!("unknown verdict {other}"),
    }
}

/// Every case of the corpus.
fn corpus() -> Vec<(String, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../permissions/tests/corpus.toml");
    let corpus: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = corpus["case"].as_array().unwrap();
    cases
        .iter()
        .map(|case| {
            (
                case["command"].as_str().unwrap().to_string(),
                case["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_whole_corpus_through_the_binary() {
    let workspace = tempfile::tempdir().unwrap();
    let cases = corpus();
    assert!(cases.len() >= 150, "corpus of {}", cases.len());
    for verdict in ["allow", "ask", "deny"] {
        assert!(cases.iter().any(|(_, v)| v == verdict), "no {verdict} case");
    }
    for (i, (command, verdict)) in cases.iter().enumerate() {
        // Text output for a sample; exit code and JSON for every case.
        if i % 14 == 0 {
            let text = check(workspace.path(), &[], command);
            assert_eq!(
                text.status.code(),
                Some(expected_code(verdict)),
                "{command:?}: {}",
                String::from_utf8_lossy(&text.stdout)
            );
            let first = String::from_utf8(text.stdout).unwrap();
            assert!(first.starts_with(verdict.as_str()), "{command:?}: {first}");
        }

        let json = check(workspace.path(), &["--json"], command);
        assert_eq!(
            json.status.code(),
            Some(expected_code(verdict)),
            "{command:?}"
        );
        let decision: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(
            decision["verdict"],
            verdict.as_str(),
            "{command:?}: {decision}"
        );
        for field in ["rule", "part", "reason"] {
            assert!(
                decision[field].is_string(),
                "{command:?}: {field} missing in {decision}"
            );
        }
        let asking = decision["asking"].as_array().unwrap();
        assert_eq!(
            verdict == "ask",
            asking.contains(&decision["part"]),
            "{command:?}: an ask lists its part among the asking ones: {decision}"
        );
    }
}

#[test]
fn text_output_names_the_rule_and_the_part() {
    let workspace = tempfile::tempdir().unwrap();
    let output = check(workspace.path(), &[], "ls && git -C . push origin");
    assert_eq!(output.status.code(), Some(11));
    let text = String::from_utf8(output.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("deny  git push origin  — default profile: rules["),
        "{first}"
    );
    assert!(text.contains("pushing is for humans"), "{text}");
}

#[test]
fn a_rules_file_replaces_the_default_profile() {
    let workspace = tempfile::tempdir().unwrap();
    let rules = workspace.path().join("rules.toml");
    std::fs::write(
        &rules,
        "fallback = \"deny\"\n[[rules]]\naction = \"allow\"\ncommand = \"curl *\"\n",
    )
    .unwrap();
    let rules = rules.to_str().unwrap();
    assert_eq!(
        check(workspace.path(), &["--rules", rules], "curl x")
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        check(workspace.path(), &["--rules", rules], "ls")
            .status
            .code(),
        Some(11)
    );
}

#[test]
fn usage_errors_exit_2_and_say_what_is_wrong() {
    let workspace = tempfile::tempdir().unwrap();
    let rules = workspace.path().join("bad.toml");
    std::fs::write(&rules, "[[rules]]\naction = \"allow\"\ncommand = \"ls\"\n[[rules]]\naction = \"perhaps\"\ncommand = \"x\"\n").unwrap();
    let output = check(
        workspace.path(),
        &["--rules", rules.to_str().unwrap()],
        "ls",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("bad.toml: rules[1].action:"), "{stderr}");

    let missing_command = tack(&["permissions", "check"]);
    assert_eq!(missing_command.status.code(), Some(2));
    let no_workspace = check(&workspace.path().join("absent"), &[], "ls");
    assert_eq!(no_workspace.status.code(), Some(2));
}

#[test]
fn the_default_profile_can_be_printed_and_loaded_back() {
    let workspace = tempfile::tempdir().unwrap();
    let output = tack(&["permissions", "profile"]);
    assert!(output.status.success());
    let copy = workspace.path().join("copy.toml");
    std::fs::write(&copy, &output.stdout).unwrap();
    let json = check(
        workspace.path(),
        &["--rules", copy.to_str().unwrap(), "--json"],
        "sudo ls",
    );
    assert_eq!(json.status.code(), Some(11));
    let decision: Value = serde_json::from_slice(&json.stdout).unwrap();
    // Loaded from a file, the labels no longer say "default profile".
    assert!(
        decision["rule"].as_str().unwrap().starts_with("rules["),
        "{decision}"
    );
}

/// The argv of the words after `--`, not the words joined with spaces.
fn check_words(workspace: &Path, words: &[&str]) -> Output {
    let mut args = vec![
        "permissions",
        "check",
        "--workspace",
        workspace.to_str().unwrap(),
        "--json",
        "--",
    ];
    args.extend(words);
    tack(&args)
}

#[test]
fn several_words_are_a_program_and_its_arguments() {
    let workspace = tempfile::tempdir().unwrap();
    // Joined with spaces this was `echo a; curl x`: denied.
    let echo = check_words(workspace.path(), &["echo", "a; curl x"]);
    assert_eq!(echo.status.code(), Some(0), "{echo:?}");
    // The script bash gets is one word, judged as a script.
    let bash = check_words(workspace.path(), &["bash", "-c", "ls; curl example.com"]);
    assert_eq!(bash.status.code(), Some(11), "{bash:?}");
    let decision: Value = serde_json::from_slice(&bash.stdout).unwrap();
    assert_eq!(decision["part"], "curl example.com");
    let quoted = check_words(workspace.path(), &["bash", "-c", "echo \"a b\" > out"]);
    let decision: Value = serde_json::from_slice(&quoted.stdout).unwrap();
    assert_eq!(decision["part"], "write out (redirect)", "{decision}");
    // One word is still a script.
    let script = check_words(workspace.path(), &["ls; curl x"]);
    assert_eq!(script.status.code(), Some(11));
}

#[test]
fn a_fork_bomb_is_not_allowed() {
    let workspace = tempfile::tempdir().unwrap();
    let output = check(workspace.path(), &[], ":(){ :|:& };:");
    assert_eq!(output.status.code(), Some(10), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("ask   function :(){ :|:& }"), "{text}");
    assert!(text.contains("parts that ask:"), "{text}");
}

/// The rules approver must be satisfied with every part that asks: an
/// approve rule for the tests does not approve a push chained to them.
#[tokio::test]
async fn an_approve_rule_covers_only_the_parts_it_matches() {
    use tack_agent::{ApprovalRequest, Approver, RulesApprover};
    use tack_permissions::{PermissionEngine, Rules, Verdict};

    // Pushing asks here; the default profile denies it, and a denied call
    // never reaches the approver.
    let rules = Rules::from_toml(
        "[[rules]]\naction = \"allow\"\ncommand = \"tail *\"\n\
         [[rules]]\naction = \"ask\"\ncommand = [\"python3 *\", \"git *\"]\n",
        "rules.toml",
    )
    .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(rules, workspace.path());
    let approver = &RulesApprover::new(&["python3 -m unittest*".to_string()]).unwrap();
    let approves = |command: &str| {
        let decision = engine.judge_command(command);
        assert_eq!(decision.verdict, Verdict::Ask, "{command}: {decision:?}");
        let request = ApprovalRequest {
            tool: "bash".to_string(),
            arguments: String::new(),
            command: Some(command.to_string()),
            rule: decision.rule,
            part: decision.part,
            parts: decision.asking,
        };
        async move { approver.decide(&request).await }
    };
    assert!(approves("python3 -m unittest -q").await.approved);
    assert!(
        approves("python3 -m unittest 2>&1 | tail -3")
            .await
            .approved
    );
    let chained = approves("python3 -m unittest && git push").await;
    assert!(!chained.approved);
    assert_eq!(
        chained.reason.as_deref(),
        Some("no approve rule matches `git push`")
    );
    assert!(
        !approves("git push --force; python3 -m unittest")
            .await
            .approved
    );
}
