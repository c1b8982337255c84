//! The attempts. Each has a script, a check of whether it got through (by
//! its effect where there is one, not by its exit code), what is expected
//! of the `off` run, and what blocks it under `strict`.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use tack_sandbox::CommandOutput;

use crate::fixtures::{Env, Fixtures};

/// What the `off` run must show.
pub enum OffExpect {
    /// Unconfined, the attempt works: the sandbox is what stops it.
    Escapes,
    /// Blocked under every profile, by what is not the kernel's job here.
    AlsoBlocked(&'static str),
    /// Must never run unconfined.
    NotRun(&'static str),
}

type Script = fn(&Env, &Fixtures) -> String;
type Escaped = fn(&Env, &Fixtures, &CommandOutput) -> bool;

pub struct Attempt {
    pub name: &'static str,
    pub blocked_by: &'static str,
    pub script: Script,
    pub escaped: Escaped,
    pub off: OffExpect,
    pub needs: &'static [&'static str],
    pub timeout_secs: u64,
    /// Wait this long after the command before checking (late effects).
    pub settle_ms: u64,
    pub processes: Option<u64>,
    skip: fn(&Fixtures) -> Option<&'static str>,
    after: fn(&Fixtures),
}

impl Attempt {
    fn new(name: &'static str, blocked_by: &'static str, script: Script, escaped: Escaped) -> Self {
        Attempt {
            name,
            blocked_by,
            script,
            escaped,
            off: OffExpect::Escapes,
            needs: &[],
            timeout_secs: 20,
            settle_ms: 0,
            processes: None,
            skip: |_| None,
            after: |_| {},
        }
    }
    fn off(mut self, off: OffExpect) -> Self {
        self.off = off;
        self
    }
    fn needs(mut self, tools: &'static [&'static str]) -> Self {
        self.needs = tools;
        self
    }
    fn timeout(mut self, secs: u64) -> Self {
        self.timeout_secs = secs;
        self
    }
    fn settle(mut self, ms: u64) -> Self {
        self.settle_ms = ms;
        self
    }
    fn processes(mut self, n: u64) -> Self {
        self.processes = Some(n);
        self
    }
    fn skip_if(mut self, skip: fn(&Fixtures) -> Option<&'static str>) -> Self {
        self.skip = skip;
        self
    }
    fn after(mut self, after: fn(&Fixtures)) -> Self {
        self.after = after;
        self
    }

    pub fn skipped(&self, fixtures: &Fixtures) -> Option<&'static str> {
        (self.skip)(fixtures)
    }

    /// Removes what a run may have left outside its temp dir.
    pub fn cleanup(&self, env: &Env, fixtures: &Fixtures) {
        for path in env.global_paths(fixtures) {
            let _ = std::fs::remove_file(path);
        }
        (self.after)(fixtures);
    }
}

fn has(out: &CommandOutput, text: &str) -> bool {
    out.stdout.contains(text)
}

fn python(code: &str) -> String {
    format!(
        "python3 - <<'PY'\nimport ctypes, os, socket, struct, time\nlibc = ctypes.CDLL(None, use_errno=True)\n{code}\nPY"
    )
}

fn x86_64_only(_: &Fixtures) -> Option<&'static str> {
    (std::env::consts::ARCH != "x86_64").then_some("syscall numbers are for x86_64")
}

pub fn attempts() -> Vec<Attempt> {
    let mut all = filesystem();
    all.extend(hidden_and_git());
    all.extend(network());
    all.extend(processes());
    all.extend(privileges());
    all
}

