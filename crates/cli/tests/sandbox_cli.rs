//! `tack doctor` and `tack sandbox exec` through the real binary: the JSON
//! fields, the actionable error when a mechanism is missing, confinement
//! that blocks writes outside the workspace but not inside, and exit
//! status passthrough.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn tack(args: &[&str], disable: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command.args(args).env_remove("TACK_SANDBOX_DISABLE");
    if let Some(disable) = disable {
        command.env("TACK_SANDBOX_DISABLE", disable);
    }
    command.output().unwrap()
}

fn exec(workspace: &Path, extra: &[&str], script: &str) -> Output {
    exec_words(workspace, extra, &[script])
}

fn doctor_json(disable: Option<&str>) -> (Value, i32) {
    let out = tack(&["doctor", "--json"], disable);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    (json, out.status.code().unwrap())
}

fn strict_available() -> bool {
    let (json, _) = doctor_json(None);
    if json["profiles"]["strict"]["available"] == Value::Bool(true) {
        return true;
    }
    // A skip must not pass for a pass in CI: TACK_REQUIRE_SANDBOX=1 fails.
    match tack_sandbox::gate_for(format!("strict cannot run here: {}", json["missing"])) {
        tack_sandbox::TestGate::Fail(why) => panic!("{why}"),
        tack_sandbox::TestGate::Skip(why) => eprintln!("skipped: {why}"),
        tack_sandbox::TestGate::Run => {}
    }
    false
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A PATH without `true` (the program the probes start) says nothing of
/// the kernel: doctor finds the same mechanisms.
#[test]
fn doctor_probes_the_kernel_whatever_the_path() {
    if !strict_available() {
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["doctor", "--json"])
        .env_remove("TACK_SANDBOX_DISABLE")
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["missing"], serde_json::json!([]), "{json}");
    assert_eq!(json["profiles"]["strict"]["available"], true, "{json}");
}

#[test]
fn doctor_json_lists_every_mechanism_and_profile() {
    let (json, code) = doctor_json(None);
    for field in [
        "landlock_abi",
        "port_limited_network",
        "seccomp",
        "user_namespaces",
        "mount_namespaces",
        "network_namespaces",
        "pid_namespaces",
        "rlimits",
        "process_bounds",
        "missing",
        "seccomp_denies",
        "image_engine",
    ] {
        assert!(json.get(field).is_some(), "no {field} in {json}");
    }
    // An engine's name, or why there is none.
    let engine = &json["image_engine"];
    assert!(
        engine["name"].is_string() || engine["error"].is_string(),
        "{json}"
    );
    for profile in ["strict", "workspace_write", "off"] {
        assert!(
            json["profiles"][profile]["available"].is_boolean(),
            "{json}"
        );
    }
    assert_eq!(json["profiles"]["off"]["available"], Value::Bool(true));
    let strict = json["profiles"]["strict"]["available"] == Value::Bool(true);
    assert_eq!(code, if strict { 0 } else { 1 });
}

/// Doctor names the system tmp (`$TMPDIR`) and says that confined commands
/// see it through an overlay, whatever it holds.
#[test]
fn doctor_names_the_system_tmp() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(args)
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap()
    };
    let json: Value = serde_json::from_slice(&run(&["doctor", "--json"]).stdout).unwrap();
    let system_tmp = &json["system_tmp"];
    assert_eq!(system_tmp["path"], tmp.path().display().to_string());
    assert_eq!(system_tmp["unusable"], Value::Null, "{json}");
    let out = text(&run(&["doctor"]).stdout);
    assert!(
        out.contains(&format!(
            "system tmp          {} (confined commands see it through a read-only overlay",
            tmp.path().display()
        )),
        "{out}"
    );
}

