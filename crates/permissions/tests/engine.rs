//! The engine's contract: last match wins within a part, the strictest
//! verdict wins across parts, what a decision names, tool calls, and the
//! errors of a bad rules file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tack_permissions::{PermissionEngine, Rules, Verdict};
use tack_protocol::ToolAccess;

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
fn tool_calls_are_judged_by_what_they_declare() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let verdict = |tool: &str, access: &[ToolAccess]| engine.judge_tool_call(tool, access).verdict;
    let read = |p: &str| ToolAccess::Read(p.into());
    let write = |p: &str| ToolAccess::Write(p.into());
    let execute = |s: &str| ToolAccess::Execute(s.into());
    assert_eq!(verdict("read_file", &[read("src/main.rs")]), Verdict::Allow);
    assert_eq!(verdict("read_file", &[read("/etc/hosts")]), Verdict::Allow);
    assert_eq!(verdict("write_file", &[write("src/main.rs")]), Verdict::Ask);
    assert_eq!(
        verdict("str_replace", &[write("../elsewhere.rs")]),
        Verdict::Deny
    );
    assert_eq!(verdict("grep", &[read(".")]), Verdict::Allow);
    assert_eq!(verdict("bash", &[execute("ls -la")]), Verdict::Allow);
    assert_eq!(verdict("bash", &[execute("curl x")]), Verdict::Deny);
    // The engine knows no tool by name: any tool is judged by what it
    // declares, and a tool that declares nothing gets the fallback.
    assert_eq!(
        verdict("mcp_fetch_notes", &[read("notes.md")]),
        Verdict::Allow
    );
    assert_eq!(verdict("subagent", &[execute("git push")]), Verdict::Deny);
    let nothing = engine.judge_tool_call("web_search", &[]);
    assert_eq!(
        (
            nothing.verdict,
            nothing.rule.as_str(),
            nothing.part.as_str()
        ),
        (Verdict::Ask, "default profile: fallback", "web_search")
    );
    // …unless a tool rule names it: the agent's own plan needs no approval.
    assert_eq!(verdict("write_todos", &[]), Verdict::Allow);
    // Several declarations: the strictest wins.
    assert_eq!(
        verdict("patch", &[read("a.txt"), write("a.txt"), write("/etc/x")]),
        Verdict::Deny
    );
}

#[test]
fn what_a_tool_decision_is_about() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let edit = engine.judge_tool_call("str_replace", &[ToolAccess::Write("a.py".into())]);
    assert_eq!(edit.part, "write a.py (str_replace)");
    assert_eq!(edit.asking, ["write a.py (str_replace)"]);
    // One script: the fallback for an empty one is about the script.
    let empty = engine.judge_tool_call("bash", &[ToolAccess::Execute("  ".into())]);
    assert_eq!((empty.verdict, empty.part.as_str()), (Verdict::Ask, ""));
    let two = engine.judge_tool_call(
        "batch",
        &[
            ToolAccess::Execute(String::new()),
            ToolAccess::Execute(String::new()),
        ],
    );
    assert_eq!(two.part, "batch");
}

#[test]
fn every_asking_part_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let both = engine.judge_command("python3 -m unittest && git commit -am x | tee log.txt");
    assert_eq!(both.verdict, Verdict::Ask);
    assert_eq!(both.part, "python3 -m unittest");
    assert_eq!(
        both.asking,
        [
            "python3 -m unittest",
            "git commit -am x",
            "write log.txt (tee log.txt)"
        ]
    );
    // Allowed parts are not listed; a denied call still lists what asked.
    let denied = engine.judge_command("ls; python3 -m unittest; git push");
    assert_eq!(denied.verdict, Verdict::Deny);
    assert_eq!(denied.asking, ["python3 -m unittest"]);
    assert!(engine.judge_command("ls -la").asking.is_empty());
    // The same part twice is listed once.
    assert_eq!(engine.judge_command("make; make").asking, ["make"]);
    // With no part at all, the fallback is about the whole call.
    assert_eq!(engine.judge_command("").asking, [""]);
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