fn filesystem() -> Vec<Attempt> {
    const RO_LL: &str = "read-only mounts + Landlock";
    vec![
        Attempt::new(
            "write /etc",
            RO_LL,
            |e, _| format!("echo pwned > {}", e.etc_file().display()),
            |e, _, _| e.etc_file().exists(),
        ),
        Attempt::new(
            "write $HOME",
            RO_LL,
            |e, _| format!("echo pwned > \"$HOME/.tack-escape-{}\"", e.tag),
            |e, f, _| f.home.join(format!(".tack-escape-{}", e.tag)).exists(),
        ),
        Attempt::new(
            "write /tmp outside",
            RO_LL,
            |e, _| format!("echo pwned > /tmp/tack-escape-{}", e.tag),
            |e, _, _| Path::new(&format!("/tmp/tack-escape-{}", e.tag)).exists(),
        ),
        Attempt::new(
            "../ traversal",
            RO_LL,
            |e, _| format!("echo pwned > ../escape-{}", e.tag),
            |e, _, _| e.root.join(format!("escape-{}", e.tag)).exists(),
        ),
        Attempt::new(
            "symlink out of workspace",
            RO_LL,
            |e, _| format!("ln -s {} link && echo pwned >> link", e.target().display()),
            |e, _, _| e.target_text().contains("pwned"),
        ),
        Attempt::new(
            "ln -s /etc x; write x/y",
            RO_LL,
            |e, _| format!("ln -s /etc x && echo pwned > x/tack-escape-{}", e.tag),
            |e, _, _| e.etc_file().exists(),
        ),
        Attempt::new(
            "hard link to outside file",
            "separate mounts (EXDEV) + Landlock refer",
            |e, _| format!("ln {} hard && echo pwned >> hard", e.target().display()),
            |e, _, _| e.target_text().contains("pwned"),
        ),
        Attempt::new(
            "/proc/self/root/etc write",
            RO_LL,
            |e, _| format!("echo pwned > /proc/self/root/etc/tack-escape-{}", e.tag),
            |e, _, _| e.etc_file().exists(),
        ),
        Attempt::new(
            "/proc/<outside pid>/root write",
            "pid namespace + fresh /proc (outside pids invisible) + read-only mounts + Landlock",
            |e, f| {
                format!(
                    "echo pwned > /proc/{}/root{}/p1",
                    f.canary_pid(),
                    e.outside.display()
                )
            },
            |e, _, _| e.outside.join("p1").exists(),
        ),
        Attempt::new(
            "write host /dev/shm",
            "private /dev/shm tmpfs",
            |e, _| format!("echo pwned > /dev/shm/tack-escape-{}", e.tag),
            |e, _, _| Path::new(&format!("/dev/shm/tack-escape-{}", e.tag)).exists(),
        ),
        Attempt::new(
            "chmod outside file",
            "read-only mounts (Landlock does not cover chmod)",
            |e, _| format!("chmod 0777 {}", e.target().display()),
            |e, _, _| mode(&e.target()) == 0o777,
        ),
        Attempt::new(
            "touch -d (utimes) outside",
            "read-only mounts",
            |e, _| format!("touch -d 2001-01-01 {}", e.target().display()),
            |e, _, _| modified_before_2002(&e.target()),
        ),
        Attempt::new(
            "truncate outside file",
            RO_LL,
            |e, _| format!("truncate -s 0 {}", e.target().display()),
            |e, _, _| e.target_text().is_empty(),
        ),
        Attempt::new(
            "mv workspace file outside",
            RO_LL,
            |e, _| format!("mv file.txt {}/moved.txt", e.outside.display()),
            |e, _, _| e.outside.join("moved.txt").exists(),
        ),
        Attempt::new(
            "mv outside file in",
            RO_LL,
            |e, _| format!("mv {} stolen.txt", e.target().display()),
            |e, _, _| !e.target().exists(),
        ),
        Attempt::new(
            "rm outside file",
            RO_LL,
            |e, _| format!("rm -f {}", e.target().display()),
            |e, _, _| !e.target().exists(),
        ),
        Attempt::new(
            "mkdir outside",
            RO_LL,
            |e, _| format!("mkdir {}/newdir", e.outside.display()),
            |e, _, _| e.outside.join("newdir").exists(),
        ),
        Attempt::new(
            "mknod a device node",
            "user namespace (no CAP_MKNOD on the host)",
            |_, _| "mknod nullcopy c 1 3".to_string(),
            |e, _, _| {
                std::fs::metadata(e.ws.join("nullcopy"))
                    .is_ok_and(|m| m.file_type().is_char_device())
            },
        ),
        Attempt::new(
            "read the raw root block device",
            "Landlock (no read rule under /dev)",
            |_, f| {
                format!(
                    "head -c 512 {} | wc -c",
                    f.root_device.as_deref().unwrap_or("/dev/null")
                )
            },
            |_, _, out| out.stdout.trim() == "512",
        )
        .skip_if(|f| match &f.root_device {
            None => Some("no plain block device under /"),
            Some(dev) => std::fs::File::open(dev)
                .is_err()
                .then_some("this host already denies tack the device (device cgroup)"),
        }),
        Attempt::new(
            "write /proc/sys",
            "user namespace + Landlock",
            |_, _| "echo 1 > /proc/sys/vm/drop_caches && echo WROTE".to_string(),
            |_, _, out| has(out, "WROTE"),
        ),
    ]
}