/// With TMPDIR below /dev/shm every trial's workspace would be covered by
/// the fresh /dev/shm each confined command gets: doctor says so, and the
/// tidy tmp above says nothing of it.
#[test]
fn doctor_says_a_tmp_below_dev_shm_is_unusable() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() || shm.is_symlink() {
        return;
    }
    let below = tempfile::tempdir_in(shm).unwrap();
    let doctor = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(args)
            .env("TMPDIR", below.path())
            .output()
            .unwrap()
    };
    let json: Value = serde_json::from_slice(&doctor(&["doctor", "--json"]).stdout).unwrap();
    let unusable = json["system_tmp"]["unusable"].as_str().unwrap_or_default();
    assert!(unusable.contains("is below /dev/shm"), "{json}");
    let out = text(&doctor(&["doctor"]).stdout);
    assert!(
        out.contains("system tmp          UNUSABLE") && out.contains("keep workspaces and TMPDIR"),
        "{out}"
    );
    let tidy = tempfile::tempdir().unwrap();
    let json: Value = serde_json::from_slice(
        &Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(["doctor", "--json"])
            .env("TMPDIR", tidy.path())
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(json["system_tmp"]["unusable"], Value::Null, "{json}");
}

#[test]
fn doctor_says_what_is_missing_and_exits_1() {
    let (json, code) = doctor_json(Some("landlock"));
    assert_eq!(code, 1);
    assert_eq!(json["landlock_abi"], Value::Null);
    assert_eq!(json["port_limited_network"], Value::Bool(false));
    assert_eq!(json["profiles"]["strict"]["available"], Value::Bool(false));
    let message = json["profiles"]["strict"]["message"].as_str().unwrap();
    assert!(message.contains("Landlock"), "{message}");
    let out = tack(&["doctor"], Some("landlock"));
    assert!(
        text(&out.stdout).contains("CANNOT run here"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_missing_mechanism_is_an_actionable_error_not_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = tack(
        &[
            "sandbox",
            "exec",
            "--profile",
            "strict",
            "--workspace",
            dir.path().to_str().unwrap(),
            "--",
            "touch ran",
        ],
        Some("landlock"),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("Landlock"), "{stderr}");
    assert!(
        stderr.contains("unset TACK_SANDBOX_DISABLE"),
        "how to enable: {stderr}"
    );
    assert!(stderr.contains("--profile off"), "how to opt out: {stderr}");
    assert!(
        stderr.contains("sandbox = \"off\""),
        "how to opt out: {stderr}"
    );
    assert!(!marker.exists(), "the command ran anyway");
}

#[test]
fn strict_blocks_etc_but_not_the_workspace() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = format!("/etc/tack-cli-test-{}", std::process::id());
    let out = exec(
        dir.path(),
        &["--profile", "strict"],
        &format!("touch {name}"),
    );
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!Path::new(&name).exists());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("[tack sandbox] denied under profile strict"),
        "{stderr}"
    );
    let out = exec(dir.path(), &[], "touch inside && echo made");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "made\n");
    assert!(dir.path().join("inside").exists());
}

/// A descriptor open when tack starts (a shell's `exec 9>>file`, make's
/// jobserver) does not reach a confined command: through it the command
/// would write the host file behind it, past every wall.
#[test]
fn descriptors_tack_inherits_do_not_reach_the_command() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (workspace, host_file) = (dir.path().join("ws"), dir.path().join("host.log"));
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(&host_file, "").unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"exec 9>>"$1"; exec "$2" sandbox exec --workspace "$3" -- 'echo pwned >&9'"#)
        .arg("bash")
        .arg(&host_file)
        .arg(env!("CARGO_BIN_EXE_tack"))
        .arg(&workspace)
        .env_remove("TACK_SANDBOX_DISABLE")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stderr).contains("Bad file descriptor"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&host_file).unwrap(), "");
}

/// A confined command has an IPC namespace of its own: the host's System V
/// shared memory (a database's, another trial's) is not there to read or
/// overwrite.
#[test]
fn the_hosts_shared_memory_is_out_of_reach() {
    if !strict_available() {
        return;
    }
    let made = Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
    assert!(made.status.success(), "{made:?}");
    let id: String = text(&made.stdout)
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = exec(dir.path(), &[], &format!("ipcs -m -i {id}"));
    let removed = Command::new("ipcrm").args(["-m", &id]).status().unwrap();
    assert!(removed.success());
    assert!(text(&out.stderr).contains("not found"), "{out:?}");
    assert!(
        !text(&out.stdout).contains("Shared memory Segment"),
        "{out:?}"
    );
}

