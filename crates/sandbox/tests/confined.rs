//! Confined commands still do their ordinary work: write the workspace and
//! their private tmp, run tools, see exit codes and output, and report the
//! profile and the denials.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::Path;
use std::time::Duration;

use tack_sandbox::{CommandOutput, CommandSpec, Confinement, SandboxProfile, TestGate, run};

fn spec<'a>(confinement: &'a Confinement, cwd: &'a Path, script: &'a str) -> CommandSpec<'a> {
    CommandSpec {
        script,
        cwd,
        env: &[],
        timeout: Duration::from_secs(20),
        output_limit: 64 * 1024,
        confinement,
    }
}

async fn sh(confinement: &Confinement, cwd: &Path, script: &str) -> CommandOutput {
    run(&spec(confinement, cwd, script)).await.unwrap()
}

/// The error of a command that must not start: what its setup refused.
async fn refused(confinement: &Confinement, cwd: &Path, script: &str) -> String {
    let error = run(&spec(confinement, cwd, script)).await.unwrap_err();
    error.to_string()
}

/// Whether `strict` can be enforced here. Without it the test skips, saying
/// why, unless `TACK_REQUIRE_SANDBOX=1` (CI) makes that a failure.
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

#[tokio::test]
async fn strict_commands_work_in_the_workspace_and_their_tmp() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let strict = Confinement::strict(ws);
    let out = sh(
        &strict,
        ws,
        "set -e; echo hi > a.txt; mkdir -p d/e; mv a.txt d/e/b.txt; cat d/e/b.txt; \
         echo t > \"$TMPDIR/x\"; cat \"$TMPDIR/x\"; python3 -c 'print(6*7)'; \
         chmod +x d/e/b.txt; ln -s d/e/b.txt link; cat link; echo done >&2; exit 3",
    )
    .await;
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    assert_eq!(out.stdout, "hi\nt\n42\nhi\n");
    assert_eq!(out.stderr, "done\n");
    assert_eq!(out.profile, SandboxProfile::Strict);
    assert!(out.denials.is_empty(), "{:?}", out.denials);
    assert!(ws.join("d/e/b.txt").exists());
}

#[tokio::test]
async fn strict_reports_denials_and_the_profile() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = sh(
        &Confinement::strict(dir.path()),
        dir.path(),
        "touch /etc/tack-never-$$",
    )
    .await;
    assert_ne!(out.exit_code, Some(0));
    assert_eq!(out.denials.len(), 1, "{out:?}");
    assert!(out.denials[0].contains("/etc/tack-never"));
}

#[tokio::test]
async fn the_private_tmp_is_private_and_removed() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let strict = Confinement::strict(dir.path());
    let out = sh(
        &strict,
        dir.path(),
        "echo \"$TMPDIR\"; test \"$TMPDIR\" = \"$TMP\"",
    )
    .await;
    assert!(out.success(), "{out:?}");
    let tmp = out.stdout.trim().to_string();
    assert!(tmp.contains("tack-tmp-"), "{tmp}");
    assert!(
        !Path::new(&tmp).exists(),
        "the private tmp outlived the command"
    );
}

#[tokio::test]
async fn workspace_write_keeps_the_network_namespace_of_the_host() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let write = Confinement::workspace_write(dir.path());
    let out = sh(&write, dir.path(), "readlink /proc/self/ns/net; touch ok").await;
    assert_eq!(out.stdout.trim(), host.display().to_string(), "{out:?}");
    let strict = Confinement::strict(dir.path());
    let out = sh(&strict, dir.path(), "readlink /proc/self/ns/net").await;
    assert_ne!(out.stdout.trim(), host.display().to_string(), "{out:?}");
}

#[tokio::test]
async fn signals_and_exit_codes_come_through() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let strict = Confinement::strict(dir.path());
    // The command is not pid 1 of its pid namespace (a small init is), so
    // signals work as usual, even sent to itself.
    let out = sh(&strict, dir.path(), "kill -TERM $$").await;
    assert_eq!(out.signal, Some(libc_sigterm()), "{out:?}");
    let out = sh(&strict, dir.path(), "sh -c 'kill -KILL $$'; echo after $?").await;
    assert_eq!(out.stdout, "after 137\n", "{out:?}");
    let out = sh(
        &strict,
        dir.path(),
        "exec python3 -c 'import os; os.kill(os.getpid(), 9)'",
    )
    .await;
    assert_eq!(out.exit_code, None, "{out:?}");
    assert_eq!(out.signal, Some(9), "{out:?}");
}

#[tokio::test]
async fn a_cancelled_command_is_killed_whole() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for confinement in [Confinement::strict(dir.path()), Confinement::off()] {
        let marker = dir
            .path()
            .join(format!("late-{}", confinement.profile.as_str()));
        let script = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let spec = CommandSpec {
            script: &script,
            cwd: dir.path(),
            env: &[],
            timeout: Duration::from_secs(60),
            output_limit: 1024,
            confinement: &confinement,
        };
        let cancelled = tokio::time::timeout(Duration::from_millis(300), run(&spec)).await;
        assert!(cancelled.is_err());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !marker.exists(),
            "{:?} left a process running",
            confinement.profile
        );
    }
}

