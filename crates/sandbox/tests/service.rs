//! Long-lived services with piped stdio: they talk line by line, stay inside
//! the workspace, and take everything they started with them when dropped
//! or killed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::Path;
use std::time::Duration;

use tack_sandbox::{
    Confinement, SandboxError, SandboxProfile, Service, ServiceSpec, TestGate, spawn_service,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;

/// Whether `strict` can be enforced here; otherwise skip, saying why,
/// unless `TACK_REQUIRE_SANDBOX=1` makes that a failure.
fn available() -> bool {
    match tack_sandbox::test_gate(SandboxProfile::Strict) {
        TestGate::Run => true,
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            false
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
}

fn bash(script: &str, cwd: &Path, env: &[(String, String)], confinement: &Confinement) -> Service {
    let args = ["-c".to_string(), script.to_string()];
    spawn_service(&ServiceSpec {
        program: "bash",
        args: &args,
        cwd,
        env,
        confinement,
    })
    .unwrap()
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the service said nothing in time")
        .unwrap()
}

#[tokio::test]
async fn a_service_answers_line_by_line_until_its_stdin_closes() {
    if !available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let env = [("GREETING".to_string(), "hi".to_string())];
    for confinement in [Confinement::strict(ws.path()), Confinement::off()] {
        let profile = confinement.profile;
        let mut service = bash(
            "while read -r line; do echo \"$GREETING $line\"; done; echo bye >&2",
            ws.path(),
            &env,
            &confinement,
        );
        assert_eq!(service.profile(), profile);
        assert!(service.id().is_some());
        let mut stdin = service.stdin().unwrap();
        assert!(service.stdin().is_none(), "taken once");
        let mut lines = BufReader::new(service.stdout().unwrap()).lines();
        let mut errors = BufReader::new(service.stderr().unwrap()).lines();
        for word in ["one", "two"] {
            stdin
                .write_all(format!("{word}\n").as_bytes())
                .await
                .unwrap();
            stdin.flush().await.unwrap();
            let answer = next_line(&mut lines).await;
            assert_eq!(answer.as_deref(), Some(format!("hi {word}").as_str()));
        }
        drop(stdin);
        assert_eq!(next_line(&mut lines).await, None, "{profile:?}");
        assert_eq!(errors.next_line().await.unwrap().as_deref(), Some("bye"));
        let status = service.wait().await.unwrap();
        assert!(status.success(), "{profile:?}: {status:?}");
    }
}

#[tokio::test]
async fn a_confined_service_writes_only_its_workspace() {
    if !available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let script = format!(
        "echo in > inside.txt && echo wrote-inside; \
         touch {out}/escaped 2>/dev/null && echo wrote-outside || echo refused-outside; \
         echo \"$TMPDIR\"; cat",
        out = outside.path().display()
    );
    let confinement = Confinement::workspace_write(ws.path());
    let mut service = bash(&script, ws.path(), &[], &confinement);
    let mut lines = BufReader::new(service.stdout().unwrap()).lines();
    assert_eq!(next_line(&mut lines).await.as_deref(), Some("wrote-inside"));
    assert_eq!(
        next_line(&mut lines).await.as_deref(),
        Some("refused-outside")
    );
    let tmp = next_line(&mut lines).await.unwrap();
    assert!(tmp.contains("tack-tmp-"), "{tmp}");
    assert!(Path::new(&tmp).is_dir(), "the private tmp lives with it");
    assert!(ws.path().join("inside.txt").exists());
    assert!(!outside.path().join("escaped").exists());
    let status = service.kill().await.unwrap();
    assert!(!status.success());
    assert!(
        !Path::new(&tmp).exists(),
        "the private tmp outlived the kill"
    );
    assert!(service.id().is_none());
}

/// Dropping a service kills what it started in the background; confined,
/// even a child that left the process group with `setsid`.
#[tokio::test]
async fn dropping_a_service_kills_everything_it_started() {
    if !available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    for confinement in [Confinement::strict(ws.path()), Confinement::off()] {
        let profile = confinement.profile.as_str();
        let marker = ws.path().join(format!("late-{profile}"));
        let detached = ws.path().join(format!("detached-{profile}"));
        // Unconfined, a setsid child escapes the group (and nothing else
        // holds it): only the confined service is asked to kill one.
        let (setsid, expected) = if confinement.is_confined() {
            let line = format!(
                "setsid sh -c 'echo detached; sleep 1; touch {}' & ",
                detached.display()
            );
            (line, vec!["background", "detached", "started"])
        } else {
            (String::new(), vec!["background", "started"])
        };
        let script = format!(
            "(echo background; sleep 1; touch {}) & {setsid}echo started; cat",
            marker.display()
        );
        let mut service = bash(&script, ws.path(), &[], &confinement);
        let mut lines = BufReader::new(service.stdout().unwrap()).lines();
        let mut seen = Vec::new();
        for _ in &expected {
            seen.push(next_line(&mut lines).await.unwrap());
        }
        seen.sort();
        assert_eq!(seen, expected, "{profile}: everything started");
        drop(service);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists(), "{profile}: a background child survived");
        assert!(!detached.exists(), "{profile}: a setsid child survived");
    }
}

#[tokio::test]
async fn a_missing_program_is_an_error_that_names_it() {
    if !available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    for confinement in [Confinement::strict(ws.path()), Confinement::off()] {
        let error = spawn_service(&ServiceSpec {
            program: "tack-no-such-server",
            args: &[],
            cwd: ws.path(),
            env: &[],
            confinement: &confinement,
        })
        .unwrap_err();
        assert!(
            matches!(&error, SandboxError::StartService { program, .. } if program == "tack-no-such-server"),
            "{error}"
        );
        assert!(error.to_string().contains("PATH"), "{error}");
    }
}
