//! Every case of `corpus.toml` through the engine with the default profile.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde::Deserialize;
use tack_permissions::{PermissionEngine, Rules, Verdict};
use tack_protocol::ToolAccess;

#[derive(Debug, Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    command: String,
    verdict: Verdict,
}

fn corpus() -> Vec<Case> {
    let text = include_str!("corpus.toml");
    toml::from_str::<Corpus>(text)
        .expect("corpus.toml parses")
        .case
}

#[test]
fn corpus_verdicts_match_the_default_profile() {
    let workspace = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), workspace.path());
    let cases = corpus();
    assert!(
        cases.len() >= 150,
        "the corpus has only {} cases",
        cases.len()
    );
    let mut wrong = Vec::new();
    for case in &cases {
        let decision = engine.judge_command(&case.command);
        if decision.verdict != case.verdict {
            wrong.push(format!(
                "{:?}: expected {}, got {} — part {:?}, {} ({})",
                case.command,
                case.verdict,
                decision.verdict,
                decision.part,
                decision.rule,
                decision.reason
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

/// The one mistake that matters most, checked on its own so that it can
/// never hide among other differences.
#[test]
fn no_denied_case_is_ever_allowed() {
    let workspace = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), workspace.path());
    for case in corpus().iter().filter(|c| c.verdict == Verdict::Deny) {
        let decision = engine.judge_command(&case.command);
        assert_ne!(
            decision.verdict,
            Verdict::Allow,
            "{:?} was allowed: {decision:?}",
            case.command
        );
    }
}

#[test]
fn corpus_covers_every_verdict() {
    let cases = corpus();
    for verdict in [Verdict::Allow, Verdict::Ask, Verdict::Deny] {
        let count = cases.iter().filter(|c| c.verdict == verdict).count();
        assert!(count >= 30, "only {count} {verdict} cases");
    }
}

/// A `bash` tool call declares its command as a script to execute; with no
/// `tool = …` rule in the profile, it gets the command's verdict, and the
/// decision is about the same part.
#[test]
fn a_tool_call_running_the_command_gets_the_same_decision() {
    let workspace = tempfile::tempdir().unwrap();
    let engine = PermissionEngine::new(Rules::default_profile(), workspace.path());
    for case in corpus() {
        let command = engine.judge_command(&case.command);
        let call = engine.judge_tool_call("bash", &[ToolAccess::Execute(case.command.clone())]);
        assert_eq!(call, command, "{:?}", case.command);
    }
}
