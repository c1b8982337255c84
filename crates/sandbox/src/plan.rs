//! Turns a [`Confinement`] into a [`ChildPlan`]: everything that allocates
//! or touches the filesystem happens here, in the parent, before the fork.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tack_protocol::SandboxProfile;

use crate::child::{ChildPlan, LateRule, MountStep, Node, Step};
use crate::limits::{self, PidsCgroup};
use crate::probe::{Probe, user_ns_plan};
use crate::seccomp::SetIdFiles;
use crate::setup_error::{SetupError, c_path};
use crate::{Confinement, landlock, places, seccomp};
pub use tmps::SHARED_TMPS;
pub(crate) use tmps::probe_cover;
pub(crate) use tmps::{PrivateTmp, tmp_root};
use tmps::{ShownTmp, TmpCover, cover_steps, tack_roots, tmp_covers, tmp_env};

mod tmps;

/// A confined command, ready to spawn. Dropping it removes the private
/// tmp directory and the pids cgroup: keep it until the command is done.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Taken by the command's `pre_exec` closure, so that dropping the
    /// command closes the parent's copies of the plan's descriptors.
    pub plan: Option<Arc<ChildPlan>>,
    /// Extra environment: TMPDIR, TMP and TEMP.
    pub env: Vec<(String, String)>,
    failure: std::io::PipeReader,
    mount_targets: Vec<String>,
    _cgroup: Option<PidsCgroup>,
    _tmp: PrivateTmp,
}

impl Prepared {
    /// The setup step the child reported failing, if it got that far
    /// (otherwise the failure was exec itself).
    pub fn failed_step(&mut self) -> Option<String> {
        let mut report = [0u8; 2];
        if !matches!(self.failure.read(&mut report), Ok(2)) {
            return None;
        }
        let index = usize::from(report[1]);
        Some(match Step::from_byte(report[0])? {
            Step::Mount => format!(
                "mount step {index}: {}",
                self.mount_targets.get(index).map_or("?", String::as_str)
            ),
            step => format!("{step:?} (#{index})"),
        })
    }
}

fn canonical_writable(path: &Path) -> Result<PathBuf, SetupError> {
    let canonical = std::fs::canonicalize(path).map_err(|source| SetupError::WritablePath {
        path: path.to_path_buf(),
        source,
    })?;
    // Writable beneath `/` is the whole machine: no confinement at all.
    if canonical.parent().is_none() {
        return Err(SetupError::RootWritable(path.to_path_buf()));
    }
    Ok(canonical)
}

fn absolute_cwd(cwd: &Path) -> Result<PathBuf, SetupError> {
    std::path::absolute(cwd).map_err(|source| SetupError::Cwd {
        path: cwd.to_path_buf(),
        source,
    })
}

