//! What the escape attempts aim at: listeners on the host's loopback (TCP,
//! UDP, a stub DNS server), a canary process outside the sandbox, and a
//! fresh workspace per run with files outside it to attack.

use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Fixtures {
    pub key: &'static str,
    pub tcp_port: u16,
    pub udp_port: u16,
    pub dns_port: u16,
    tcp_hits: Arc<AtomicUsize>,
    udp_hits: Arc<AtomicUsize>,
    canary: Mutex<Child>,
    pub host_pid_ns: String,
    /// The block device holding `/`, if it is a plain /dev node.
    pub root_device: Option<String>,
    pub home: PathBuf,
    runs: AtomicUsize,
}

impl Fixtures {
    pub fn start(key: &'static str) -> Fixtures {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dns = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fixtures = Fixtures {
            key,
            tcp_port: tcp.local_addr().unwrap().port(),
            udp_port: udp.local_addr().unwrap().port(),
            dns_port: dns.local_addr().unwrap().port(),
            tcp_hits: Arc::default(),
            udp_hits: Arc::default(),
            canary: Mutex::new(spawn_canary(key)),
            host_pid_ns: std::fs::read_link("/proc/self/ns/pid")
                .unwrap()
                .display()
                .to_string(),
            root_device: root_device(),
            home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from),
            runs: AtomicUsize::new(0),
        };
        let hits = fixtures.tcp_hits.clone();
        std::thread::spawn(move || {
            for mut stream in tcp.incoming().flatten() {
                hits.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        let hits = fixtures.udp_hits.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while udp.recv_from(&mut buf).is_ok() {
                hits.fetch_add(1, Ordering::SeqCst);
            }
        });
        std::thread::spawn(move || serve_dns(&dns));
        fixtures
    }

    pub fn tcp_hits(&self) -> usize {
        self.tcp_hits.load(Ordering::SeqCst)
    }

    pub fn udp_hits(&self) -> usize {
        self.udp_hits.load(Ordering::SeqCst)
    }

    pub fn canary_pid(&self) -> u32 {
        self.canary.lock().unwrap().id()
    }

    pub fn canary_alive(&self) -> bool {
        matches!(self.canary.lock().unwrap().try_wait(), Ok(None))
    }

    /// After an attempt that may have killed it.
    pub fn respawn_canary(&self) {
        let mut canary = self.canary.lock().unwrap();
        if !matches!(canary.try_wait(), Ok(None)) {
            *canary = spawn_canary(self.key);
        }
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        if let Ok(canary) = self.canary.get_mut() {
            let _ = canary.kill();
            let _ = canary.wait();
        }
    }
}

/// A process outside every sandbox, holding the API key in its
/// environment as tack would.
fn spawn_canary(key: &str) -> Child {
    Command::new("sleep")
        .arg("600")
        .env("TACK_ESCAPE_TEST_API_KEY", key)
        .spawn()
        .unwrap()
}

/// Answers every query with one A record, 10.1.2.3.
fn serve_dns(socket: &UdpSocket) {
    let mut buf = [0u8; 512];
    while let Ok((len, from)) = socket.recv_from(&mut buf) {
        if len < 12 {
            continue;
        }
        let mut reply = buf[..len].to_vec();
        reply[2] = 0x81; // response, recursion desired
        reply[3] = 0x80; // recursion available, no error
        reply[7] = 1; // one answer
        reply.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 1, 2, 3]);
        let _ = socket.send_to(&reply, from);
    }
}

fn root_device() -> Option<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        (mount.split(' ').nth(4) == Some("/"))
            .then(|| fs.split(' ').nth(1))
            .flatten()
            .filter(|dev| dev.starts_with("/dev/") && Path::new(dev).exists())
            .map(str::to_string)
    })
}

/// One run's fresh files: `root/ws` (the workspace, with `.git`),
/// `root/outside` (files to attack), `root/tasks` (the hidden checks).
pub struct Env {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub hidden: PathBuf,
    pub tag: String,
    pub tcp_before: usize,
    pub udp_before: usize,
    /// A "daemon" listening on a UNIX socket under /run, if /run exists.
    _daemon: Option<std::os::unix::net::UnixListener>,
}

impl Env {
    pub fn new(fixtures: &Fixtures) -> Env {
        let n = fixtures.runs.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{}-{n}", std::process::id());
        let dir = tempfile::Builder::new()
            .prefix("tack-escape-")
            .tempdir()
            .unwrap();
        let root = dir.path().to_path_buf();
        let ws = root.join("ws");
        let outside = root.join("outside");
        let hidden = root.join("tasks");
        for d in [&ws, &outside, &hidden, &ws.join(".git/hooks")] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Traversable by `nobody`, for the setuid attempt.
        for d in [&root, &ws] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("file.txt"), "mine\n").unwrap();
        std::fs::write(outside.join("target.txt"), "original\n").unwrap();
        std::fs::write(hidden.join("solution.txt"), format!("SOLUTION-{tag}\n")).unwrap();
        let daemon = Path::new("/run")
            .is_dir()
            .then(|| std::os::unix::net::UnixListener::bind(run_socket(&tag)).ok())
            .flatten();
        Env {
            _daemon: daemon,
            _dir: dir,
            root,
            ws,
            outside,
            hidden,
            tag,
            tcp_before: fixtures.tcp_hits(),
            udp_before: fixtures.udp_hits(),
        }
    }

    /// Files an `off` run may leave outside the temp dir, by unique name.
    pub fn global_paths(&self, fixtures: &Fixtures) -> Vec<PathBuf> {
        let name = format!("tack-escape-{}", self.tag);
        vec![
            PathBuf::from("/etc").join(&name),
            fixtures.home.join(format!(".{name}")),
            PathBuf::from("/tmp").join(&name),
            PathBuf::from("/dev/shm").join(&name),
            run_socket(&self.tag),
        ]
    }

    pub fn run_socket(&self) -> PathBuf {
        run_socket(&self.tag)
    }

    pub fn etc_file(&self) -> PathBuf {
        PathBuf::from("/etc").join(format!("tack-escape-{}", self.tag))
    }

    pub fn target(&self) -> PathBuf {
        self.outside.join("target.txt")
    }

    pub fn target_text(&self) -> String {
        std::fs::read_to_string(self.target()).unwrap_or_default()
    }

    pub fn secret(&self) -> String {
        format!("SOLUTION-{}", self.tag)
    }
}

fn run_socket(tag: &str) -> PathBuf {
    PathBuf::from(format!("/run/tack-escape-{tag}.sock"))
}
