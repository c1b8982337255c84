//! The engine's contract: last match wins within a part, the strictest
//! verdict wins across parts, what a decision names, tool calls, and the
//! errors of a bad rules file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::json;
use tack_permissions::{PermissionEngine, Rules, Verdict};

fn engine(rules: &str, workspace: &Path) -> PermissionEngine {
    PermissionEngine::new(Rules::from_toml(rules, "test.toml").unwrap(), workspace)
}

const LAYERED: &str = r#"
[[rules]]
action = "allow"
command = ["ls *", "cat *", "git *"]

[[rules]]
action = "ask"
command = "cat *.secret"
reason = "secrets need a look"

[[rules]]
action = "deny"
command = "git push *"
reason = "pushing is for humans"

[[rules]]
action = "allow"
command = "git push --dry-run *"
"#;

#[test]
fn within_a_part_the_last_matching_rule_wins() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(LAYERED, dir.path());
    assert_eq!(engine.judge_command("git status").verdict, Verdict::Allow);
    let push = engine.judge_command("git push origin");
    assert_eq!(push.verdict, Verdict::Deny);
    assert_eq!(push.rule, r#"rules[2] (deny command "git push *")"#);
    assert_eq!(push.part, "git push origin");
    assert_eq!(push.reason, "pushing is for humans");
    // A later, narrower allow beats the earlier deny.
    assert_eq!(
        engine.judge_command("git push --dry-run origin").verdict,
        Verdict::Allow
    );
    let cat = engine.judge_command("cat key.secret");
    assert_eq!(
        (cat.verdict, cat.reason.as_str()),
        (Verdict::Ask, "secrets need a look")
    );
}

#[test]
fn across_parts_the_strictest_verdict_wins() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(LAYERED, dir.path());
    let ask = engine.judge_command("ls | cat a.secret && ls");
    assert_eq!(
        (ask.verdict, ask.part.as_str()),
        (Verdict::Ask, "cat a.secret")
    );
    let deny = engine.judge_command("cat a.secret; ls $(git push); ls");
    assert_eq!(
        (deny.verdict, deny.part.as_str()),
        (Verdict::Deny, "git push")
    );
    // Order does not matter, only strictness.
    assert_eq!(
        engine.judge_command("git push; cat a.secret").verdict,
        Verdict::Deny
    );
    // A part no rule matches gets the fallback (ask by default).
    let unknown = engine.judge_command("ls; make");
    assert_eq!(
        (
            unknown.verdict,
            unknown.rule.as_str(),
            unknown.part.as_str()
        ),
        (Verdict::Ask, "fallback", "make")
    );
}

#[test]
fn the_fallback_is_configurable_and_unparsed_text_asks() {
    let dir = tempfile::tempdir().unwrap();
    let strict = engine(
        "fallback = \"deny\"\n[[rules]]\naction = \"allow\"\ncommand = \"ls *\"\n",
        dir.path(),
    );
    assert_eq!(strict.judge_command("make").verdict, Verdict::Deny);
    assert_eq!(strict.judge_command("ls -l").verdict, Verdict::Allow);
    let open = engine("fallback = \"allow\"\n", dir.path());
    let broken = open.judge_command("echo 'unterminated");
    assert_eq!(
        (broken.verdict, broken.rule.as_str()),
        (Verdict::Ask, "unparsed")
    );
    let dynamic = open.judge_command("$CMD --flag");
    assert_eq!(
        (dynamic.verdict, dynamic.rule.as_str()),
        (Verdict::Ask, "dynamic program")
    );
}

#[test]
fn path_rules_see_redirections_and_file_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"
fallback = "allow"
[[rules]]
action = "ask"
path = "**/.env"
access = "write"
[[rules]]
action = "deny"
path = "/**"
access = "write"
"#;
    let engine = engine(rules, dir.path());
    assert_eq!(engine.judge_command("cat .env").verdict, Verdict::Allow);
    let write = engine.judge_command("echo A=1 >> config/.env");
    assert_eq!(
        (write.verdict, write.part.as_str()),
        (Verdict::Ask, "write config/.env (redirect)")
    );
    assert_eq!(
        engine.judge_command("cp template .env").verdict,
        Verdict::Ask
    );
    let outside = engine.judge_command("cp template ../.env");
    assert_eq!(outside.verdict, Verdict::Deny);
    assert_eq!(outside.rule, r#"rules[1] (deny write path "/**")"#);
    // An absolute path into the workspace is inside.
    let inside = dir.path().join("notes.txt");
    assert_eq!(
        engine
            .judge_command(&format!("echo x > {}", inside.display()))
            .verdict,
        Verdict::Allow
    );
}

