//! Host directories placed at absolute paths that do not exist on the host
//! (`/app`, `/tests`, `/logs/verifier`): the confined command sees and uses
//! them there, and nothing else changes, for it or for the host.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // tests fail loudly by design

use std::path::Path;
use std::time::Duration;

use tack_sandbox::{
    CommandOutput, CommandSpec, Confinement, SandboxError, SandboxProfile, ServiceSpec, TestGate,
    run, spawn_service,
};
use tokio::io::AsyncReadExt;

fn available(profile: SandboxProfile) -> bool {
    match tack_sandbox::test_gate(profile) {
        TestGate::Run => true,
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            false
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
}

async fn sh(confinement: &Confinement, cwd: &Path, script: &str) -> CommandOutput {
    let spec = CommandSpec {
        script,
        cwd,
        env: &[],
        timeout: Duration::from_secs(20),
        output_limit: 64 * 1024,
        confinement,
    };
    run(&spec).await.unwrap()
}

/// Whether each of the paths the tests place exists on the host, to check
/// that running changed none of them.
fn host_state() -> Vec<bool> {
    ["/app", "/tests", "/logs", "/logs/verifier"]
        .iter()
        .map(|path| Path::new(path).symlink_metadata().is_ok())
        .collect()
}

/// An app directory, a read-only tests directory and a writable logs
/// directory, placed as a Terminal-Bench task expects them.
struct Task {
    ws: tempfile::TempDir,
    app: tempfile::TempDir,
    tests: tempfile::TempDir,
    logs: tempfile::TempDir,
}

impl Task {
    fn new() -> Task {
        let task = Task {
            ws: tempfile::tempdir().unwrap(),
            app: tempfile::tempdir().unwrap(),
            tests: tempfile::tempdir().unwrap(),
            logs: tempfile::tempdir().unwrap(),
        };
        std::fs::write(task.app.path().join("x.txt"), "from the host\n").unwrap();
        std::fs::write(task.tests.path().join("test.sh"), "checks\n").unwrap();
        task
    }

    fn confinement(&self, profile: SandboxProfile) -> Confinement {
        Confinement::for_profile(profile, self.ws.path())
            .placing(self.app.path(), Path::new("/app"), true)
            .placing(self.tests.path(), Path::new("/tests"), false)
            .placing(self.logs.path(), Path::new("/logs/verifier"), true)
    }
}

const TASK_SCRIPT: &str = "pwd; cat x.txt; echo written > /app/y.txt; cat /tests/test.sh; \
     echo 1 > /logs/verifier/reward.txt; \
     echo no > /tests/new 2>/dev/null && echo WROTE-TESTS; \
     echo no > /etc/tack-places-$$ 2>/dev/null && echo WROTE-ETC; \
     echo no > /root/tack-places-$$ 2>/dev/null && echo WROTE-ROOT; \
     echo no > \"$HOME/tack-places-$$\" 2>/dev/null && echo WROTE-HOME; \
     mkdir /elsewhere 2>/dev/null && echo MADE-ROOT-DIR; \
     ls / | grep -c tack-old-root; \
     [ \"$(ls -d /proc/[0-9]* | wc -l)\" -lt 10 ] && echo fresh-proc; true";

fn check_task_output(task: &Task, out: &CommandOutput) {
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout, "/app\nfrom the host\nchecks\n0\nfresh-proc\n",
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(task.app.path().join("y.txt")).unwrap(),
        "written\n"
    );
    assert_eq!(
        std::fs::read_to_string(task.logs.path().join("reward.txt")).unwrap(),
        "1\n"
    );
    assert!(!task.tests.path().join("new").exists());
}

async fn a_task_sees_its_places(profile: SandboxProfile) {
    if !available(profile) {
        return;
    }
    let before = host_state();
    let task = Task::new();
    let confinement = task.confinement(profile);
    let out = sh(&confinement, Path::new("/app"), TASK_SCRIPT).await;
    eprintln!("{}: {}", profile.as_str(), out.stdout.replace('\n', " | "));
    check_task_output(&task, &out);
    assert_eq!(host_state(), before, "a placed path appeared on the host");
}

#[tokio::test]
async fn strict_shows_placed_directories_and_nothing_else_is_writable() {
    a_task_sees_its_places(SandboxProfile::Strict).await;
}

#[tokio::test]
async fn workspace_write_shows_placed_directories_too() {
    a_task_sees_its_places(SandboxProfile::WorkspaceWrite).await;
}

/// Two commands running at once, each with its own `/app`.
#[tokio::test]
async fn concurrent_commands_each_see_their_own_app() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let (one, two) = (Task::new(), Task::new());
    std::fs::write(one.app.path().join("id"), "one").unwrap();
    std::fs::write(two.app.path().join("id"), "two").unwrap();
    let (c1, c2) = (
        one.confinement(SandboxProfile::Strict),
        two.confinement(SandboxProfile::Strict),
    );
    let script = "cat /app/id; sleep 1; cat /app/id; echo \" $(ls /app | wc -l)\"";
    let (a, b) = tokio::join!(
        sh(&c1, Path::new("/app"), script),
        sh(&c2, Path::new("/app"), script)
    );
    assert_eq!(a.stdout, "oneone 2\n", "{a:?}");
    assert_eq!(b.stdout, "twotwo 2\n", "{b:?}");
}

/// A placed workspace keeps its `.git` read-only at the placed path too.
#[tokio::test]
async fn a_placed_workspace_keeps_git_read_only() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    let confinement = Confinement::strict(ws.path()).placing(ws.path(), Path::new("/app"), true);
    let out = sh(
        &confinement,
        Path::new("/app"),
        "echo ok > /app/file && touch /app/.git/config 2>/dev/null; echo $?",
    )
    .await;
    assert_eq!(out.stdout, "1\n", "{out:?}");
    assert!(ws.path().join("file").exists());
    assert!(!ws.path().join(".git/config").exists());
}

