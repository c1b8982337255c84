//! The init of a trial's sandbox: pid 1 of the trial's pid namespace,
//! inside its user, mount (and network) namespaces and behind its mounts,
//! exec'd fresh (so single-threaded) by [`super::Session::start`]. Once
//! its walls are up it locks itself down (the bounding set, the image's
//! user, no_new_privs, the trial's Landlock ruleset, the seccomp filters),
//! so that every command it starts inherits the lockdown: a command is then
//! started with `posix_spawn` (a vfork, no copy of the init's memory and
//! nothing to do between fork and exec) where a fork that confined itself
//! cost a trial's five commands more CPU than bash's own start. It kills
//! each command's process group when it ends or runs out of time, reaps
//! whatever is orphaned to it, and reports. When tack's end of the socket
//! closes, it kills everything and exits, and the namespace goes with it.
//!
//! Sharing the commands' Landlock domain and filters gives them no hold on
//! the init: it is pid 1 of their pid namespace (a signal from inside
//! without a handler is dropped), not dumpable, and ptrace is filtered.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};

use super::wire::{FromInit, ToInit};
use crate::child::{check, restrict_self};
use crate::ipc;
use crate::plan::InitArgs;
use crate::seccomp;
use crate::supervise::kill_process_group;
use seccompiler::BpfProgram;

/// What the init knows of a running command, by the pid of its leader.
struct Running {
    id: u64,
    deadline: Instant,
    timed_out: bool,
    /// Readable once the leader has ended.
    pidfd: OwnedFd,
}

/// Serves until tack closes the socket; never returns.
pub(crate) fn serve(args: &InitArgs) -> ! {
    // SAFETY: the descriptors were handed over by the parent's plan and are
    // owned by nothing else in this fresh process.
    #[allow(unsafe_code)]
    let socket = unsafe { OwnedFd::from_raw_fd(args.socket) };
    if let Some(setup) = &args.setup
        && let Err(error) = enter(setup, args.ruleset)
    {
        eprintln!("tack sandbox init: {error}");
        std::process::exit(1)
    }
    let code = match Init::new(args, &socket) {
        Ok(mut init) => {
            let _ = ipc::send(socket.as_fd(), &FromInit::Ready, &[]);
            init.run(&socket);
            0
        }
        Err(error) => {
            eprintln!("tack sandbox init: {error}");
            1
        }
    };
    std::process::exit(code)
}

struct Init {
    /// The session's private tmp, as this process got it (TMPDIR, TMP,
    /// TEMP): every command gets it.
    tmp: Vec<(String, String)>,
    running: HashMap<u32, Running>,
}