#[test]
fn default_profile_labels_say_where_the_rule_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let decision = engine.judge_command("git -C . push");
    assert!(
        decision.rule.starts_with("default profile: rules["),
        "{}",
        decision.rule
    );
    assert_eq!(decision.part, "git push");
    assert_eq!(
        engine.judge_command("frobnicate").rule,
        "default profile: fallback"
    );
}

#[test]
fn tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let verdict = |tool: &str, args: serde_json::Value| engine.judge_tool_call(tool, &args).verdict;
    assert_eq!(
        verdict("read_file", json!({"path": "src/main.rs"})),
        Verdict::Allow
    );
    assert_eq!(
        verdict("read_file", json!({"path": "/etc/hosts"})),
        Verdict::Allow
    );
    assert_eq!(
        verdict("write_file", json!({"path": "src/main.rs", "content": ""})),
        Verdict::Ask
    );
    assert_eq!(
        verdict("str_replace", json!({"path": "../elsewhere.rs"})),
        Verdict::Deny
    );
    assert_eq!(verdict("list_files", json!({})), Verdict::Allow);
    assert_eq!(
        verdict("grep", json!({"pattern": "x", "path": "src"})),
        Verdict::Allow
    );
    assert_eq!(
        verdict("bash", json!({"command": "ls -la"})),
        Verdict::Allow
    );
    assert_eq!(verdict("bash", json!({"command": "curl x"})), Verdict::Deny);
    let missing = engine.judge_tool_call("bash", &json!({"cmd": "ls"}));
    assert_eq!(
        (missing.verdict, missing.rule.as_str()),
        (Verdict::Ask, "unparsed")
    );
    assert_eq!(verdict("read_file", json!({})), Verdict::Ask);
    assert_eq!(verdict("web_search", json!({"q": "x"})), Verdict::Ask);
}

#[test]
fn tool_rules_combine_with_what_the_call_does() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"
[[rules]]
action = "allow"
tool = ["read_file", "write_file", "web_*"]
[[rules]]
action = "ask"
tool = "write_file"
reason = "a human reviews every edit"
[[rules]]
action = "deny"
path = "/**"
access = "write"
[[rules]]
action = "allow"
command = "ls *"
"#;
    let engine = engine(rules, dir.path());
    let edit = engine.judge_tool_call("write_file", &json!({"path": "a.txt", "content": "x"}));
    assert_eq!(
        (edit.verdict, edit.rule.as_str(), edit.part.as_str()),
        (
            Verdict::Ask,
            r#"rules[1] (ask tool "write_file")"#,
            "write_file"
        )
    );
    // The strictest part still wins over the tool rule.
    assert_eq!(
        engine
            .judge_tool_call("write_file", &json!({"path": "/etc/x"}))
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        engine.judge_tool_call("web_fetch", &json!({})).verdict,
        Verdict::Allow
    );
    assert_eq!(
        engine
            .judge_tool_call("read_file", &json!({"path": "x"}))
            .verdict,
        Verdict::Allow
    );
    // With no tool rule, a bash call is judged by its command alone.
    assert_eq!(
        engine
            .judge_tool_call("bash", &json!({"command": "ls"}))
            .verdict,
        Verdict::Allow
    );
}

#[test]
fn rules_file_errors_name_the_file_the_rule_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, "[[rules]]\naction = \"allow\"\ncommand = \"ls\"\n\n[[rules]]\naction = \"deny\"\npath = \"/**\"\naccess = \"delete\"\n").unwrap();
    let error = Rules::load(&path).unwrap_err();
    assert_eq!(
        (error.index, error.field.as_deref()),
        (Some(1), Some("access"))
    );
    assert_eq!(
        error.to_string(),
        format!(
            "{}: rules[1].access: must be \"read\", \"write\" or \"any\"",
            path.display()
        )
    );
    let missing = Rules::load(&dir.path().join("nope.toml")).unwrap_err();
    assert!(
        missing.to_string().contains("nope.toml: cannot read"),
        "{missing}"
    );
    std::fs::write(&path, "[[rules]]\naction = \"allow\"\ncommand = \"ls\"\n").unwrap();
    assert_eq!(Rules::load(&path).unwrap().len(), 1);
}

#[test]
fn the_engine_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync + Clone + std::fmt::Debug>() {}
    shareable::<PermissionEngine>();
    shareable::<Rules>();
}

#[test]
fn decisions_serialize_with_lowercase_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let value = serde_json::to_value(engine.judge_command("sudo ls")).unwrap();
    assert_eq!(value["verdict"], "deny");
    assert_eq!(value["part"], "sudo ls");
    assert!(value["rule"].as_str().unwrap().contains("deny command"));
    assert!(Verdict::Allow < Verdict::Ask && Verdict::Ask < Verdict::Deny);
    assert_eq!(Verdict::Ask.as_str(), "ask");
}
