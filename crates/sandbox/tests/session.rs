//! One sandbox per trial: commands started by a session's init behave as
//! commands that build their own walls (output, exit status, the walls
//! themselves, timeouts, cancellation), share what a machine shares (its
//! `/tmp`), and nothing of the session outlives it.
//!
//! `harness = false`: the init program is named in `TACK_SANDBOX_INIT`
//! before any thread starts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // tests fail loudly by design

use std::path::Path;
use std::time::{Duration, Instant};

use tack_sandbox::{
    CommandOutput, CommandSpec, Confinement, INIT_ENV, SandboxProfile, Session, TestGate,
};

fn main() {
    // SAFETY: no other thread runs yet.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(INIT_ENV, env!("CARGO_BIN_EXE_tack-sandbox-init"));
    }
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
        test!(keeps_output_and_exit_status);
        test!(commands_share_the_trials_tmp_and_workspace);
        test!(another_trials_tmp_is_out_of_reach);
        test!(a_link_in_the_system_tmp_does_not_open_a_sealed_directory);
        test!(the_walls_hold_for_every_command);
        test!(a_command_cannot_stop_the_init);
        test!(commands_run_at_once);
        test!(kills_the_group_on_timeout);
        test!(a_process_left_holding_the_output_does_not_hold_the_command);
        test!(a_cancelled_run_kills_its_command);
        test!(nothing_outlives_the_session);
        test!(closing_waits_until_nothing_is_left);
        test!(unconfined_needs_no_session);
    });
}

fn spec<'a>(script: &'a str, cwd: &'a Path) -> CommandSpec<'a> {
    static OFF: std::sync::OnceLock<Confinement> = std::sync::OnceLock::new();
    CommandSpec {
        script,
        cwd,
        env: &[],
        timeout: Duration::from_secs(20),
        output_limit: 64 * 1024,
        // The session's walls are used whatever the spec says.
        confinement: OFF.get_or_init(Confinement::off),
    }
}

async fn session(dir: &Path) -> Session {
    Session::start(&Confinement::strict(dir), dir)
        .await
        .unwrap()
        .expect("an init program is named")
}

async fn sh(session: &Session, script: &str, cwd: &Path) -> CommandOutput {
    session.run(&spec(script, cwd)).await.unwrap()
}

/// A process that left the command's group (`setsid`) and holds its
/// output open does not hold the command: its output is what came before
/// the end and a line saying the rest is missing (the tool call outlasted
/// its timeout and the trial its wall time, for as long as that process
/// lived).
async fn a_process_left_holding_the_output_does_not_hold_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let started = std::time::Instant::now();
    // The leader waits a moment: a background job killed with its group
    // before it left it holds nothing.
    let script = "setsid sh -c 'echo early; sleep 60' & sleep 1; echo done";
    let out = sh(&session, script, dir.path()).await;
    assert!(started.elapsed() < Duration::from_secs(30), "{out:?}");
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("early\n") && out.stdout.contains("done\n"),
        "{out:?}"
    );
    assert!(out.stdout.contains("kept its output open"), "{out:?}");
}

async fn keeps_output_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let out = sh(&session, "echo out; echo err >&2; exit 3", dir.path()).await;
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str()),
        ("out\n", "err\n")
    );
    assert_eq!(out.profile, SandboxProfile::Strict);
    let out = sh(&session, "kill -TERM $$", dir.path()).await;
    assert_eq!((out.exit_code, out.signal), (None, Some(15)), "{out:?}");
    let out = sh(
        &session,
        "head -c 200000 /dev/zero | tr '\\0' x",
        dir.path(),
    )
    .await;
    assert!(out.stdout_truncated && out.stdout.len() == 64 * 1024);
    let out = sh(&session, "echo \"$TACK_X\"", dir.path()).await;
    assert_eq!(out.stdout, "\n", "tack's own variables stay out");
}

/// Every trial's private tmp is in tack's tmp root, which is sealed: a
/// trial started later cannot read (or list) what an earlier one keeps
/// there, though the rest of the system tmp stays readable.
async fn another_trials_tmp_is_out_of_reach() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let readable = readable();
    let (_first, tmp) = a_trial_keeping_a_secret(one.path()).await;
    let second = session(two.path()).await;
    let script = format!("cat '{tmp}/kept'; ls \"$(dirname '{tmp}')\"; cat '{readable}'");
    let out = sh(&second, &script, two.path()).await;
    assert_refused(&out);
    assert!(
        out.stdout.contains("readable"),
        "the rest of /tmp stays readable: {out:?}"
    );
}