impl Init {
    fn new(args: &InitArgs, socket: &OwnedFd) -> std::io::Result<Init> {
        // SAFETY: as for the socket above.
        #[allow(unsafe_code)]
        let ruleset = args.ruleset.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        for fd in ruleset
            .iter()
            .map(AsRawFd::as_raw_fd)
            .chain([socket.as_raw_fd()])
        {
            close_on_exec(fd)?;
        }
        // Not dumpable: a command cannot read the init's memory through
        // /proc without CAP_SYS_PTRACE over it (and ptrace is filtered).
        // SAFETY: prctl(PR_SET_DUMPABLE) takes integer arguments only.
        #[allow(unsafe_code)]
        check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } as libc::c_long)?;
        let filters = seccomp::filters(args.sockets, args.set_id).map_err(std::io::Error::other)?;
        let tmp = ["TMPDIR", "TMP", "TEMP"]
            .into_iter()
            .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
            .collect();
        lock_down(
            ruleset.as_ref().map(AsRawFd::as_raw_fd),
            &filters,
            args.set_id,
            args.user,
        )?;
        Ok(Init {
            tmp,
            running: HashMap::new(),
        })
    }

    fn run(&mut self, socket: &OwnedFd) {
        let mut buffer = vec![0u8; ipc::MAX_MESSAGE];
        loop {
            let wait = self.until_next_deadline();
            let mut fds = vec![PollFd::new(socket, PollFlags::IN)];
            fds.extend(
                self.running
                    .values()
                    .map(|r| PollFd::new(&r.pidfd, PollFlags::IN)),
            );
            match poll(&mut fds, Some(&timespec(wait))) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
            let request = fds[0].revents().intersects(PollFlags::IN | PollFlags::HUP);
            drop(fds);
            if request {
                match ipc::receive::<ToInit>(socket.as_fd(), &mut buffer) {
                    Ok(Some((request, fds))) => self.handle(socket, request, fds),
                    Ok(None) | Err(_) => break,
                }
            }
            self.time_out();
            self.reap(socket);
        }
        for pid in self.running.keys() {
            kill_process_group(*pid);
        }
        std::process::exit(0)
    }

    fn handle(&mut self, socket: &OwnedFd, request: ToInit, fds: Vec<OwnedFd>) {
        match request {
            ToInit::Run {
                id,
                script,
                cwd,
                env,
                timeout_ms,
            } => {
                let reply = match self.start(&script, &cwd, &env, fds) {
                    Ok((pid, pidfd)) => {
                        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
                        let running = Running {
                            id,
                            deadline,
                            timed_out: false,
                            pidfd,
                        };
                        self.running.insert(pid, running);
                        FromInit::Started { id }
                    }
                    Err(error) => FromInit::Failed {
                        id,
                        message: format!("could not start `bash` in {}: {error}", cwd.display()),
                    },
                };
                let _ = ipc::send(socket.as_fd(), &reply, &[]);
            }
            ToInit::Kill { id } => {
                if let Some(pid) = self.pid_of(id) {
                    kill_process_group(pid);
                }
            }
        }
    }

    fn pid_of(&self, id: u64) -> Option<u32> {
        self.running
            .iter()
            .find_map(|(pid, running)| (running.id == id).then_some(*pid))
    }

    /// Starts `bash -c script` in a process group of its own; it inherits
    /// the init's lockdown. No `pre_exec`: the standard library then starts
    /// it with `posix_spawn`.
    fn start(
        &self,
        script: &str,
        cwd: &std::path::Path,
        env: &[(String, String)],
        fds: Vec<OwnedFd>,
    ) -> std::io::Result<(u32, OwnedFd)> {
        let [stdout, stderr]: [OwnedFd; 2] = fds
            .try_into()
            .map_err(|_| std::io::Error::other("a command came without its output pipes"))?;
        let path = env
            .iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .map_or("/usr/bin:/bin", |(_, value)| value.as_str());
        let mut command = Command::new(crate::local::find_in_path("bash", path));
        command
            .arg0("bash")
            .arg("-c")
            .arg(script)
            .current_dir(cwd)
            .env_clear()
            .envs(
                env.iter()
                    .chain(&self.tmp)
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .process_group(0);
        let pid = command.spawn()?.id();
        let pidfd = rustix::process::Pid::from_raw(pid.cast_signed())
            .ok_or(rustix::io::Errno::SRCH)
            .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()));
        match pidfd {
            Ok(pidfd) => Ok((pid, pidfd)),
            Err(errno) => {
                // Unwatched, its end would be found late: stop it now.
                kill_process_group(pid);
                Err(errno.into())
            }
        }
    }

    /// Kills the groups of commands past their deadline.
    fn time_out(&mut self) {
        let now = Instant::now();
        for (pid, running) in &mut self.running {
            if !running.timed_out && running.deadline <= now {
                running.timed_out = true;
                kill_process_group(*pid);
            }
        }
    }

    /// Reaps every child that ended: a command's leader is reported (after
    /// its group is killed); anything else was orphaned to this pid 1.
    fn reap(&mut self, socket: &OwnedFd) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status to our stack variable.
            #[allow(unsafe_code)]
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            let pid = pid.cast_unsigned();
            if let Some(running) = self.running.remove(&pid) {
                kill_process_group(pid);
                let reply = FromInit::Exited {
                    id: running.id,
                    status,
                    timed_out: running.timed_out,
                };
                let _ = ipc::send(socket.as_fd(), &reply, &[]);
            }
        }
    }

    /// How long to wait for a request or an ended command: until the next
    /// deadline, and at most a second, to reap orphans now and then.
    fn until_next_deadline(&self) -> Duration {
        let tick = Duration::from_secs(1);
        self.running
            .values()
            .filter(|r| !r.timed_out)
            .map(|r| r.deadline.saturating_duration_since(Instant::now()))
            .min()
            .map_or(tick, |left| left.min(tick))
    }
}

/// Makes the mounts of an image's filesystem, enters the working
/// directory and adds the Landlock rules for what only exists now.
fn enter(setup: &crate::plan::InitSetup, ruleset: Option<i32>) -> std::io::Result<()> {
    for (index, step) in setup.mounts.iter().enumerate() {
        crate::mounts::mount(step).map_err(|e| {
            std::io::Error::new(e.kind(), format!("mount step {index} ({step:?}): {e}"))
        })?;
    }
    for fd in &setup.reach {
        // SAFETY: the descriptor was given to this process for the mounts
        // (InitSetup::reach) and nothing else holds it.
        #[allow(unsafe_code)]
        drop(unsafe { OwnedFd::from_raw_fd(*fd) });
    }
    if let Some(cwd) = &setup.cwd {
        // SAFETY: chdir reads a NUL-terminated path.
        #[allow(unsafe_code)]
        check(unsafe { libc::chdir(cwd.as_ptr()) } as libc::c_long)?;
    }
    if let Some(ruleset) = ruleset {
        for rule in &setup.late_rules {
            crate::child::add_rule(ruleset, &rule.path, rule.access)?;
        }
    }
    Ok(())
}

/// The init, once its walls are up, before it starts any command: the
/// bounding set, the image's user, no_new_privs, the trial's Landlock
/// domain and the seccomp filters; every command inherits them. (The
/// session, away from tack's terminal, is its parent's: child.rs.)
fn lock_down(
    ruleset: Option<i32>,
    filters: &[&'static BpfProgram],
    set_id: seccomp::SetIdFiles,
    user: Option<(u32, u32)>,
) -> std::io::Result<()> {
    crate::caps::drop_bounding(set_id)?;
    if let Some((uid, gid)) = user {
        crate::caps::become_user(uid, gid)?;
    }
    // SAFETY: prctl takes no pointers.
    #[allow(unsafe_code)]
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
    }
    if let Some(ruleset) = ruleset {
        restrict_self(ruleset)?;
    }
    for filter in filters {
        seccompiler::apply_filter(filter).map_err(std::io::Error::other)?;
    }
    Ok(())
}

fn close_on_exec(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl(F_SETFD) changes only the descriptor's flags.
    #[allow(unsafe_code)]
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } as libc::c_long)
}

fn timespec(wait: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec {
        tv_sec: wait.as_secs() as i64,
        tv_nsec: i64::from(wait.subsec_nanos()),
    }
}
