//! The Landlock ruleset, built in the parent (it opens paths and allocates)
//! and enforced in the child with one raw `landlock_restrict_self`.
//!
//! Every filesystem right of the kernel's ABI is handled, as a hard
//! requirement: if the kernel cannot enforce a right we ask for, building
//! fails rather than quietly enforcing less. Granted:
//! - read and execute beneath each entry of `/` except `/dev` (so raw block
//!   devices cannot be read to get round hidden directories) and except the
//!   sealed directories (other trials' workspaces), and listing any
//!   directory;
//! - read and write on the harmless character devices and ptys;
//! - everything beneath the writable paths;
//! - in the child, for mounts that only exist there: everything on the
//!   private `/dev/shm`, read on the fresh `/proc`.
//!
//! With `tcp_connect` (ABI 4 and later, a hard requirement too), TCP
//! `bind` and `connect` are handled and only `connect` to those ports is
//! granted.
//!
//! With ABI 6 and later, the command is also scoped: no signals to, and no
//! abstract UNIX socket connections with, processes outside its domain.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, PathFdError, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError,
    Scope,
};

/// Truncation of files outside the workspace is only controlled from ABI 3
/// (Linux 6.2); below that, `truncate /etc/x` would get through.
pub const MIN_ABI: i32 = 3;

/// Character devices commands legitimately write to, and `/dev/ptmx` on
/// the host (a command in an image gets these bound, and pseudo-terminals
/// of its own instead of the host's `/dev/ptmx`).
pub(crate) const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

#[derive(Debug)]
pub(crate) struct Built {
    pub ruleset: OwnedFd,
    /// Rights for the private `/dev/shm` (added in the child).
    pub shm_access: u64,
    /// Rights for the fresh `/proc` (added in the child).
    pub proc_access: u64,
    /// Rights for a directory covered by an overlay of the command's own
    /// (added in the child, on the cover: the rules on the host's directory
    /// do not reach a mount over it).
    pub covered_access: u64,
    /// Rights for a root of the command's own (added in the child).
    pub root_access: u64,
    /// Rights for the command's own devpts and its ptmx (added in the
    /// child): a terminal's reads, writes and ioctls, no execution.
    pub pts_access: u64,
    pub ptmx_access: u64,
}