/// Absolute, symlink-free paths that exist; missing ones are skipped
/// (a `.git` that is not there needs no protecting).
fn existing(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

pub(crate) fn prepare(
    confinement: &Confinement,
    cwd: &Path,
    probe: &Probe,
) -> Result<Prepared, SetupError> {
    let tmp = PrivateTmp::new()?;
    if let Some(image) = &confinement.image {
        return prepare_in_image(confinement, image, cwd, probe, tmp);
    }
    let own_netns = confinement.own_network_namespace();
    let shown = ShownTmp::new(confinement, tmp.path())?;
    let confinement = shown.confinement.as_ref().unwrap_or(confinement);
    let roots = tack_roots(confinement);
    let writable = host_writable(confinement, &tmp, &roots)?;
    let sealed = existing(&confinement.sealed);
    let scratch = shown
        .scratch
        .as_deref()
        .or(writable.last().map(PathBuf::as_path))
        .unwrap_or(tmp.path());
    let mut placed = places::plan(confinement, scratch, &sealed)?.unwrap_or_default();
    let new_root = std::mem::take(&mut placed.steps);
    let covers = tmp_covers(confinement, &writable, &roots, &tmp, !new_root.is_empty())?;
    let (mounts, mount_targets, shm) = mount_steps(
        confinement,
        &writable,
        new_root,
        &placed.writable_at,
        &covers,
    )?;
    // Every command's tmp lives in the tmp root: sealed, so that no command
    // reads another's. A root in a covered directory is sealed by its cover,
    // one under a tmp shown in its place is out of sight, and their parents
    // are not listed entry by entry in the rules.
    let covered: Vec<&Path> = covers.iter().map(TmpCover::at).collect();
    let sealed_or_tmp: Vec<PathBuf> = (sealed.iter().cloned())
        .chain(existing(&[tmp_root()]))
        .filter(|root| !covered.iter().any(|dir| root.starts_with(dir)))
        .filter(|root| !confinement.covered_by_tmp(root))
        .collect();
    let paths = LandlockPaths {
        writable: &writable,
        sealed: &sealed_or_tmp,
        placed: &placed,
        covered: &covered,
    };
    let (built, late_rules) = landlock_rules(probe, confinement, &paths, shm)?;
    let (cgroup, cgroup_procs) = pids_cgroup(probe, confinement)?;
    let (failure, failure_write) = std::io::pipe().map_err(SetupError::Pipe)?;
    let pid_max = probe.namespace_pid_max.then(|| {
        limits::namespace_pid_max(&confinement.limits)
            .to_string()
            .into_bytes()
    });
    let plan = ChildPlan {
        failure: Some(OwnedFd::from(failure_write)),
        cgroup_procs,
        rlimits: limits::rlimits(&confinement.limits),
        pid_namespace: true,
        pid_max,
        mounts,
        // A command started in a placed directory starts where it is shown.
        cwd: Some(c_path(&confinement.guest_path(&absolute_cwd(cwd)?))?),
        mount_proc: true,
        late_rules,
        proc_access: built.proc_access,
        landlock: Some(built.ruleset),
        seccomp: seccomp::filters(sockets(confinement), SetIdFiles::Refused)?.to_vec(),
        set_id: SetIdFiles::Refused,
        ..user_ns_plan(namespaces(own_netns))
    };
    Ok(Prepared {
        plan: Some(Arc::new(plan)),
        env: tmp_env(confinement, &writable),
        failure,
        mount_targets,
        _cgroup: cgroup,
        _tmp: tmp,
    })
}

/// The host paths a command may write, made canonical: the confinement's
/// (but those a tmp shown in their place covers) and its private tmp.
fn host_writable(
    confinement: &Confinement,
    tmp: &PrivateTmp,
    roots: &[PathBuf],
) -> Result<Vec<PathBuf>, SetupError> {
    let mut writable = Vec::new();
    // The shared tmps and tack's roots hold what is not the command's: a
    // writable path holding one would give it all.
    let shared = SHARED_TMPS.map(PathBuf::from);
    let others = || roots.iter().chain(&shared);
    for path in confinement.writable.iter().map(PathBuf::as_path) {
        let canonical = canonical_writable(path)?;
        if let Some(holds) = others().find(|other| other.starts_with(&canonical)) {
            return Err(SetupError::WritableHoldsOthers {
                path: path.to_path_buf(),
                holds: holds.clone(),
            });
        }
        if !confinement.covered_by_tmp(&canonical) {
            writable.push(canonical);
        }
    }
    if confinement.tmp_at.is_none() {
        writable.push(canonical_writable(tmp.path())?);
    }
    Ok(writable)
}

/// The namespaces of a command (on the host, or in an image's filesystem,
/// whose user namespace the child enters first). Its own IPC namespace too:
/// the host's (and other trials') System V and POSIX shared memory,
/// semaphores and queues are out of reach.
fn namespaces(own_netns: bool) -> libc::c_int {
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if own_netns {
        flags | libc::CLONE_NEWNET
    } else {
        flags
    }
}

/// A command in an image's filesystem ([`crate::ImageRoot`]): its own
/// user namespace over a range of ids, the image's overlay as its root
/// (mounted on a directory of its private tmp, which is otherwise unused:
/// the image's /tmp is its tmp), and everything beneath that root granted.
fn prepare_in_image(
    confinement: &Confinement,
    image: &crate::ImageRoot,
    cwd: &Path,
    probe: &Probe,
    tmp: PrivateTmp,
) -> Result<Prepared, SetupError> {
    tmp.open_to_image_root()?;
    let scratch = tmp.path().join("root");
    std::fs::create_dir(&scratch).map_err(|source| SetupError::CreateDir {
        path: scratch.clone(),
        source,
    })?;
    let crate::image::ImageMounts {
        steps,
        reach,
        overlay,
    } = crate::image::mount_steps(confinement, image, &scratch)?;
    let (mounts, mount_targets): (Vec<MountStep>, Vec<String>) = steps.into_iter().unzip();
    let abi = probe.landlock_abi.ok_or(SetupError::NoLandlock)?;
    let built = landlock::build_for_image(abi, confinement.tcp_connect.as_deref())?;
    let late_rules = vec![
        LateRule {
            path: c"/".to_owned(),
            access: built.root_access,
        },
        LateRule {
            path: c"/dev/shm".to_owned(),
            access: built.shm_access,
        },
    ];
    let (cgroup, cgroup_procs) = pids_cgroup(probe, confinement)?;
    let (failure, failure_write) = std::io::pipe().map_err(SetupError::Pipe)?;
    let unshare_flags = namespaces(confinement.own_network_namespace());
    let pid_max = probe.namespace_pid_max.then(|| {
        limits::namespace_pid_max(&confinement.limits)
            .to_string()
            .into_bytes()
    });
    let plan = ChildPlan {
        failure: Some(OwnedFd::from(failure_write)),
        cgroup_procs,
        rlimits: limits::rlimits(&confinement.limits),
        unshare_flags,
        id_range: Some(crate::image::id_maps()),
        pid_namespace: true,
        pid_max,
        mounts,
        cwd: Some(c_path(&confinement.guest_path(&absolute_cwd(cwd)?))?),
        // Mounted among the steps, before the host's root goes.
        mount_proc: false,
        late_rules,
        proc_access: built.proc_access,
        landlock: Some(built.ruleset),
        seccomp: seccomp::filters(sockets(confinement), SetIdFiles::Allowed)?.to_vec(),
        set_id: SetIdFiles::Allowed,
        user: image.user.map(|user| (user.uid, user.gid)),
        reach,
        host_overlay: Some(overlay),
        ..ChildPlan::default()
    };
    let env = ["TMPDIR", "TMP", "TEMP"]
        .map(|name| (name.to_string(), "/tmp".to_string()))
        .to_vec();
    Ok(Prepared {
        plan: Some(Arc::new(plan)),
        env,
        failure,
        mount_targets,
        _cgroup: cgroup,
        _tmp: tmp,
    })
}

/// What a trial's sandbox init is told when it starts: where its socket
/// to tack and its Landlock ruleset are, and which sockets its commands may
/// make (it compiles their seccomp filters itself).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct InitArgs {
    pub socket: i32,
    pub ruleset: Option<i32>,
    pub sockets: seccomp::Sockets,
    /// Whether its commands may make set-id files (on the host they may not).
    #[serde(default)]
    pub set_id: SetIdFiles,
    /// In an image's filesystem, the mounts the init makes itself once it
    /// runs: it is a host program, and the image has none of the libraries
    /// it loads, so it is exec'd before the host's root goes.
    #[serde(default)]
    pub setup: Option<InitSetup>,
    /// The image user every command becomes.
    #[serde(default)]
    pub user: Option<(u32, u32)>,
}