/// What a confined command writes on the host is its user's (root's here,
/// in CI): it cannot leave a set-uid or set-gid program there, nor one
/// with capabilities, for the machine's other users to run; the refusals
/// are shown as denials, and an ordinary chmod works.
#[test]
fn no_set_id_program_is_left_on_the_host() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = exec(
        dir.path(),
        &[],
        "cp /bin/true t && chmod 755 t && echo plain; chmod u+s t; chmod g+s t; \
         install -m 4755 /bin/true t2; mkdir d; chmod 2775 d; \
         python3 -c \"import os; os.setxattr('t', 'security.capability', \
         (0x02000001).to_bytes(4, 'little') + (1 << 21).to_bytes(4, 'little') + bytes(12))\" \
         2>/dev/null || echo no-caps",
    );
    assert_eq!(text(&out.stdout), "plain\nno-caps\n", "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("[tack sandbox] denied under profile strict"),
        "{stderr}"
    );
    assert!(
        stderr.contains("chmod: changing permissions of 't': Operation not permitted"),
        "{stderr}"
    );
    use std::os::unix::fs::PermissionsExt;
    for name in ["t", "t2", "d"] {
        let Ok(meta) = std::fs::metadata(dir.path().join(name)) else {
            continue;
        };
        assert_eq!(
            meta.permissions().mode() & 0o6000,
            0,
            "{name} is set-id: {out:?}"
        );
    }
    let caps = Command::new("getfattr")
        .args(["-n", "security.capability"])
        .arg(dir.path().join("t"))
        .output();
    if let Ok(caps) = caps {
        assert!(!caps.status.success(), "t has capabilities: {caps:?}");
    }
}

/// `tack sandbox exec` runs a command as the agent's bash tool does: the
/// trials running beside it (their workspaces, their hidden checks) are
/// out of its sight.
#[test]
fn sandbox_exec_does_not_see_the_trials_beside_it() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    let check = tmp.join("tack-checks/other/checks/expected.txt");
    let workspace = tmp.join("tack-trials/other/workspace/solved.py");
    for file in [&check, &workspace] {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, "SECRET_EXPECTED_ANSWER=42\n").unwrap();
    }
    let mine = dir.path().join("ws");
    std::fs::create_dir(&mine).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "sandbox",
            "exec",
            "--workspace",
            mine.to_str().unwrap(),
            "--",
        ])
        .arg(format!("cat {} {}", check.display(), workspace.display()))
        .env("TMPDIR", &tmp)
        .env_remove("TACK_SANDBOX_DISABLE")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!text(&out.stdout).contains("SECRET"), "{out:?}");
}

/// A confined command's terminals are its own (a devpts instance): the
/// host's, where an operator types or `tack chat` asks its approvals, are
/// not there to read or write; opening a new one works.
#[test]
fn terminals_are_the_commands_own() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "ls /dev/pts; python3 -c 'import os, pty; m, s = pty.openpty(); \
                  os.write(m, b\"hi\\n\"); print(os.ttyname(s), os.read(s, 3))'";
    let out = exec(dir.path(), &[], script);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let listed = text(&out.stdout);
    let mut lines = listed.lines();
    assert_eq!(lines.next(), Some("ptmx"), "{listed}");
    assert_eq!(lines.next(), Some("/dev/pts/0 b'hi\\n'"), "{listed}");
}

#[test]
fn exit_status_timeouts_and_signals_pass_through() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(exec(dir.path(), &[], "exit 7").status.code(), Some(7));
    let out = exec(dir.path(), &["--timeout", "1"], "sleep 10");
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    assert_eq!(exec(dir.path(), &[], "kill -9 $$").status.code(), Some(137));
    let out = exec(dir.path(), &["--profile", "off"], "exit 3");
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("ran without kernel confinement"));
}