fn libc_sigterm() -> i32 {
    15
}

#[tokio::test]
async fn a_workspace_that_does_not_exist_is_a_setup_error() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let error = refused(&Confinement::strict(&missing), dir.path(), "true").await;
    assert!(error.contains("nope"), "{error}");
}

/// Every confined command gets a fresh /dev/shm: a workspace below the
/// host's (TMPDIR=/dev/shm) would be covered, and the command would fail
/// somewhere inside with ENOENT. It is refused before the fork instead,
/// with what to change.
#[tokio::test]
async fn a_workspace_below_dev_shm_is_refused_naming_tmpdir() {
    let shm = Path::new("/dev/shm");
    if !available() || !shm.is_dir() || shm.is_symlink() {
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let error = refused(&Confinement::strict(dir.path()), dir.path(), "touch made").await;
    assert!(error.contains("is below /dev/shm"), "{error}");
    assert!(error.contains("keep workspaces and TMPDIR"), "{error}");
    assert!(!dir.path().join("made").exists());
}

#[tokio::test]
async fn a_child_that_cannot_confine_itself_says_which_step_failed() {
    if !available() {
        return;
    }
    // The working directory is inside a hidden directory: after the mounts
    // it no longer exists, so the child fails before exec.
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("tasks/sub");
    std::fs::create_dir_all(&cwd).unwrap();
    let strict = Confinement::strict(dir.path()).hiding([dir.path().join("tasks")]);
    let error = refused(&strict, &cwd, "touch should-not-run").await;
    assert!(error.contains("Chdir"), "{error}");
    assert!(error.contains("did not run"), "{error}");
    assert!(!cwd.join("should-not-run").exists());
}

/// A socket in the system tmp (tmux's, an ssh agent's) is out of reach:
/// the command's /tmp holds only what it may use; so in /var/tmp. Elsewhere, a known gap,
/// stated as a test: below Landlock ABI 9 nothing in the kernel stops
/// `connect(2)` to a pathname UNIX socket that is readable (read-only
/// mounts do not apply to sockets). With ABI 9 the ruleset handles
/// `RESOLVE_UNIX` and this flips to blocked; until then, hide the
/// directories holding such sockets (strict hides /run by default).
#[tokio::test]
async fn pathname_unix_sockets_in_tmp_are_out_of_reach_and_elsewhere_below_abi_9_hidden() {
    if !available() {
        return;
    }
    let connect = |path: &Path| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('CONNECTED')\"",
            path.display()
        )
    };
    let ws = tempfile::tempdir().unwrap();
    let in_tmp = tempfile::tempdir_in("/tmp").unwrap();
    let path = in_tmp.path().join("tmux.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let out = sh(&Confinement::strict(ws.path()), ws.path(), &connect(&path)).await;
    assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
    // At any depth (an editor's /tmp/nvim.user/XXX/nvim.N.0), and made
    // after the walls, in a directory that was empty then (a tmux started
    // again in /tmp/tmux-0).
    let deep = in_tmp.path().join("a/b/deep.sock");
    std::fs::create_dir_all(deep.parent().unwrap()).unwrap();
    let _deep = std::os::unix::net::UnixListener::bind(&deep).unwrap();
    let late_dir = in_tmp.path().join("later");
    std::fs::create_dir(&late_dir).unwrap();
    let late = late_dir.join("late.sock");
    let script = format!(
        "{}; sleep 1; test -S {} && echo THERE; {}",
        connect(&deep),
        late.display(),
        connect(&late)
    );
    let strict = Confinement::strict(ws.path());
    let (out, _late) = tokio::join!(sh(&strict, ws.path(), &script), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::os::unix::net::UnixListener::bind(&late).unwrap()
    });
    assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
    assert!(
        out.stdout.contains("THERE"),
        "the late socket is seen: {out:?}"
    );

    // The same in /var/tmp, the other tmp every user may write.
    let var_tmp = Path::new("/var/tmp");
    if var_tmp.is_dir() && !var_tmp.is_symlink() {
        let in_var_tmp = tempfile::tempdir_in(var_tmp).unwrap();
        let path = in_var_tmp.path().join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let out = sh(&Confinement::strict(ws.path()), ws.path(), &connect(&path)).await;
        assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
        // So with a tmp of its own shown at /tmp (a task written for a
        // container), its covers staged in its new root and gone from it.
        // (Its workspace outside /tmp, which its own tmp covers.)
        let ws = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let shown = Confinement::strict(ws.path()).with_tmp_at(Path::new("/tmp"), None);
        let script = format!("{}; ls -A /", connect(&path));
        let out = sh(&shown, ws.path(), &script).await;
        assert!(out.exit_code.is_some(), "{out:?}");
        assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
        assert!(
            out.stdout.contains("usr") && !out.stdout.contains(".tack-cover"),
            "{out:?}"
        );
        // So with a directory placed inside /var/tmp (a task's workdir
        // there): it is the command's, the rest of /var/tmp still covered.
        // What else /var/tmp holds is still seen as it is (read through
        // the host's, not the new root's stand-ins for it).
        let at = in_var_tmp.path().join("placed");
        let beside = in_var_tmp.path().join("beside.txt");
        std::fs::write(&beside, "the host's file\n").unwrap();
        let placed = Confinement::strict(ws.path()).placing(ws.path(), &at, true);
        let script = format!(
            "{}; touch {}/made; cat {}",
            connect(&path),
            at.display(),
            beside.display()
        );
        let out = sh(&placed, ws.path(), &script).await;
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
        assert!(out.stdout.contains("the host's file"), "{out:?}");
        assert!(ws.path().join("made").exists(), "{out:?}");
    }

    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = outside.path().join("daemon.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let out = sh(&Confinement::strict(ws.path()), ws.path(), &connect(&path)).await;
    let abi = tack_sandbox::probe().landlock_abi.unwrap_or(0);
    if abi >= 9 || path.starts_with("/tmp") || path.starts_with(var_tmp) {
        assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
    } else {
        assert!(out.stdout.contains("CONNECTED"), "{out:?}");
        eprintln!("known gap on Landlock ABI {abi}: UNIX socket outside reachable");
    }
    let hidden = Confinement::strict(ws.path()).hiding([outside.path().to_path_buf()]);
    let out = sh(&hidden, ws.path(), &connect(&path)).await;
    assert!(
        !out.stdout.contains("CONNECTED"),
        "hiding its directory closes it: {out:?}"
    );
}

