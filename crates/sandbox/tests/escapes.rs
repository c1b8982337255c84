//! The escape suite: each attempt runs confined (`strict`, and `strict`
//! with a placed directory, so in a root of its own) and must be blocked,
//! then runs with `off` and must get through — so a pass proves
//! the sandbox, not a broken setup. Exceptions say why in `OffExpect`:
//! some protections apply to every profile (environment scrub, output cap,
//! timeout, process-group kill), and some attempts must never run
//! unconfined (a real fork bomb, `kill -9 -1` as root).
//!
//! One #[test] runs them all in order and prints a table (`--nocapture`).
//! Every attempt gets a fresh workspace; files an `off` run leaves outside
//! it (in /etc, $HOME, /tmp, /dev/shm) have unique names and are removed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

#[path = "escapes/attempts.rs"]
mod escape_attempts;
#[path = "escapes/fixtures.rs"]
mod fixtures;

use std::path::Path;
use std::time::Duration;

use escape_attempts::{Attempt, OffExpect, attempts};
use fixtures::{Env, Fixtures};
use tack_sandbox::{CommandOutput, CommandSpec, Confinement, SandboxProfile, TestGate, run};

const SECRET_KEY: &str = "sk-tack-escape-test-0123456789";

async fn run_attempt(
    attempt: &Attempt,
    env: &Env,
    fixtures: &Fixtures,
    profile: SandboxProfile,
    placed: bool,
) -> CommandOutput {
    let mut confinement = Confinement::for_profile(profile, &env.ws).hiding([env.hidden.clone()]);
    // A root of the command's own (see `Confinement::placing`) must stop
    // every attempt just as well.
    let place = tempfile::tempdir().unwrap();
    if placed {
        confinement = confinement.placing(place.path(), Path::new("/tack-escape-placed"), true);
    }
    if let Some(processes) = attempt.processes {
        confinement.limits.processes = processes;
    }
    let script = (attempt.script)(env, fixtures);
    let spec = CommandSpec {
        script: &script,
        cwd: &env.ws,
        env: &[],
        timeout: Duration::from_secs(attempt.timeout_secs),
        output_limit: 64 * 1024,
        confinement: &confinement,
    };
    let out = run(&spec).await.unwrap();
    if attempt.settle_ms > 0 {
        tokio::time::sleep(Duration::from_millis(attempt.settle_ms)).await;
    }
    out
}

fn missing_tool(attempt: &Attempt) -> Option<&'static str> {
    attempt
        .needs
        .iter()
        .copied()
        .find(|tool| which(tool).is_none())
}

fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
    })
}

struct Row {
    name: &'static str,
    strict: String,
    off: String,
    by: &'static str,
    said: String,
}

async fn check(attempt: &Attempt, fixtures: &Fixtures, failures: &mut Vec<String>) -> Row {
    let mut row = Row {
        name: attempt.name,
        strict: String::new(),
        off: String::new(),
        by: attempt.blocked_by,
        said: String::new(),
    };
    if let Some(tool) = missing_tool(attempt) {
        row.strict = format!("skipped: no {tool}");
        return row;
    }
    if let Some(why) = attempt.skipped(fixtures) {
        row.strict = format!("skipped: {why}");
        return row;
    }
    let env = Env::new(fixtures);
    let out = run_attempt(attempt, &env, fixtures, SandboxProfile::Strict, false).await;
    let escaped = (attempt.escaped)(&env, fixtures, &out);
    row.strict = if escaped {
        "ESCAPED".into()
    } else {
        "blocked".into()
    };
    row.said = evidence(&out);
    if escaped {
        failures.push(format!("{} escaped strict: {out:?}", attempt.name));
    }
    attempt.cleanup(&env, fixtures);
    drop(env);
    let env = Env::new(fixtures);
    let out = run_attempt(attempt, &env, fixtures, SandboxProfile::Strict, true).await;
    if (attempt.escaped)(&env, fixtures, &out) {
        row.strict = "ESCAPED with a placement".into();
        failures.push(format!(
            "{} escaped strict with a placement: {out:?}",
            attempt.name
        ));
    }
    attempt.cleanup(&env, fixtures);
    drop(env);
    row.off = match &attempt.off {
        OffExpect::NotRun(why) => format!("not run: {why}"),
        expect => {
            let env = Env::new(fixtures);
            let out = run_attempt(attempt, &env, fixtures, SandboxProfile::Off, false).await;
            let escaped = (attempt.escaped)(&env, fixtures, &out);
            attempt.cleanup(&env, fixtures);
            match (expect, escaped) {
                (OffExpect::Escapes, true) => "gets through".into(),
                (OffExpect::AlsoBlocked(why), false) => format!("blocked too: {why}"),
                (OffExpect::Escapes, false) => {
                    failures.push(format!(
                        "{} did not get through `off`: {out:?}",
                        attempt.name
                    ));
                    "SETUP BROKEN".into()
                }
                _ => {
                    failures.push(format!("{} got through `off`: {out:?}", attempt.name));
                    "ESCAPED".into()
                }
            }
        }
    };
    row
}

#[test]
fn every_escape_attempt_is_blocked_by_strict_and_works_unconfined() {
    // Set before any thread starts: set_var is unsafe with concurrent readers.
    #[allow(unsafe_code)]
    // SAFETY: no other thread exists yet in this test binary's only test.
    unsafe {
        std::env::set_var("TACK_ESCAPE_TEST_API_KEY", SECRET_KEY);
    }
    // Without strict this test can only skip, which CI
    // (TACK_REQUIRE_SANDBOX=1) turns into a failure.
    match tack_sandbox::test_gate(SandboxProfile::Strict) {
        TestGate::Run => {}
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            return;
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let fixtures = Fixtures::start(SECRET_KEY);
        let all = attempts();
        assert!(all.len() >= 40, "only {} attempts", all.len());
        let mut failures = Vec::new();
        let mut rows = Vec::new();
        for attempt in &all {
            rows.push(check(attempt, &fixtures, &mut failures).await);
        }
        print_table(&rows);
        let blocked = rows.iter().filter(|r| r.strict == "blocked").count();
        println!(
            "{blocked} of {} attempts run and blocked under strict",
            rows.len()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
        assert!(blocked >= 40, "only {blocked} attempts could run");
        assert!(
            fixtures.canary_alive(),
            "the canary process outside was killed"
        );
    });
}

/// What the kernel said to the strict run: its first denial, or the first
/// line of stderr, or how it ended.
fn evidence(out: &CommandOutput) -> String {
    let line = out
        .denials
        .first()
        .cloned()
        .or_else(|| out.stderr.lines().next().map(str::to_string))
        .unwrap_or_else(|| format!("exit {:?}, timed out {}", out.exit_code, out.timed_out));
    line.chars().take(90).collect()
}

fn print_table(rows: &[Row]) {
    for row in rows {
        let off: String = row.off.chars().take(60).collect();
        println!(
            "{}\n    strict: {} ({})\n    off:    {off}\n    by:     {}",
            row.name, row.strict, row.said, row.by
        );
    }
}