/// `--json`: one object on stdout, the command's output in it (control
/// characters escaped by JSON), how it ended, and what was denied; the
/// exit status is the same as without.
#[test]
fn sandbox_exec_json_says_how_the_command_ended_and_what_was_denied() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = format!("/etc/tack-cli-json-{}", std::process::id());
    let script = format!("printf 'hi\\033[2J\\n'; echo oops >&2; touch {name}");
    let out = exec(dir.path(), &["--json"], &script);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["profile"], "strict");
    assert_eq!(json["exit_code"], 1);
    assert_eq!(json["exit_status"], 1);
    assert_eq!(json["signal"], Value::Null);
    assert_eq!(json["timed_out"], false);
    assert_eq!(json["stdout"], "hi\u{1b}[2J\n");
    assert!(
        json["stderr"].as_str().unwrap().starts_with("oops\n"),
        "{json}"
    );
    let denials = json["denials"].as_array().unwrap();
    assert!(
        denials.iter().any(|d| d.as_str().unwrap().contains(&name)),
        "{json}"
    );
    let out = exec(dir.path(), &["--json", "--timeout", "1"], "sleep 10");
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["timed_out"], true);
    assert_eq!(json["exit_status"], 124);
}

#[test]
fn hidden_directories_are_empty_inside() {
    if !strict_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let tasks = dir.path().join("tasks");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::write(tasks.join("solution.py"), "secret").unwrap();
    let hide = tasks.to_str().unwrap();
    let out = exec(&ws, &["--hide", hide], &format!("ls -A {hide} | wc -l"));
    assert_eq!(text(&out.stdout).trim(), "0", "{out:?}");
}

/// Words after `--`: one is a script, several are an argv run as given.
fn exec_words(workspace: &Path, extra: &[&str], words: &[&str]) -> Output {
    let mut args = vec![
        "sandbox",
        "exec",
        "--workspace",
        workspace.to_str().unwrap(),
    ];
    args.extend(extra);
    args.push("--");
    args.extend(words);
    tack(&args, None)
}

#[test]
fn several_words_run_as_an_argv() {
    let dir = tempfile::tempdir().unwrap();
    // `off` needs no kernel feature; strict below when this machine has it.
    let mut profiles = vec!["off"];
    if strict_available() {
        profiles.push("strict");
    }
    for profile in profiles {
        let extra = ["--profile", profile];
        let out = exec_words(dir.path(), &extra, &["bash", "-c", "echo \"a b\""]);
        assert_eq!(text(&out.stdout), "a b\n", "{profile}: {out:?}");
        // Joined with spaces this was `bash -c exit 0; touch x`: bash ran
        // `exit`, then the outer shell ran `touch x`. As an argv, bash
        // runs the whole script and stops at its `exit 0`.
        let out = exec_words(dir.path(), &extra, &["bash", "-c", "exit 0; touch x"]);
        assert_eq!(out.status.code(), Some(0), "{profile}: {out:?}");
        assert!(
            !dir.path().join("x").exists(),
            "{profile}: the script was split"
        );
        let out = exec_words(dir.path(), &extra, &["printf", "%s|", "it's", "$HOME", "*"]);
        assert_eq!(text(&out.stdout), "it's|$HOME|*|", "{profile}: {out:?}");
        let out = exec_words(dir.path(), &extra, &["sh", "-c", "exit 5"]);
        assert_eq!(out.status.code(), Some(5), "{profile}: {out:?}");
        // One word is still a shell script.
        let out = exec_words(dir.path(), &extra, &["echo one; echo two"]);
        assert_eq!(text(&out.stdout), "one\ntwo\n", "{profile}: {out:?}");
    }
}