/// With the trials' root in a directory of the system tmp (`TMPDIR=/tmp/ci`
/// in CI), the command's /tmp shows that directory's other entries, read
/// only, and in the sealed root its own workspace alone.
#[tokio::test]
async fn a_sealed_directory_deep_in_the_system_tmp_shows_only_the_commands_own() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let top = dir.path().canonicalize().unwrap();
    let sealed = top.join("tack-trials");
    let (ws, other, beside) = (sealed.join("ws"), sealed.join("other"), top.join("beside"));
    for d in [&ws, &other, &beside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(beside.join("script.sh"), "echo from beside\n").unwrap();
    std::fs::write(other.join("secret.txt"), "not yours\n").unwrap();
    let confinement = Confinement::strict(&ws).sealing([sealed.clone()]);
    let script = format!(
        "sh {b}/script.sh; ls {s}; cat {o}/secret.txt 2>/dev/null && exit 10; \
         echo x >> {b}/script.sh 2>/dev/null && exit 11; echo ok > mine.txt",
        b = beside.display(),
        s = sealed.display(),
        o = other.display(),
    );
    let out = sh(&confinement, &ws, &script).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "from beside\nws\n");
    assert_eq!(
        std::fs::read_to_string(beside.join("script.sh")).unwrap(),
        "echo from beside\n"
    );
    assert!(ws.join("mine.txt").exists());
}

/// A mount below /tmp (an AppImage's, an sshfs) is locked in the command's
/// user namespace, and overlayfs refuses /tmp as a layer then: the command
/// still runs, its /tmp showing its own paths and nothing else.
#[tokio::test]
async fn a_mount_below_the_system_tmp_leaves_commands_running() {
    if !available() || !rustix::process::geteuid().is_root() {
        return;
    }
    let mount_point = tempfile::tempdir_in("/tmp").unwrap();
    let beside = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let mounted = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "tack-test",
            mount_point.path().to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(mounted.success());
    let ws = tempfile::tempdir().unwrap();
    let script = format!(
        "test -e {} && echo SEEN; echo ok > mine.txt; echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
        beside.path().display()
    );
    let out = sh(&Confinement::strict(ws.path()), ws.path(), &script).await;
    let unmounted = std::process::Command::new("umount")
        .arg(mount_point.path())
        .status()
        .unwrap();
    assert!(unmounted.success());
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "t\n", "{out:?}");
    assert!(ws.path().join("mine.txt").exists());
}

/// Offloaded results sit beside the workspaces, under their seal: the
/// command reads its own results directory, cannot write it, and still
/// cannot read another trial's workspace.
#[tokio::test]
async fn an_exposed_directory_is_readable_through_the_seal_but_not_writable() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sealed = dir.path().canonicalize().unwrap();
    let (ws, results, other) = (
        sealed.join("ws"),
        sealed.join("results"),
        sealed.join("other"),
    );
    for d in [&ws, &results, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(results.join("call_1.txt"), "the whole output\n").unwrap();
    std::fs::write(other.join("secret.txt"), "not yours\n").unwrap();
    let confinement = Confinement::strict(&ws)
        .sealing([sealed.clone()])
        .exposing_read_only(&results);
    let script = format!(
        "cat {r}/call_1.txt; echo x > {r}/new.txt && exit 10; echo x >> {r}/call_1.txt && exit 11; \
         cat {o}/secret.txt 2>/dev/null && exit 12; echo ok > mine.txt",
        r = results.display(),
        o = other.display(),
    );
    let out = sh(&confinement, &ws, &script).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "the whole output\n");
    assert!(!results.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(results.join("call_1.txt")).unwrap(),
        "the whole output\n"
    );
    assert!(ws.join("mine.txt").exists());
}