/// Why Landlock is unavailable, or why a ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("the kernel has Landlock but it is not enabled at boot")]
    NotEnabled,
    #[error("the kernel was built without Landlock")]
    NotBuilt,
    #[error("landlock_create_ruleset failed: {0}")]
    Version(#[source] std::io::Error),
    #[error("Landlock: {0}")]
    Ruleset(#[source] RulesetError),
    #[error("Landlock network rules (ABI 4, Linux 6.7): {0}")]
    NetworkRules(#[source] RulesetError),
    #[error("Landlock scopes: {0}")]
    Scopes(#[source] RulesetError),
    /// The error names the path.
    #[error("Landlock: {0}")]
    Open(#[source] PathFdError),
    #[error("Landlock rule for {}: {source}", path.display())]
    PathRule { path: PathBuf, source: RulesetError },
    #[error("Landlock rule for TCP port {port}: {source}")]
    PortRule { port: u16, source: RulesetError },
    #[error("Landlock is not supported by this kernel")]
    Unsupported,
    #[error("cannot list /: {0}")]
    ListRoot(#[source] std::io::Error),
}

impl LandlockError {
    fn path_rule(path: &Path) -> impl FnOnce(RulesetError) -> LandlockError + '_ {
        move |source| LandlockError::PathRule {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The ABI the kernel offers, or why there is none.
pub(crate) fn kernel_abi() -> Result<i32, LandlockError> {
    #[allow(unsafe_code)]
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if abi > 0 {
        return Ok(abi as i32);
    }
    let error = std::io::Error::last_os_error();
    Err(match error.raw_os_error() {
        Some(libc::EOPNOTSUPP) => LandlockError::NotEnabled,
        Some(libc::ENOSYS) => LandlockError::NotBuilt,
        _ => LandlockError::Version(error),
    })
}

fn read_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute
}

/// The paths rules are about (absolute, symlink-free).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paths<'a> {
    /// Everything allowed beneath.
    pub writable: &'a [PathBuf],
    /// Read allowed beneath, even inside a sealed directory (placed
    /// read-only directories).
    pub readable: &'a [PathBuf],
    /// Nothing allowed beneath, but for the paths above.
    pub sealed: &'a [PathBuf],
    /// Directories the command sees rebuilt in a root of its own: the read
    /// rules go on their entries (the binds it sees), not on them.
    pub rebuilt: &'a [PathBuf],
}

/// Builds the ruleset for a command that may use `paths` as they say, and,
/// with `tcp_connect`, may only connect to those TCP ports.
pub(crate) fn build(
    abi: i32,
    paths: &Paths<'_>,
    tcp_connect: Option<&[u16]>,
) -> Result<Built, LandlockError> {
    let abi = ABI::from(abi);
    let all = AccessFs::from_all(abi);
    let file = AccessFs::from_file(abi);
    let mut created = new_ruleset(abi, tcp_connect)?;
    created = add(created, Path::new("/"), AccessFs::ReadDir.into())?;
    for root in read_roots(top_level_entries()?, paths.sealed, paths.rebuilt) {
        let access = if root.dir {
            read_access()
        } else {
            read_access() & file
        };
        // Below a sealed directory's parent (usually /tmp) entries come and
        // go while other commands run: one that is gone needs no rule.
        let fd = match PathFd::new(&root.path) {
            Ok(fd) => fd,
            Err(_) if !root.path.exists() => continue,
            Err(e) => return Err(LandlockError::Open(e)),
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(LandlockError::path_rule(&root.path))?;
    }
    let devices = DEVICES.iter().chain(&["/dev/ptmx"]);
    for device in devices.map(Path::new).filter(|p| p.exists()) {
        let access = file & !AccessFs::Execute;
        created = add(created, device, access)?;
    }
    let pts = Path::new("/dev/pts");
    if pts.is_dir() {
        created = add(
            created,
            pts,
            (file & !AccessFs::Execute) | AccessFs::ReadDir,
        )?;
    }
    for path in paths.readable {
        created = add(created, path, read_access())?;
    }
    for path in paths.writable {
        created = add(created, path, all)?;
    }
    let ruleset = with_ports(created, tcp_connect)?;
    Ok(Built {
        ruleset,
        shm_access: all.bits(),
        proc_access: read_access().bits(),
        covered_access: read_access().bits(),
        root_access: BitFlags::<AccessFs>::from(AccessFs::ReadDir).bits(),
        pts_access: ((file & !AccessFs::Execute) | AccessFs::ReadDir).bits(),
        ptmx_access: (file & !AccessFs::Execute).bits(),
    })
}

/// A ruleset handling every filesystem right of `abi`, TCP bind and connect
/// when the network is narrowed to ports, and (ABI 6) the scopes.
fn new_ruleset(abi: ABI, tcp_connect: Option<&[u16]>) -> Result<RulesetCreated, LandlockError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(LandlockError::Ruleset)?;
    if tcp_connect.is_some() {
        // Named, not `from_all`: later ABIs add UDP rights, which would
        // change what this mode means with the kernel.
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(LandlockError::NetworkRules)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(LandlockError::Scopes)?;
    }
    ruleset.create().map_err(LandlockError::Ruleset)
}

/// The ruleset's file descriptor, once TCP connections to `tcp_connect`
/// (when the network is narrowed to ports) are allowed.
fn with_ports(
    mut created: RulesetCreated,
    tcp_connect: Option<&[u16]>,
) -> Result<OwnedFd, LandlockError> {
    for port in tcp_connect.unwrap_or_default() {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(|source| LandlockError::PortRule {
                port: *port,
                source,
            })?;
    }
    let ruleset: Option<OwnedFd> = created.into();
    ruleset.ok_or(LandlockError::Unsupported)
}

/// The ruleset of a command in an image's filesystem ([`crate::ImageRoot`]):
/// no rule yet; the child grants everything beneath its new root (the
/// trial's overlay and what is placed in it) once it is there. Landlock
/// adds what the namespaces do not: no mount changes, the network narrowed
/// to ports when asked, and (ABI 6) no signals or abstract sockets out.
pub(crate) fn build_for_image(
    abi: i32,
    tcp_connect: Option<&[u16]>,
) -> Result<Built, LandlockError> {
    let abi = ABI::from(abi);
    let all = AccessFs::from_all(abi);
    let created = new_ruleset(abi, tcp_connect)?;
    let ruleset = with_ports(created, tcp_connect)?;
    Ok(Built {
        ruleset,
        shm_access: all.bits(),
        proc_access: read_access().bits(),
        covered_access: read_access().bits(),
        root_access: all.bits(),
        pts_access: all.bits(),
        ptmx_access: all.bits(),
    })
}

/// Every entry of `/` but `/dev`, resolved (`/bin` → `/usr/bin`).
fn top_level_entries() -> Result<Vec<PathBuf>, LandlockError> {
    let entries = std::fs::read_dir("/").map_err(LandlockError::ListRoot)?;
    Ok(entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path != Path::new("/dev") && path.exists())
        .collect())
}

/// A place a read rule goes: a path and whether it is a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReadRoot {
    path: PathBuf,
    dir: bool,
}

/// Where read rules go: `roots`, except that a root holding a sealed
/// directory is replaced by its entries, level by level down to the sealed
/// one, which gets no rule. Landlock only grants, so "everything but this
/// subtree" is its siblings along the way. An entry created after the rules
/// are built is not readable, which is also right for a trial's tmp: the
/// command's own writable paths have rules of their own. A `rebuilt`
/// directory is replaced by its entries the same way: in the command's own
/// root it is a directory of a tmpfs, and only its entries are the host's.
///
/// An entry that is a symbolic link gets no rule: a rule is on what a path
/// opens to, so a link in the system tmp to a sealed directory (anyone may
/// make one there) would have granted it. What a link points at keeps the
/// rule it has of its own, if any. For the same reason a root that resolves
/// into a sealed directory (a top-level link) is dropped. The entries' kinds
/// come from the directory listing, so a big system tmp costs an open and a
/// rule per entry, no more.
fn read_roots(roots: Vec<PathBuf>, sealed: &[PathBuf], rebuilt: &[PathBuf]) -> Vec<ReadRoot> {
    let mut roots: Vec<ReadRoot> = roots
        .into_iter()
        .map(|root| std::fs::canonicalize(&root).unwrap_or(root))
        .filter(|path| !sealed.iter().any(|s| path.starts_with(s) && path != s))
        .map(|path| ReadRoot {
            dir: path.is_dir(),
            path,
        })
        .collect();
    while let Some(at) = roots.iter().position(|root| {
        sealed
            .iter()
            .chain(rebuilt)
            .any(|s| s.starts_with(&root.path))
    }) {
        let root = roots.swap_remove(at);
        if sealed.contains(&root.path) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&root.path) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !kind.is_symlink() {
                roots.push(ReadRoot {
                    path: entry.path(),
                    dir: kind.is_dir(),
                });
            }
        }
    }
    roots
}

fn add(
    created: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, LandlockError> {
    let fd = PathFd::new(path).map_err(LandlockError::Open)?;
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(LandlockError::path_rule(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writable_only(writable: &[PathBuf]) -> Paths<'_> {
        Paths {
            writable,
            readable: &[],
            sealed: &[],
            rebuilt: &[],
        }
    }

    #[test]
    fn builds_a_ruleset_on_this_kernel() {
        let Ok(abi) = kernel_abi() else {
            eprintln!("no Landlock here; skipping");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let built = build(abi, &writable_only(&[dir.path().to_path_buf()]), None).unwrap();
        assert_ne!(built.shm_access, 0);
        assert_eq!(built.proc_access & built.shm_access, built.proc_access);
    }

    /// Landlock on its own, without the read-only mounts in front of it:
    /// writes, creation and truncation outside are denied (EACCES), inside
    /// allowed — and chmod outside is not covered, which is why strict also
    /// makes every mount but the writable ones read-only.
    #[test]
    fn landlock_alone_confines_writes_but_not_chmod() {
        let Ok(abi) = kernel_abi() else {
            eprintln!("no Landlock here; skipping");
            return;
        };
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        std::fs::write(&target, "original").unwrap();
        let built = build(abi, &writable_only(&[ws.path().to_path_buf()]), None).unwrap();
        let plan = crate::child::ChildPlan {
            landlock: Some(built.ruleset),
            ..Default::default()
        };
        let script = format!(
            "touch {ws}/inside || exit 10; \
             touch {out}/created && exit 11; \
             truncate -s 0 {t} && exit 12; \
             echo x >> {t} && exit 13; \
             chmod 600 {t} || exit 14; \
             cat /etc/hostname > /dev/null || exit 15",
            ws = ws.path().display(),
            out = outside.path().display(),
            t = target.display(),
        );
        crate::probe::works_with(plan, "sh", &["-c", &script]).unwrap();
        assert!(ws.path().join("inside").exists());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    }

    #[test]
    fn a_sealed_directory_gets_no_read_rule_but_its_siblings_do() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for path in ["a/sealed/trial", "a/beside", "b"] {
            std::fs::create_dir_all(root.join(path)).unwrap();
        }
        let sealed = root.join("a/sealed");
        let paths = |roots: Vec<ReadRoot>| {
            let mut paths: Vec<PathBuf> = roots.into_iter().map(|r| r.path).collect();
            paths.sort();
            paths
        };
        let roots = read_roots(vec![root.clone()], std::slice::from_ref(&sealed), &[]);
        assert_eq!(paths(roots), vec![root.join("a/beside"), root.join("b")]);
        let rebuilt = root.join("a");
        let roots = read_roots(vec![root.clone()], &[], std::slice::from_ref(&rebuilt));
        assert_eq!(
            paths(roots),
            vec![root.join("a/beside"), root.join("a/sealed"), root.join("b")]
        );
    }

    /// A link beside a sealed directory, to it or into it, gets no rule;
    /// nor does a root that resolves into it.
    #[test]
    fn links_to_a_sealed_directory_get_no_read_rule() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let sealed = root.join("sealed");
        std::fs::create_dir_all(sealed.join("trial")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(&sealed, root.join("to-sealed")).unwrap();
        std::os::unix::fs::symlink(sealed.join("trial"), root.join("into-sealed")).unwrap();
        let roots = read_roots(
            vec![root.clone(), root.join("into-sealed")],
            std::slice::from_ref(&sealed),
            &[],
        );
        assert_eq!(
            roots,
            vec![ReadRoot {
                path: root.join("file"),
                dir: false
            }]
        );
    }

    /// Other trials' workspaces are listed but not read; the command's own,
    /// inside the same sealed directory, is.
    #[test]
    fn a_sealed_directory_is_unreadable_but_for_the_writable_paths_inside() {
        let Ok(abi) = kernel_abi() else {
            eprintln!("no Landlock here; skipping");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let sealed = dir.path().canonicalize().unwrap();
        let (own, other) = (sealed.join("own"), sealed.join("other"));
        for ws in [&own, &other] {
            std::fs::create_dir_all(ws).unwrap();
            std::fs::write(ws.join("answer.txt"), "42").unwrap();
        }
        let paths = Paths {
            sealed: std::slice::from_ref(&sealed),
            ..writable_only(std::slice::from_ref(&own))
        };
        let built = build(abi, &paths, None).unwrap();
        let plan = crate::child::ChildPlan {
            landlock: Some(built.ruleset),
            ..Default::default()
        };
        let script = format!(
            "cat {own}/answer.txt > /dev/null || exit 10; \
             ls {sealed} > /dev/null || exit 11; \
             cat {other}/answer.txt 2> /dev/null && exit 12; \
             cat /etc/hostname > /dev/null || exit 13",
            own = own.display(),
            other = other.display(),
            sealed = sealed.display(),
        );
        crate::probe::works_with(plan, "sh", &["-c", &script]).unwrap();
    }

    #[test]
    fn leaves_dev_out_of_the_read_rules() {
        let entries = top_level_entries().unwrap();
        assert!(!entries.contains(&PathBuf::from("/dev")));
        assert!(entries.contains(&PathBuf::from("/etc")));
    }
}