/// The mounts, working directory and late Landlock rules of a command,
/// for the init to make.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct InitSetup {
    pub mounts: Vec<MountStep>,
    /// The descriptors the mounts reach the image through (`reach` of the
    /// plan), kept open across the exec and closed once mounted: a
    /// command must never hold one (it names a host directory).
    #[serde(default)]
    pub reach: Vec<i32>,
    pub cwd: Option<CString>,
    pub late_rules: Vec<LateRule>,
}

/// The plan of a trial's sandbox init ([`crate::session`]): the walls of a
/// command under `confinement`, entered once, with the lock-down left to
/// each command the init starts. `socket` stays open across its exec.
pub(crate) fn prepare_session(
    confinement: &Confinement,
    cwd: &Path,
    probe: &Probe,
    socket: i32,
) -> Result<(Prepared, InitArgs), SetupError> {
    use std::os::fd::AsRawFd;
    let mut prepared = prepare(confinement, cwd, probe)?;
    let plan = prepared
        .plan
        .as_mut()
        .and_then(Arc::get_mut)
        .ok_or(SetupError::PlanUsed)?;
    plan.defer_lock_down = true;
    plan.command_is_pid_one = plan.pid_namespace;
    plan.seccomp.clear();
    plan.inherit.push(socket);
    let reach: Vec<i32> = plan.reach.iter().map(|(_, fd)| fd.as_raw_fd()).collect();
    plan.inherit.extend(&reach);
    let setup = confinement.image.is_some().then(|| InitSetup {
        reach,
        mounts: std::mem::take(&mut plan.mounts),
        cwd: plan.cwd.take(),
        late_rules: std::mem::take(&mut plan.late_rules),
    });
    let args = InitArgs {
        socket,
        ruleset: plan.landlock.as_ref().map(AsRawFd::as_raw_fd),
        sockets: sockets(confinement),
        set_id: plan.set_id,
        setup,
        user: plan.user,
    };
    Ok((prepared, args))
}

