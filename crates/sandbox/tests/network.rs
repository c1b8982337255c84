//! The network narrowed to TCP ports (Landlock network rules): a confined
//! command or service reaches a listener on an allowed loopback port, and
//! nothing else — not another port, not UDP, not a bind of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use tack_sandbox::{
    CommandOutput, CommandSpec, Confinement, SandboxError, SandboxProfile, ServiceSpec, TestGate,
    run, spawn_service,
};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Whether port-limited network can be enforced here; otherwise skip,
/// saying why, unless `TACK_REQUIRE_SANDBOX=1` makes that a failure.
fn available() -> bool {
    let dir = std::env::temp_dir();
    let narrowed = Confinement::workspace_write(&dir).allowing_tcp_connect_only([1]);
    let gate = match tack_sandbox::check_confinement(&narrowed, tack_sandbox::probe()) {
        Ok(()) => TestGate::Run,
        Err(error) => tack_sandbox::gate_for(error.to_string()),
    };
    match gate {
        TestGate::Run => true,
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            false
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
}

fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// What reached `listener`: a connection still in its backlog (the client
/// may have gone) and the bytes it sent; `None` when nothing connected.
fn received(listener: &TcpListener) -> Option<String> {
    let (mut stream, _) = listener.accept().ok()?;
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    Some(text)
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

/// Connects to `$1` and sends a line; then tries `$2`, UDP, and a bind.
const PROBE_SCRIPT: &str = "\
    exec 3<>/dev/tcp/127.0.0.1/$1 && echo allowed-open && echo hello >&3; exec 3>&-; \
    exec 4<>/dev/tcp/127.0.0.1/$2 && echo other-open || echo other-refused; \
    exec 5<>/dev/udp/127.0.0.1/53 && echo udp-open || echo udp-refused; \
    python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0))' 2>/dev/null \
      && echo bind-open || echo bind-refused";

const EXPECTED: &str = "allowed-open\nother-refused\nudp-refused\nbind-refused\n";

#[tokio::test]
async fn a_command_reaches_the_allowed_port_only() {
    if !available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    for base in [
        Confinement::workspace_write(ws.path()),
        Confinement::strict(ws.path()),
    ] {
        let profile = base.profile;
        let ((allowed, allowed_port), (other, other_port)) = (listener(), listener());
        let confinement = base.allowing_tcp_connect_only([allowed_port]);
        let script = format!("set -- {allowed_port} {other_port}; {PROBE_SCRIPT}");
        let out = sh(&confinement, ws.path(), &script).await;
        assert_eq!(out.stdout, EXPECTED, "{profile:?}: {out:?}");
        assert_eq!(out.profile, profile);
        assert!(
            out.denials.iter().any(|d| d.contains("Permission denied")),
            "{out:?}"
        );
        assert_eq!(
            received(&allowed).as_deref(),
            Some("hello\n"),
            "{profile:?}"
        );
        assert_eq!(
            received(&other),
            None,
            "{profile:?}: the refused port saw a connection"
        );
    }
}

#[tokio::test]
async fn a_service_reaches_the_allowed_port_only() {
    if !available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let ((allowed, allowed_port), (other, other_port)) = (listener(), listener());
    let confinement =
        Confinement::workspace_write(ws.path()).allowing_tcp_connect_only([allowed_port]);
    let args = [
        "-c".to_string(),
        format!("{PROBE_SCRIPT}; echo done; cat"),
        "probe".to_string(),
        allowed_port.to_string(),
        other_port.to_string(),
    ];
    let spec = ServiceSpec {
        program: "bash",
        args: &args,
        cwd: ws.path(),
        env: &[],
        confinement: &confinement,
    };
    let mut service = spawn_service(&spec).unwrap();
    let mut lines = BufReader::new(service.stdout().unwrap()).lines();
    let mut seen = String::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line == "done" {
                break;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the service said nothing in time");
    assert_eq!(seen, EXPECTED);
    assert_eq!(received(&allowed).as_deref(), Some("hello\n"));
    assert_eq!(received(&other), None);
    service.kill().await.unwrap();
}

/// Nothing enforces ports under `off`: asking for them is an error, never
/// a command with the full network.
#[tokio::test]
async fn ports_under_off_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let off = Confinement::off().allowing_tcp_connect_only([8080]);
    let script = format!("touch {}", marker.display());
    let spec = CommandSpec {
        script: &script,
        cwd: dir.path(),
        env: &[],
        timeout: Duration::from_secs(5),
        output_limit: 1024,
        confinement: &off,
    };
    let error = run(&spec).await.unwrap_err();
    assert!(
        matches!(
            &error,
            SandboxError::Unavailable {
                profile: SandboxProfile::Off,
                ..
            }
        ),
        "{error}"
    );
    let args = ["-c".to_string(), script.clone()];
    let service = spawn_service(&ServiceSpec {
        program: "bash",
        args: &args,
        cwd: dir.path(),
        env: &[],
        confinement: &off,
    });
    assert!(service.is_err());
    assert!(!marker.exists());
}