fn hidden_and_git() -> Vec<Attempt> {
    const HIDDEN: &str = "empty tmpfs over the hidden dir";
    const GIT: &str = ".git bound read-only";
    vec![
        Attempt::new(
            "read hidden checks",
            HIDDEN,
            |e, _| format!("cat {}/solution.txt", e.hidden.display()),
            |e, _, out| has(out, &e.secret()),
        ),
        Attempt::new(
            "list hidden checks",
            HIDDEN,
            |e, _| format!("ls -a {}", e.hidden.display()),
            |_, _, out| has(out, "solution.txt"),
        ),
        Attempt::new(
            "hidden via /proc/self/root",
            HIDDEN,
            |e, _| format!("cat /proc/self/root{}/solution.txt", e.hidden.display()),
            |e, _, out| has(out, &e.secret()),
        ),
        Attempt::new(
            "umount the hidden cover",
            "seccomp (umount2) + Landlock (no mounts)",
            |e, _| {
                format!(
                    "umount {0}; umount -l {0}; cat {0}/solution.txt",
                    e.hidden.display()
                )
            },
            |e, _, out| has(out, &e.secret()),
        ),
        Attempt::new(
            "rewrite .git/HEAD",
            GIT,
            |_, _| "echo 'ref: refs/heads/evil' > .git/HEAD".to_string(),
            |e, _, _| {
                std::fs::read_to_string(e.ws.join(".git/HEAD"))
                    .unwrap_or_default()
                    .contains("evil")
            },
        ),
        Attempt::new(
            "add a git hook",
            GIT,
            |_, _| "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit".to_string(),
            |e, _, _| e.ws.join(".git/hooks/pre-commit").exists(),
        ),
        Attempt::new(
            "move .git away",
            ".git is a read-only mount point",
            |_, _| "mv .git moved-git".to_string(),
            |e, _, _| !e.ws.join(".git/HEAD").exists(),
        ),
    ]
}

fn network() -> Vec<Attempt> {
    const NET: &str = "seccomp (AF_INET denied) + network namespace";
    let tcp_hit: Escaped = |e, f, _| f.tcp_hits() > e.tcp_before;
    vec![
        Attempt::new("TCP to host 127.0.0.1 (/dev/tcp)", NET, |_, f| format!("exec 3<>/dev/tcp/127.0.0.1/{}", f.tcp_port), tcp_hit).settle(300),
        Attempt::new("TCP via python socket", NET, |_, f| python(&format!("socket.create_connection(('127.0.0.1', {}), timeout=3)", f.tcp_port)), tcp_hit).settle(300),
        Attempt::new("curl to host listener", NET, |_, f| format!("curl -s -m 3 http://127.0.0.1:{}/", f.tcp_port), tcp_hit).needs(&["curl"]).settle(300),
        Attempt::new("wget to host listener", NET, |_, f| format!("wget -q -T 3 -t 1 -O - http://127.0.0.1:{}/", f.tcp_port), tcp_hit).needs(&["wget"]).settle(300),
        Attempt::new("UDP send to host", NET, |_, f| python(&format!("socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {}))", f.udp_port)), |e, f, _| f.udp_hits() > e.udp_before).settle(300),
        Attempt::new("DNS query to a resolver", NET, |_, f| python(&dns_query(f.dns_port)), |_, _, out| has(out, "ANSWER 10.1.2.3")),
        Attempt::new(
            "UNIX socket of a daemon under /run",
            "/run hidden by default under strict (Landlock RESOLVE_UNIX needs ABI 9)",
            |e, _| python(&format!("s = socket.socket(socket.AF_UNIX)\ns.connect('{}')\nprint('CONNECTED')", e.run_socket().display())),
            |_, _, out| has(out, "CONNECTED"),
        )
        .skip_if(|_| (!Path::new("/run").is_dir()).then_some("no /run here")),
        Attempt::new("netlink socket", "seccomp (only AF_UNIX sockets)", |_, _| python("socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print('OPENED')"), |_, _, out| has(out, "OPENED")),
        Attempt::new("packet socket", "seccomp (only AF_UNIX sockets)", |_, _| python("socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0); print('OPENED')"), |_, _, out| has(out, "OPENED")),
    ]
}