/// What the Landlock rules of a command on the host are about.
struct LandlockPaths<'a> {
    writable: &'a [PathBuf],
    sealed: &'a [PathBuf],
    placed: &'a places::Placed,
    /// The directories covered by overlays ([`TmpCover`]).
    covered: &'a [&'a Path],
}

/// The Landlock ruleset, and the rules the child adds for mounts that only
/// exist there.
fn landlock_rules(
    probe: &Probe,
    confinement: &Confinement,
    paths: &LandlockPaths<'_>,
    shm: Option<CString>,
) -> Result<(landlock::Built, Vec<LateRule>), SetupError> {
    let abi = probe.landlock_abi.ok_or(SetupError::NoLandlock)?;
    let placed = paths.placed;
    let writable: Vec<PathBuf> = paths
        .writable
        .iter()
        .chain(&placed.host_writable)
        .cloned()
        .collect();
    let rules = landlock::Paths {
        writable: &writable,
        readable: &placed.host_readable,
        sealed: paths.sealed,
        rebuilt: &placed.rebuilt,
    };
    let built = landlock::build(abi, &rules, confinement.tcp_connect.as_deref())?;
    let mut late_rules = Vec::new();
    if let Some(path) = shm {
        late_rules.push(LateRule {
            path,
            access: built.shm_access,
        });
    }
    // The devpts of the command's own is not the host's: the rules made
    // on the host's /dev/pts and /dev/ptmx do not reach it.
    if private_pts() {
        late_rules.push(LateRule {
            path: c"/dev/pts".to_owned(),
            access: built.pts_access,
        });
        late_rules.push(LateRule {
            path: c"/dev/ptmx".to_owned(),
            access: built.ptmx_access,
        });
    }
    // A cover holds only what the command may see of its directory, so one
    // rule on it stands for one per entry there (a rule costs an open and a
    // syscall, and /tmp may hold thousands). The host's rule on the
    // directory does not reach it: Landlock skips a covered mount point.
    for dir in paths.covered {
        late_rules.push(LateRule {
            path: c_path(dir)?,
            access: built.covered_access,
        });
    }
    // A root of the command's own is a tmpfs of the child's: the host
    // root's rule does not reach it.
    if !placed.rebuilt.is_empty() {
        late_rules.push(LateRule {
            path: c"/".to_owned(),
            access: built.root_access,
        });
    }
    Ok((built, late_rules))
}

/// The command's pids cgroup, if the machine offers them, and its
/// `cgroup.procs` for the child to join.
fn pids_cgroup(
    probe: &Probe,
    confinement: &Confinement,
) -> Result<(Option<PidsCgroup>, Option<OwnedFd>), SetupError> {
    let Some(base) = &probe.pids_cgroup else {
        return Ok((None, None));
    };
    let cgroup =
        PidsCgroup::create(base, confinement.limits.processes).map_err(SetupError::PidsCgroup)?;
    let procs = cgroup.procs().map_err(SetupError::CgroupProcs)?;
    Ok((Some(cgroup), Some(procs)))
}

/// Narrowed to ports, only TCP may leave; in its own network namespace
/// (`strict`) nothing can, so only AF_UNIX.
fn sockets(confinement: &Confinement) -> seccomp::Sockets {
    match (&confinement.tcp_connect, confinement.profile) {
        (Some(_), _) => seccomp::Sockets::UnixAndTcp,
        (None, SandboxProfile::Strict) => seccomp::Sockets::UnixOnly,
        (None, _) => seccomp::Sockets::Any,
    }
}

/// `paths` and, for those inside a placed host directory, the same place
/// at the placed path.
fn with_placed(confinement: &Confinement, paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut placed = Vec::new();
    for path in &paths {
        for placement in &confinement.placed {
            let Ok(host) = std::fs::canonicalize(&placement.host) else {
                continue;
            };
            if let Ok(rest) = path.strip_prefix(&host) {
                placed.push(placement.at.join(rest));
            }
        }
    }
    paths.into_iter().chain(placed).collect()
}