/// tack in a directory of its own (hard-linked, so the test copies no
/// 100 MB binary), with `beside` as the `tack-sandbox-init` next to it.
fn doctor_init_with(beside: impl FnOnce(&Path)) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let linked = dir.path().join("tack");
    let real = Path::new(env!("CARGO_BIN_EXE_tack"));
    if std::fs::hard_link(real, &linked).is_err() {
        std::fs::copy(real, &linked).unwrap();
    }
    beside(dir.path());
    let out = Command::new(&linked)
        .args(["doctor", "--json"])
        .env_remove("TACK_SANDBOX_INIT")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_small_init_beside_tack_serves_and_spawns_only_when_it_is_of_the_same_build() {
    use std::os::unix::fs::PermissionsExt;
    // A stale init (another build id) is left alone: tack serves itself.
    let stale = doctor_init_with(|dir| {
        let init = dir.join("tack-sandbox-init");
        std::fs::write(&init, "#!/bin/sh\necho 0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755)).unwrap();
    });
    assert!(
        stale["session_init"].as_str().unwrap().ends_with("/tack"),
        "{stale}"
    );
    // ... and the spawner is a copy of tack.
    assert_eq!(stale["spawner"]["program"], Value::Null, "{stale}");
    // One of the same build (tack's own binary answers with the same id)
    // is preferred over exec'ing tack itself.
    let same = doctor_init_with(|dir| {
        let init = dir.join("tack-sandbox-init");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_tack"), &init).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_tack"), &init).unwrap();
        }
    });
    for role in [&same["session_init"], &same["spawner"]["program"]] {
        assert!(
            role.as_str().unwrap().ends_with("/tack-sandbox-init"),
            "{same}"
        );
    }
    // With none beside it, tack is its own.
    let none = doctor_init_with(|_| {});
    assert!(
        none["session_init"].as_str().unwrap().ends_with("/tack"),
        "{none}"
    );
    assert_eq!(none["spawner"]["program"], Value::Null, "{none}");
}

/// Under strict, the credentials in the home directory are out of sight:
/// a command has no network to use them with, only the model to show them
/// to. Under workspace-write only tack's own keys are; the root of the
/// filesystem is no workspace under any profile.
#[test]
fn credentials_are_hidden_and_the_root_is_no_workspace() {
    if !strict_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (file, secret) in [
        (".ssh/id_ed25519", "ssh-secret"),
        (".config/tack/env", "KEY=tack-secret"),
    ] {
        std::fs::create_dir_all(h.join(file).parent().unwrap()).unwrap();
        std::fs::write(h.join(file), secret).unwrap();
    }
    let workspace = h.join("project");
    std::fs::create_dir(&workspace).unwrap();
    let script = format!(
        "cat {0}/.ssh/id_ed25519; cat {0}/.config/tack/env; echo done",
        h.display()
    );
    let run = |profile: &str, workspace: &Path| {
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(["sandbox", "exec", "--profile", profile, "--workspace"])
            .arg(workspace)
            .args(["--", &script])
            .env("HOME", h)
            .env_remove("TACK_SANDBOX_DISABLE")
            .output()
            .unwrap()
    };
    let strict = run("strict", &workspace);
    let stdout = text(&strict.stdout);
    assert!(stdout.contains("done"), "{strict:?}");
    assert!(!stdout.contains("secret"), "{stdout}");

    let (doctor, _) = doctor_json(None);
    if doctor["profiles"]["workspace-write"]["available"] == Value::Bool(true) {
        let write = run("workspace-write", &workspace);
        let stdout = text(&write.stdout);
        assert!(
            stdout.contains("ssh-secret") && !stdout.contains("tack-secret"),
            "{write:?}"
        );
    }

    let root = run("strict", Path::new("/"));
    assert_eq!(root.status.code(), Some(2), "{root:?}");
    assert!(
        text(&root.stderr).contains("`/` is the root of the filesystem"),
        "{root:?}"
    );
}

/// The system tmp, or a directory holding `$TMPDIR`, is no workspace: it
/// holds other programs' sockets and every trial's files, which a writable
/// workspace would give the command. Refused when the arguments are read.
#[test]
fn the_system_tmp_and_what_holds_tmpdir_are_no_workspace() {
    let out = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["sandbox", "exec", "--workspace", "/tmp", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("holds /tmp"), "{out:?}");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tmpdir = dir.path().join("t");
    std::fs::create_dir(&tmpdir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["sandbox", "exec", "--workspace"])
        .arg(dir.path())
        .args(["--", "true"])
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains(&format!("holds {}", tmpdir.display())),
        "{out:?}"
    );
}