fn dns_query(port: u16) -> String {
    format!(
        "q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)\n\
         for part in b'tack-escape.test'.split(b'.'):\n    q += bytes([len(part)]) + part\n\
         q += b'\\x00' + struct.pack('>HH', 1, 1)\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.settimeout(3)\n\
         s.sendto(q, ('127.0.0.1', {port}))\ndata, _ = s.recvfrom(512)\n\
         print('ANSWER', '.'.join(str(b) for b in data[-4:]))"
    )
}

fn processes() -> Vec<Attempt> {
    const SPAWN: &str = "n = 0\nfor i in range(400):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    n += 1\nprint('spawned', n)";
    vec![
        Attempt::new("spawn 400 sleepers (limit 64)", "pids cgroup / pid namespace pid_max", |_, _| python(SPAWN), |_, _, out| has(out, "spawned 400")).processes(64).timeout(30),
        Attempt::new("real fork bomb (limit 64)", "pids cgroup / pid_max, then the timeout kills its pid namespace", |_, _| ":(){ :|:& };:".to_string(), |_, _, out| out.duration > Duration::from_secs(30))
            .processes(64).timeout(5).off(OffExpect::NotRun("a real fork bomb must not run unbounded")),
        Attempt::new("setsid daemon outlives the command", "pid namespace: its init exits with the command", |e, _| format!("setsid sh -c 'sleep 1; echo late > {}/late' >/dev/null 2>&1 </dev/null & sleep 0.3; echo started", e.ws.display()), |e, _, _| e.ws.join("late").exists()).settle(2000),
        Attempt::new("background job outlives the command", "process-group kill", |e, _| format!("(sleep 1; echo late > {}/late) & echo started", e.ws.display()), |e, _, _| e.ws.join("late").exists())
            .settle(2000).off(OffExpect::AlsoBlocked("every profile's process group is killed when the command returns")),
        Attempt::new("outlive the timeout", "timeout kills the group", |_, _| "sleep 30".to_string(), |_, _, out| !out.timed_out || out.duration > Duration::from_secs(10))
            .timeout(1).off(OffExpect::AlsoBlocked("the timeout applies to every profile")),
        Attempt::new("1 GB of output", "output cap", |_, _| "head -c 1000000000 /dev/zero".to_string(), |_, _, out| !out.stdout_truncated || out.stdout.len() > 64 * 1024)
            .timeout(120).off(OffExpect::AlsoBlocked("the output cap applies to every profile")),
        Attempt::new("API key from the environment", "environment scrub", |_, _| "env".to_string(), |_, f, out| has(out, f.key))
            .off(OffExpect::AlsoBlocked("the environment is scrubbed for every profile")),
        Attempt::new("API key from /proc/<outside pid>/environ", "pid namespace + fresh /proc; Landlock ptrace scoping", |_, f| format!("tr '\\0' '\\n' < /proc/{}/environ", f.canary_pid()), |_, f, out| has(out, f.key)),
        Attempt::new("kill a process outside", "pid namespace; Landlock signal scoping", |_, f| format!("kill -9 {}", f.canary_pid()), |_, f, _| !f.canary_alive())
            .settle(200).after(Fixtures::respawn_canary),
        Attempt::new("kill -9 -1", "pid namespace; Landlock signal scoping", |_, f| format!("if [ \"$(readlink /proc/self/ns/pid)\" = '{}' ]; then echo UNSAFE; exit 99; fi; kill -9 -1; echo survived", f.host_pid_ns), |_, f, out| !f.canary_alive() || has(out, "UNSAFE"))
            .settle(200).off(OffExpect::NotRun("it would kill every process of this user, the test runner included")),
    ]
}