#[tokio::test]
async fn placing_under_off_is_refused_before_anything_runs() {
    let task = Task::new();
    let marker = task.ws.path().join("ran");
    let script = format!("touch {}", marker.display());
    let confinement = Confinement::off().placing(task.app.path(), Path::new("/app"), true);
    let spec = CommandSpec {
        script: &script,
        cwd: task.ws.path(),
        env: &[],
        timeout: Duration::from_secs(5),
        output_limit: 1024,
        confinement: &confinement,
    };
    let error = run(&spec).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, SandboxError::Unavailable { .. }),
        "{error:?}"
    );
    assert!(
        message.contains("/app") && message.contains("`off`"),
        "{message}"
    );
    assert!(
        message.contains("use the `strict` or `workspace_write`"),
        "{message}"
    );
    assert!(!marker.exists());
    let service = spawn_service(&ServiceSpec {
        program: "touch",
        args: &[marker.display().to_string()],
        cwd: task.ws.path(),
        env: &[],
        confinement: &confinement,
    });
    assert!(matches!(service, Err(SandboxError::Unavailable { .. })));
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_place_the_sandbox_cannot_make_is_an_error_that_says_why() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let task = Task::new();
    let confinement =
        Confinement::strict(task.ws.path()).placing(task.app.path(), Path::new("/proc/app"), true);
    let spec = CommandSpec {
        script: "true",
        cwd: task.ws.path(),
        env: &[],
        timeout: Duration::from_secs(5),
        output_limit: 1024,
        confinement: &confinement,
    };
    let error = run(&spec).await.unwrap_err().to_string();
    assert!(
        error.contains("/proc/app") && error.contains("kernel"),
        "{error}"
    );
}

/// Services (MCP servers) take the same path: placed, started in `/app`.
#[tokio::test]
async fn a_service_sees_its_places() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let before = host_state();
    let task = Task::new();
    let confinement = task.confinement(SandboxProfile::Strict);
    let args = [
        "-c".to_string(),
        "pwd; cat x.txt; echo s > /app/s.txt; echo no > /tests/s 2>/dev/null || echo refused"
            .to_string(),
    ];
    let mut service = spawn_service(&ServiceSpec {
        program: "bash",
        args: &args,
        cwd: Path::new("/app"),
        env: &[],
        confinement: &confinement,
    })
    .unwrap();
    let mut stdout = service.stdout().unwrap();
    let mut text = String::new();
    stdout.read_to_string(&mut text).await.unwrap();
    let status = service.wait().await.unwrap();
    assert!(status.success(), "{status:?} {text}");
    assert_eq!(text, "/app\nfrom the host\nrefused\n");
    assert!(task.app.path().join("s.txt").exists());
    assert_eq!(host_state(), before);
}

/// A workspace placed at `/app` is `/app` to a command started in the
/// workspace as the host names it: tack's callers pass the host path.
#[tokio::test]
async fn a_command_started_in_the_placed_workspace_starts_where_it_is_shown() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("x.txt"), "here\n").unwrap();
    let confinement = Confinement::strict(ws.path()).placing(ws.path(), Path::new("/app"), true);
    let out = sh(
        &confinement,
        ws.path(),
        "pwd; cat x.txt; echo made > /app/y.txt",
    )
    .await;
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout, "/app\nhere\n");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("y.txt")).unwrap(),
        "made\n"
    );
}

/// With `tmp_at`, the command's private tmp directory is `/tmp` (and
/// `$TMPDIR`): a script written for a container writes there by name, the
/// host's /tmp is untouched, and the placed workspace stays in sight even
/// when it lives under the host's /tmp.
#[tokio::test]
async fn a_private_tmp_shown_at_slash_tmp_is_the_commands_own() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let task = Task::new();
    let marker = format!("tack-tmp-at-{}", std::process::id());
    let confinement = task
        .confinement(SandboxProfile::Strict)
        .with_tmp_at(Path::new("/tmp"), None);
    let script = format!(
        "cd /app && echo scratch > /tmp/{marker} && cp /tmp/{marker} /app/copied && \
         echo \"$TMPDIR\" && ls /tmp"
    );
    let out = sh(&confinement, task.app.path(), &script).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, format!("/tmp\n{marker}\n"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(task.app.path().join("copied")).unwrap(),
        "scratch\n"
    );
    assert!(!Path::new("/tmp").join(&marker).exists());
}

/// With a host directory for it, `/tmp` lasts from one command to the
/// next (a trial's, as in a container).
#[tokio::test]
async fn a_tmp_shown_from_a_host_directory_lasts_between_commands() {
    if !available(SandboxProfile::Strict) {
        return;
    }
    let task = Task::new();
    let trial_tmp = tempfile::tempdir().unwrap();
    let confinement = task
        .confinement(SandboxProfile::Strict)
        .with_tmp_at(Path::new("/tmp"), Some(trial_tmp.path()));
    let first = sh(&confinement, task.app.path(), "echo kept > /tmp/note").await;
    assert_eq!(first.exit_code, Some(0), "{first:?}");
    let second = sh(
        &confinement,
        task.app.path(),
        "cat /tmp/note; echo \"$TMPDIR\"",
    )
    .await;
    assert_eq!(second.stdout, "kept\n/tmp\n", "{second:?}");
    assert_eq!(
        std::fs::read_to_string(trial_tmp.path().join("note")).unwrap(),
        "kept\n"
    );
}