#[test]
fn a_function_cannot_pass_for_the_command_it_shadows() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    let bomb = engine.judge_command(":(){ :|:& };:");
    assert_eq!(
        (bomb.verdict, bomb.rule.as_str(), bomb.part.as_str()),
        (Verdict::Ask, "function", "function :(){ :|:& }")
    );
    assert!(
        bomb.reason.contains("shell function `:`"),
        "{}",
        bomb.reason
    );
    // The definition and the call are both parts to approve.
    assert_eq!(bomb.asking, ["function :(){ :|:& }", ":"]);
    let ls = engine.judge_command("ls() { echo hi; }; ls -la");
    assert_eq!(ls.asking, ["function ls() { echo hi; }", "ls -la"]);
    // A call through a path or quotes still finds the function.
    let quoted = engine.judge_command("/bin/ls() { :; }\n'/bin/ls'");
    assert_eq!(quoted.asking.len(), 2, "{quoted:?}");
    // What the body runs is still judged: a deny inside wins.
    assert_eq!(
        engine.judge_command("f() { git push; }; f").verdict,
        Verdict::Deny
    );
    // Defined in an eval, called outside.
    assert_eq!(
        engine.judge_command("eval 'ls() { :; }'; ls").asking,
        ["function ls() { :; }", "ls"]
    );
}

#[test]
fn builtins_that_redefine_command_names_ask() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), dir.path());
    for command in [
        "alias ls='rm -rf .'",
        "shopt -s expand_aliases",
        "enable -n echo",
        "enable -f ./evil.so ls",
        "hash -p ./evil ls",
        "set -k; git diff GIT_EXTERNAL_DIFF=./x",
        "BASH_CMDS[ls]=./evil; ls",
        "BASH_ALIASES[ls]='rm x'",
        "builtin alias ls=rm",
    ] {
        let decision = engine.judge_command(command);
        assert_eq!(decision.verdict, Verdict::Ask, "{command}: {decision:?}");
        assert!(
            ["redefinition", "environment", "default profile: fallback"]
                .contains(&decision.rule.as_str()),
            "{command}: {decision:?}"
        );
    }
    for command in [
        "alias",
        "alias ls",
        "unalias -a",
        "hash -r",
        "set -e",
        "enable -a",
    ] {
        assert_ne!(
            engine.judge_command(command).rule,
            "redefinition",
            "{command}"
        );
    }
    let alias = engine.judge_command("alias ls='rm -rf .'");
    assert_eq!(
        (alias.rule.as_str(), alias.part.as_str()),
        ("redefinition", "alias ls=rm -rf .")
    );
}

#[test]
fn mcp_annotations_decide_unless_a_tool_rule_does() {
    use tack_protocol::ToolHint;
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"
fallback = "deny"

[[rules]]
action = "allow"
tool = "fs__write_file"
"#;
    let engine = engine(rules, dir.path());
    let read_only =
        engine.judge_tool_call("fs__read_file", &[ToolAccess::Hinted(ToolHint::ReadOnly)]);
    assert_eq!(read_only.verdict, Verdict::Allow);
    assert_eq!(read_only.rule, "annotation readOnlyHint");
    let destructive = engine.judge_tool_call(
        "fs__move_file",
        &[ToolAccess::Hinted(ToolHint::Destructive)],
    );
    assert_eq!(destructive.verdict, Verdict::Ask);
    assert_eq!(destructive.rule, "annotation destructiveHint");
    assert_eq!(destructive.asking, vec!["fs__move_file".to_string()]);
    // A rule about the tool overrides what its server says of it.
    let ruled = engine.judge_tool_call(
        "fs__write_file",
        &[ToolAccess::Hinted(ToolHint::Destructive)],
    );
    assert_eq!(ruled.verdict, Verdict::Allow);
    assert!(ruled.rule.starts_with("rules[0]"), "{}", ruled.rule);
    // Additive tools get no say from their hints: the fallback decides.
    let additive = engine.judge_tool_call(
        "fs__create_directory",
        &[ToolAccess::Hinted(ToolHint::Additive)],
    );
    assert_eq!(additive.verdict, Verdict::Deny);
}