fn privileges() -> Vec<Attempt> {
    const SEC: &str = "seccomp";
    vec![
        Attempt::new("unshare -Ur", "seccomp (unshare)", |_, _| "unshare -U -r true && echo UNSHARED".to_string(), |_, _, out| has(out, "UNSHARED")).needs(&["unshare"]),
        Attempt::new("unshare(CLONE_NEWUSER) via ctypes", "seccomp (unshare)", |_, _| python("print('rc=%d' % libc.unshare(0x10000000))"), |_, _, out| has(out, "rc=0")),
        Attempt::new("mount a tmpfs", "seccomp (mount) + Landlock", |_, _| "mkdir m && mount -t tmpfs none m && umount m && echo MOUNTED".to_string(), |_, _, out| has(out, "MOUNTED")).needs(&["mount"]),
        Attempt::new("chroot", "seccomp (chroot)", |_, _| "chroot / true && echo CHROOTED".to_string(), |_, _, out| has(out, "CHROOTED")).needs(&["chroot"]),
        Attempt::new("nsenter (setns)", "seccomp (setns)", |_, _| "nsenter --target $$ --mount true && echo ENTERED".to_string(), |_, _, out| has(out, "ENTERED")).needs(&["nsenter"]),
        Attempt::new("setuid possible (NoNewPrivs)", "no_new_privs", |_, _| "grep NoNewPrivs /proc/self/status".to_string(), |_, _, out| has(out, "NoNewPrivs:\t0")),
        Attempt::new("setuid copy of id run as nobody", "user namespace (only our uid mapped) + no_new_privs", |_, _| "cp \"$(command -v id)\" sid && chmod 4755 sid && setpriv --reuid=65534 --regid=65534 --clear-groups ./sid -u".to_string(), |_, _, out| out.stdout.trim() == "0").needs(&["setpriv", "id"]),
        Attempt::new("strace", "seccomp (ptrace)", |_, _| "strace -f -o /dev/null true && echo TRACED".to_string(), |_, _, out| has(out, "TRACED")).needs(&["strace"]),
        Attempt::new("ptrace via ctypes", "seccomp (ptrace)", |_, _| python("print('rc=%d' % libc.ptrace(0, 0, 0, 0))"), |_, _, out| has(out, "rc=0")),
        Attempt::new("io_uring_setup", SEC, |_, _| python("p = ctypes.create_string_buffer(120)\nprint('fd=%d' % libc.syscall(425, 4, p))"), |_, _, out| has(out, "fd=") && !has(out, "fd=-1"))
            .skip_if(|f| x86_64_only(f).or_else(io_uring_disabled)),
        Attempt::new("bpf map create", SEC, |_, _| python("a = ctypes.create_string_buffer(struct.pack('IIII', 2, 4, 4, 1) + bytes(112))\nprint('fd=%d' % libc.syscall(321, 0, a, 128))"), |_, _, out| has(out, "fd=") && !has(out, "fd=-1"))
            .skip_if(x86_64_only),
        Attempt::new("add_key to a keyring", SEC, |_, _| python("print('key=%d' % libc.syscall(248, b'user', b'tack-escape', b'x', 1, -2))"), |_, _, out| has(out, "key=") && !has(out, "key=-1"))
            .skip_if(x86_64_only),
    ]
}

fn io_uring_disabled() -> Option<&'static str> {
    let value = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").unwrap_or_default();
    (value.trim() != "0" && !value.is_empty()).then_some("io_uring is disabled on this host")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o777)
}

fn modified_before_2002(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t < UNIX_EPOCH + Duration::from_secs(1_009_843_200))
}
