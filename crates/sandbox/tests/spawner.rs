//! Confined commands started by the spawner process behave as those tack
//! forks itself: output, exit status, timeout, cancellation, setup errors;
//! and they really are the spawner's children, not this process's. If the
//! spawner dies, commands go on, forked from this process.
//!
//! `harness = false`: the spawner is forked first thing in `main`, while the
//! process has one thread.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // tests fail loudly by design

use std::path::Path;
use std::time::{Duration, Instant};

use tack_sandbox::{
    CommandOutput, CommandSpec, Confinement, SandboxProfile, TestGate, run, spawner,
};

fn main() {
    // SAFETY: no other thread runs yet.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(
            tack_sandbox::INIT_ENV,
            env!("CARGO_BIN_EXE_tack-sandbox-init"),
        );
    }
    let started = spawner::start().expect("the spawner starts in a one-thread process");
    assert!(started, "TACK_SANDBOX_SPAWNER=off is set: nothing to test");
    match tack_sandbox::test_gate(SandboxProfile::Strict) {
        TestGate::Run => {}
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            return;
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        macro_rules! test {
            ($name:ident) => {
                $name().await;
                eprintln!("test {} ... ok", stringify!($name));
            };
        }
        test!(runs_commands_as_its_children);
        test!(keeps_output_and_exit_status);
        test!(many_short_commands_at_once_each_report_their_end);
        test!(kills_the_group_on_timeout);
        test!(kills_the_group_when_cancelled);
        test!(reports_a_command_that_cannot_start);
        test!(places_directories);
        test!(a_sessions_init_is_the_spawners_child);
        // Last: it kills the spawner.
        test!(survives_the_spawner_dying);
    });
}

fn spec<'a>(script: &'a str, cwd: &'a Path, confinement: &'a Confinement) -> CommandSpec<'a> {
    CommandSpec {
        script,
        cwd,
        env: &[],
        timeout: Duration::from_secs(20),
        output_limit: 64 * 1024,
        confinement,
    }
}

async fn sh(script: &str, cwd: &Path) -> CommandOutput {
    let confinement = Confinement::strict(cwd);
    run(&spec(script, cwd, &confinement)).await.unwrap()
}

/// Process ids whose parent is `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let listed = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        children.extend(
            listed
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    children
}

async fn runs_commands_as_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner::pid().expect("the spawner runs");
    let before = children_of(std::process::id());
    let cwd = dir.path().to_path_buf();
    let running = tokio::spawn(async move { sh("sleep 1; echo done", &cwd).await });
    // Watch while the command runs (starting it may take a while on a
    // loaded machine): it sleeps a second, ample for 20 ms polls.
    let deadline = Instant::now() + Duration::from_secs(30);
    while children_of(spawner).is_empty() && !running.is_finished() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if children_of(spawner).is_empty() {
        // Seen once in CI: say whether the command failed to start or
        // came and went between two polls.
        let command = if running.is_finished() {
            format!("ended: {:?}", running.await)
        } else {
            "still starting after 30 s".to_string()
        };
        panic!("no command under the spawner; the command {command}");
    }
    assert_eq!(
        children_of(std::process::id()),
        before,
        "the command is tack's child"
    );
    let out = running.await.unwrap();
    assert_eq!(out.stdout, "done\n");
    assert_eq!(out.profile, SandboxProfile::Strict);
}

async fn keeps_output_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = sh(
        "echo out; echo err >&2; echo t > \"$TMPDIR/x\"; cat \"$TMPDIR/x\"; touch /etc/tack-never-$$; exit 3",
        dir.path(),
    )
    .await;
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    assert_eq!(out.stdout, "out\nt\n");
    assert!(out.stderr.starts_with("err\n"), "{out:?}");
    assert_eq!(out.denials.len(), 1, "{out:?}");
    let out = sh("kill -TERM $$", dir.path()).await;
    // SIGTERM is 15 on Linux.
    assert_eq!((out.exit_code, out.signal), (None, Some(15)));
    let out = sh("head -c 200000 /dev/zero | tr '\\0' x", dir.path()).await;
    assert!(out.stdout_truncated && out.stdout.len() == 64 * 1024);
}