/// The rest of the system tmp is readable; an entry that is a symbolic link
/// to another trial's tmp (anyone may make one there) is not a way in: it
/// leads into the cover, where the other trial's tmp is not.
async fn a_link_in_the_system_tmp_does_not_open_a_sealed_directory() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_first, tmp) = a_trial_keeping_a_secret(one.path()).await;
    let link = std::env::temp_dir().join(format!("tack-test-link-{}", std::process::id()));
    std::os::unix::fs::symlink(&tmp, &link).unwrap();
    let second = session(two.path()).await;
    let script = format!("cat '{}/kept'", link.display());
    let out = sh(&second, &script, two.path()).await;
    std::fs::remove_file(&link).unwrap();
    assert_refused(&out);
}

/// A session whose trial wrote `secret` to `kept` in its private tmp, and
/// that tmp.
async fn a_trial_keeping_a_secret(workspace: &Path) -> (Session, String) {
    let first = session(workspace).await;
    let script = "echo secret > \"$TMPDIR/kept\"; echo \"$TMPDIR\"";
    let out = sh(&first, script, workspace).await;
    assert!(out.success(), "{out:?}");
    let tmp = out.stdout.trim().to_string();
    assert!(Path::new(&tmp).join("kept").exists(), "{tmp}");
    (first, tmp)
}

/// Another trial's secret was not read: the sandbox refused, or (in /tmp,
/// where the sealed roots are not shown but for the command's own) it was
/// not there to read.
fn assert_refused(out: &CommandOutput) {
    assert!(!out.stdout.contains("secret"), "{out:?}");
    assert!(
        out.stderr.contains("Permission denied") || out.stderr.contains("No such file"),
        "{out:?}"
    );
}

/// A file in the system tmp, beside tack's tmp root: one name for every
/// run, put in place whole. A temporary file held by a static is never
/// dropped, so each run of these tests left one more in /tmp (and each
/// entry there is a Landlock rule of every strict command).
fn readable() -> String {
    static FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let path = FILE.get_or_init(|| {
        use std::io::Write;
        let tmp = std::env::temp_dir();
        let path = tmp.join("tack-sandbox-tests-readable");
        let mut staged = tempfile::NamedTempFile::new_in(&tmp).unwrap();
        staged.write_all(b"readable\n").unwrap();
        staged.persist(&path).unwrap();
        path
    });
    path.display().to_string()
}

async fn commands_share_the_trials_tmp_and_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let out = sh(
        &session,
        "echo kept > \"$TMPDIR/note\"; echo w > made.txt",
        dir.path(),
    )
    .await;
    assert!(out.success(), "{out:?}");
    let out = sh(&session, "cat \"$TMPDIR/note\"; cat made.txt", dir.path()).await;
    assert_eq!(out.stdout, "kept\nw\n", "{out:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("made.txt")).unwrap(),
        "w\n"
    );
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert_eq!(
        sh(&session, "pwd", &sub).await.stdout.trim(),
        sub.canonicalize().unwrap().display().to_string()
    );
}

/// Every command is locked down: writes outside the workspace, the
/// network and ptrace are refused, as for a command with its own walls.
async fn the_walls_hold_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    for _ in 0..2 {
        let out = sh(&session, "touch /etc/tack-never-$$", dir.path()).await;
        assert_ne!(out.exit_code, Some(0), "{out:?}");
        assert_eq!(out.denials.len(), 1, "{out:?}");
    }
    let out = sh(
        &session,
        "exec 3<>/dev/tcp/127.0.0.1/9 && echo connected",
        dir.path(),
    )
    .await;
    assert!(!out.stdout.contains("connected"), "{out:?}");
    let out = sh(
        &session,
        "cat /proc/1/environ > /dev/null && echo read",
        dir.path(),
    )
    .await;
    assert!(
        !out.stdout.contains("read"),
        "the init's memory and environment stay closed: {out:?}"
    );
    let out = sh(&session, "grep -c Seccomp:.2 /proc/self/status; cat /proc/self/attr/current 2>/dev/null; grep NoNewPrivs /proc/self/status", dir.path()).await;
    assert!(out.stdout.starts_with("1\n"), "seccomp filters on: {out:?}");
    assert!(out.stdout.contains("NoNewPrivs:\t1"), "{out:?}");
}