type MountSteps = (Vec<MountStep>, Vec<String>, Option<CString>);

/// The host's `/dev/shm`, which every confined command is given fresh (a
/// tmpfs of its own), covering whatever the host keeps there. One that is a
/// symlink (to `/run/shm`) is left alone.
pub(crate) fn private_shm() -> Option<&'static Path> {
    let shm = Path::new("/dev/shm");
    (shm.is_dir() && !shm.is_symlink()).then_some(shm)
}

/// Private propagation, the new root with the placements (if any),
/// everything read-only, the writable paths (and placements) made writable
/// again, the read-only paths bound read-only over them, hidden directories
/// covered, and a private `/dev/shm`. Read-only and hidden paths inside a
/// placed host directory are so at the placed path too (a placed
/// workspace's `.git`).
fn mount_steps(
    confinement: &Confinement,
    writable: &[PathBuf],
    new_root: Vec<(MountStep, String)>,
    writable_at: &[PathBuf],
    covers: &[TmpCover],
) -> Result<MountSteps, SetupError> {
    let mut steps = vec![MountStep::MakePrivate];
    let mut targets = vec!["make / private".to_string()];
    // In a new root, the covers are made while the host's root is still in
    // sight beneath it, their overlays reading the host's directories
    // there (see `TmpCover::lower`), before the step that lets it go.
    let in_new_root = !new_root.is_empty();
    for (step, target) in new_root {
        if matches!(step, MountStep::DropOldRoot) {
            cover_steps(covers, &mut steps, &mut targets)?;
        }
        steps.push(step);
        targets.push(target);
    }
    if !in_new_root {
        cover_steps(covers, &mut steps, &mut targets)?;
    }
    steps.push(MountStep::AllReadOnly);
    targets.push("/ read-only".to_string());
    for path in writable.iter().chain(writable_at) {
        steps.push(MountStep::Writable(c_path(path)?));
        targets.push(format!("{} writable", path.display()));
    }
    let in_sight = |path: &PathBuf| {
        !confinement.covered_by_tmp(path) && covers.iter().all(|cover| cover.shows(path))
    };
    for path in with_placed(confinement, existing(&confinement.read_only))
        .into_iter()
        .filter(in_sight)
    {
        steps.push(MountStep::ReadOnly(c_path(&path)?));
        targets.push(format!("{} read-only", path.display()));
    }
    for path in with_placed(confinement, existing(&confinement.hidden))
        .into_iter()
        .filter(in_sight)
    {
        if !confinement.host_path(&path).is_dir() {
            return Err(SetupError::HiddenNotADirectory(path));
        }
        steps.push(MountStep::Hide(c_path(&path)?));
        targets.push(format!("{} hidden", path.display()));
    }
    let shm = if let Some(shm) = private_shm() {
        if let Some(below) = writable.iter().find(|path| path.starts_with(shm)) {
            return Err(SetupError::BelowPrivateShm(below.clone()));
        }
        let path = c_path(shm)?;
        steps.push(MountStep::Tmpfs(path.clone()));
        targets.push("private /dev/shm".to_string());
        Some(path)
    } else {
        None
    };
    if private_pts() {
        steps.push(MountStep::Devpts(c"/dev/pts".to_owned()));
        targets.push("a devpts of its own on /dev/pts".to_string());
        steps.push(MountStep::Graft {
            target: c"/dev/ptmx".to_owned(),
            node: Node::File,
            source: Some(c"/dev/pts/ptmx".to_owned()),
            optional: false,
        });
        targets.push("its /dev/ptmx".to_string());
    }
    Ok((steps, targets, shm))
}

/// Whether a confined command on the host gets terminals of its own: a
/// devpts instance (`newinstance`) on /dev/pts, its ptmx on /dev/ptmx. The
/// host's are other people's terminals (an operator typing a password, the
/// terminal `tack chat` asks its approvals in): a command could read their
/// keystrokes and write text into them, and use up the host's pool.
fn private_pts() -> bool {
    Path::new("/dev/pts").is_dir() && Path::new("/dev/ptmx").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_never_writable() {
        for root in ["/", "/..", "/tmp/.."] {
            assert!(matches!(
                canonical_writable(Path::new(root)),
                Err(SetupError::RootWritable(_))
            ));
        }
        assert!(canonical_writable(Path::new("/tmp")).is_ok());
    }
}