/// A command that ends before its start is reported is still reported as
/// started, then ended: the spawner's worker that started it and the one
/// that reaped it reply in that order (they raced, and the reply that came
/// first under load said the spawner had stopped).
async fn many_short_commands_at_once_each_report_their_end() {
    let dir = tempfile::tempdir().unwrap();
    let confinement = Confinement::strict(dir.path());
    let mut running = tokio::task::JoinSet::new();
    for _ in 0..400 {
        let (cwd, confinement) = (dir.path().to_path_buf(), confinement.clone());
        running.spawn(async move { run(&spec("exit 7", &cwd, &confinement)).await });
    }
    while let Some(ended) = running.join_next().await {
        let out = ended.unwrap().unwrap();
        assert_eq!(out.exit_code, Some(7), "{out:?}");
    }
}

/// Placements cross to the spawner with the rest of the confinement, and
/// the command starts in a placed directory that the host lacks.
async fn places_directories() {
    let (ws, app) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(app.path().join("x.txt"), "placed\n").unwrap();
    let confinement = Confinement::strict(ws.path()).placing(app.path(), Path::new("/app"), true);
    let script = "pwd; cat x.txt; echo w > y.txt";
    let out = run(&spec(script, Path::new("/app"), &confinement))
        .await
        .unwrap();
    assert_eq!(out.stdout, "/app\nplaced\n", "{out:?}");
    assert!(app.path().join("y.txt").exists());
}

/// A trial's sandbox is started by the spawner too, which removes its
/// private tmp once the session ends.
async fn a_sessions_init_is_the_spawners_child() {
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner::pid().expect("the spawner runs");
    let before = children_of(spawner).len();
    let session = tack_sandbox::Session::start(&Confinement::strict(dir.path()), dir.path())
        .await
        .unwrap()
        .expect("an init program is named");
    assert_eq!(
        children_of(spawner).len(),
        before + 1,
        "the init is the spawner's"
    );
    let off = Confinement::off();
    let out = session
        .run(&spec(
            "echo \"$TMPDIR\"; echo hi > \"$TMPDIR/x\"",
            dir.path(),
            &off,
        ))
        .await
        .unwrap();
    let tmp = std::path::PathBuf::from(out.stdout.trim());
    assert!(tmp.join("x").is_file(), "{out:?}");
    drop(session);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmp.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !tmp.exists(),
        "the spawner left the session's tmp {}",
        tmp.display()
    );
}

async fn kills_the_group_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("survivor");
    let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
    let confinement = Confinement::strict(dir.path());
    let mut s = spec(&script, dir.path(), &confinement);
    s.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let out = run(&s).await.unwrap();
    assert!(out.timed_out && out.exit_code.is_none(), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!marker.exists(), "a background child survived the timeout");
}

async fn kills_the_group_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("survivor");
    let script = format!("sleep 2; touch {}", marker.display());
    let cwd = dir.path().to_path_buf();
    let running = tokio::spawn(async move { sh(&script, &cwd).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.abort();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !marker.exists(),
        "the command outlived its cancelled future"
    );
}

async fn reports_a_command_that_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let confinement = Confinement::strict(dir.path());
    let error = run(&spec("true", &gone, &confinement)).await.unwrap_err();
    let text = error.to_string();
    assert!(text.contains("gone"), "{text}");
}

async fn survives_the_spawner_dying() {
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner::pid().expect("the spawner runs");
    let cwd = dir.path().to_path_buf();
    let running = tokio::spawn(async move {
        let confinement = Confinement::strict(&cwd);
        run(&spec("sleep 5", &cwd, &confinement)).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::process::Command::new("kill")
        .args(["-KILL", &spawner.to_string()])
        .status()
        .unwrap();
    let interrupted = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap();
    assert!(interrupted.is_err(), "{interrupted:?}");
    // The reader saw the socket close; later commands run from this process.
    let deadline = Instant::now() + Duration::from_secs(5);
    while spawner::pid().is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(spawner::pid(), None);
    let out = sh("echo still", dir.path()).await;
    assert_eq!(out.stdout, "still\n");
}