/// The init is pid 1 of the trial's pid namespace: a signal from one of its
/// commands, which run as the same user in the same namespaces, is dropped,
/// so an agent cannot end its own trial's sandbox (nor read the init).
async fn a_command_cannot_stop_the_init() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let out = sh(
        &session,
        "cat /proc/1/comm; \
         for sig in TERM INT HUP KILL; do kill -s $sig 1 2>/dev/null; done; \
         kill -s KILL -1; cat /proc/1/environ > /dev/null 2>&1 && echo read; echo sent",
        dir.path(),
    )
    .await;
    assert!(out.stdout.ends_with("sent\n"), "{out:?}");
    assert!(!out.stdout.contains("read"), "{out:?}");
    assert!(
        out.stdout.starts_with("tack-sandbox-in"),
        "pid 1 is the init itself: {out:?}"
    );
    let out = sh(&session, "echo still here", dir.path()).await;
    assert_eq!(out.stdout, "still here\n", "{out:?}");
}

async fn commands_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let started = Instant::now();
    let run = || sh(&session, "sleep 1; echo done", dir.path());
    let outs = tokio::join!(run(), run(), run(), run());
    let outs = [outs.0, outs.1, outs.2, outs.3];
    assert!(outs.iter().all(|o| o.stdout == "done\n"), "{outs:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "four one-second commands ran one after another: {:?}",
        started.elapsed()
    );
}

async fn kills_the_group_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let mut s = spec("(sleep 2; touch survivor) & sleep 30", dir.path());
    s.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let out = session.run(&s).await.unwrap();
    assert!(out.timed_out && out.exit_code.is_none(), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let out = sh(&session, "(sleep 1; touch late) & echo started", dir.path()).await;
    assert_eq!(out.stdout, "started\n");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !dir.path().join("survivor").exists(),
        "a timed-out group survived"
    );
    assert!(
        !dir.path().join("late").exists(),
        "a background child outlived its command"
    );
}

async fn a_cancelled_run_kills_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let s = spec("sleep 1; touch finished", dir.path());
    let cancelled = tokio::time::timeout(Duration::from_millis(200), session.run(&s)).await;
    assert!(cancelled.is_err());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !dir.path().join("finished").exists(),
        "a cancelled command went on"
    );
    assert!(
        sh(&session, "true", dir.path()).await.success(),
        "the session goes on"
    );
}

/// Dropping the session ends what runs in it and removes its private tmp.
async fn nothing_outlives_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let out = sh(
        &session,
        "echo \"$TMPDIR\"; (sleep 2; touch orphan) > /dev/null 2>&1 &",
        dir.path(),
    )
    .await;
    let tmp = out.stdout.trim().to_string();
    assert!(Path::new(&tmp).is_dir(), "{out:?}");
    drop(session);
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(
        !dir.path().join("orphan").exists(),
        "a process outlived its session"
    );
    assert!(!Path::new(&tmp).exists(), "the session's tmp {tmp} is left");
}

/// `close` returns once every process of the session is gone and its tmp
/// removed: the checks that follow it see nothing of the agent's.
async fn closing_waits_until_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path()).await;
    let out = sh(
        &session,
        // The command's group is killed when it ends: give setsid time.
        "echo \"$TMPDIR\"; setsid sleep 987.654 > /dev/null 2>&1 & sleep 0.5",
        dir.path(),
    )
    .await;
    let tmp = out.stdout.trim().to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sleeper_runs() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        sleeper_runs(),
        "the background sleep did not start: {out:?}"
    );
    session.close().await;
    assert!(!sleeper_runs(), "a process outlived the closed session");
    assert!(!Path::new(&tmp).exists(), "the session's tmp {tmp} is left");
}

/// Whether a `sleep 987.654` runs anywhere on the machine.
fn sleeper_runs() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|cmdline| cmdline == b"sleep\0987.654\0")
    })
}

async fn unconfined_needs_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let none = Session::start(&Confinement::off(), dir.path())
        .await
        .unwrap();
    assert!(none.is_none());
}
