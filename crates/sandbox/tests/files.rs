//! The file tools' access to the workspace: beneath it only, `.git`
//! read-only and hidden paths invisible as for `bash`, whatever symlinks,
//! `..` or hard links the path goes through. No kernel confinement is
//! needed (these are checks on descriptors in tack's own process), so
//! nothing here skips. `TACK_SANDBOX_DISABLE=openat2` runs the same tests
//! on the user-space walk used where the kernel has no openat2.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use tack_sandbox::{Confinement, FileAccessError, HeldWorkspace, WorkspaceFiles};
use tempfile::TempDir;

/// A workspace `ws/` beside a directory `outside/` holding `target.txt`,
/// in one temporary directory (one filesystem, so hard links work).
struct Setup {
    _dir: TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(ws.join(".git")).unwrap();
        fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("target.txt"), "original").unwrap();
        Setup {
            _dir: dir,
            ws,
            outside,
        }
    }

    fn strict(&self) -> WorkspaceFiles {
        WorkspaceFiles::new(&self.ws, &Confinement::strict(&self.ws)).unwrap()
    }

    fn target(&self) -> String {
        fs::read_to_string(self.outside.join("target.txt")).unwrap()
    }
}

fn denied(result: Result<impl std::fmt::Debug, FileAccessError>) -> String {
    match result {
        Err(error @ FileAccessError::Denied { .. }) => error.to_string(),
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[test]
fn reads_and_writes_ordinary_files() {
    let s = Setup::new();
    let files = s.strict();
    files.write("a.txt", b"hello world").unwrap();
    files.write("a.txt", b"short").unwrap();
    assert_eq!(files.read("a.txt").unwrap(), b"short");
    assert_eq!(fs::read(s.ws.join("a.txt")).unwrap(), b"short");
    let absolute = s.ws.join("a.txt");
    assert_eq!(files.read(absolute.to_str().unwrap()).unwrap(), b"short");
    let real = files.root().join("a.txt");
    files
        .write(real.to_str().unwrap(), b"via the real path")
        .unwrap();
    assert_eq!(files.read("./.git/../a.txt").unwrap(), b"via the real path");
}

#[test]
fn creates_a_new_nested_file_with_its_directories() {
    let s = Setup::new();
    let files = s.strict();
    files.write("src/deep/er/new.rs", b"fn main() {}").unwrap();
    assert_eq!(
        fs::read_to_string(s.ws.join("src/deep/er/new.rs")).unwrap(),
        "fn main() {}"
    );
}

#[test]
fn dot_dot_cannot_leave_the_workspace() {
    let s = Setup::new();
    let files = s.strict();
    let message = denied(files.write("../outside/target.txt", b"changed"));
    assert!(message.contains("outside the workspace"), "{message}");
    denied(files.read("../outside/target.txt"));
    fs::create_dir(s.ws.join("src")).unwrap();
    denied(files.write("src/../../outside/target.txt", b"changed"));
    denied(files.write("../outside/new.txt", b"new"));
    denied(files.resolve_for_read(".."));
    // Climbing out of a directory that does not exist yet: nothing is made.
    let error = files.write("a/../../outside/new.txt", b"new").unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");
    assert!(!s.ws.join("a").exists(), "no directory was made on the way");
    assert_eq!(s.target(), "original");
    assert!(!s.outside.join("new.txt").exists());
}

#[test]
fn absolute_paths_outside_are_refused() {
    let s = Setup::new();
    let files = s.strict();
    let target = s.outside.join("target.txt");
    denied(files.write(target.to_str().unwrap(), b"changed"));
    denied(files.read(target.to_str().unwrap()));
    let message = denied(files.read("/etc/passwd"));
    assert!(message.contains("absolute path elsewhere"), "{message}");
    assert_eq!(s.target(), "original");
}

#[test]
fn a_symlink_to_a_file_outside_is_not_written_through() {
    let s = Setup::new();
    symlink(s.outside.join("target.txt"), s.ws.join("link")).unwrap();
    symlink("../outside/target.txt", s.ws.join("relative-link")).unwrap();
    symlink(s.outside.join("absent.txt"), s.ws.join("dangling")).unwrap();
    let files = s.strict();
    for path in ["link", "relative-link"] {
        denied(files.write(path, b"changed"));
        denied(files.read(path));
    }
    let message = denied(files.write("dangling", b"new"));
    assert!(message.contains("through a symlink to"), "{message}");
    assert_eq!(s.target(), "original");
    assert!(!s.outside.join("absent.txt").exists());
    assert!(
        fs::symlink_metadata(s.ws.join("link"))
            .unwrap()
            .is_symlink()
    );
}

#[test]
fn a_symlinked_directory_pointing_outside_is_refused() {
    let s = Setup::new();
    symlink(&s.outside, s.ws.join("out")).unwrap();
    let files = s.strict();
    denied(files.write("out/target.txt", b"changed"));
    denied(files.write("out/new.txt", b"new"));
    denied(files.write("out/made/new.txt", b"new"));
    denied(files.read("out/target.txt"));
    denied(files.resolve_for_read("out"));
    assert_eq!(s.target(), "original");
    assert!(!s.outside.join("new.txt").exists());
    assert!(!s.outside.join("made").exists());
}

#[test]
fn symlinks_inside_the_workspace_still_work() {
    let s = Setup::new();
    fs::create_dir_all(s.ws.join("src")).unwrap();
    fs::write(s.ws.join("src/lib.rs"), "old").unwrap();
    symlink("src/lib.rs", s.ws.join("alias")).unwrap();
    symlink(s.ws.join("src"), s.ws.join("absolute-dir")).unwrap();
    symlink("src/made.rs", s.ws.join("to-be-made")).unwrap();
    let files = s.strict();
    files.write("alias", b"new").unwrap();
    assert_eq!(fs::read_to_string(s.ws.join("src/lib.rs")).unwrap(), "new");
    assert!(
        fs::symlink_metadata(s.ws.join("alias"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(files.read("absolute-dir/lib.rs").unwrap(), b"new");
    files.write("to-be-made", b"made").unwrap();
    assert_eq!(
        fs::read_to_string(s.ws.join("src/made.rs")).unwrap(),
        "made"
    );
    let real = files.resolve_for_read("absolute-dir").unwrap();
    assert_eq!(real, files.root().join("src"));
    assert_eq!(files.resolve_for_read(".").unwrap(), files.root());
    assert_eq!(
        files.resolve_for_read("alias").unwrap(),
        files.root().join("src/lib.rs")
    );
}

#[test]
fn git_config_is_read_only_under_strict() {
    let s = Setup::new();
    let files = s.strict();
    // What str_replace does: read, then write back the edited text.
    let config = files.read(".git/config").unwrap();
    let edited = [config.as_slice(), b"\thooksPath = /tmp/evil\n"].concat();
    let message = denied(files.write(".git/config", &edited));
    assert!(message.contains("read-only"), "{message}");
    assert!(message.contains(".git directory is protected"), "{message}");
    assert!(message.contains("change files of the project"), "{message}");
    denied(files.write(".git/hooks/pre-commit", b"#!/bin/sh\n"));
    denied(files.write(".git/new", b"x"));
    denied(files.write("./.git/../.git/config", b"x"));
    let absolute = s.ws.join(".git/config");
    denied(files.write(absolute.to_str().unwrap(), b"x"));
    assert_eq!(
        fs::read_to_string(s.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!s.ws.join(".git/hooks").exists());
    assert!(!s.ws.join(".git/new").exists());
}

#[test]
fn symlinks_into_git_are_read_only_too() {
    let s = Setup::new();
    symlink(".git", s.ws.join("g")).unwrap();
    symlink(".git/config", s.ws.join("c")).unwrap();
    fs::create_dir(s.ws.join("sub")).unwrap();
    symlink("../.git", s.ws.join("sub/up")).unwrap();
    let files = s.strict();
    denied(files.write("g/config", b"x"));
    denied(files.write("c", b"x"));
    denied(files.write("sub/up/config", b"x"));
    denied(files.write("g/new", b"x"));
    assert_eq!(files.read("g/config").unwrap(), b"[core]\n");
    assert_eq!(
        fs::read_to_string(s.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!s.ws.join(".git/new").exists());
}

#[test]
fn a_hard_link_is_never_written() {
    let s = Setup::new();
    fs::hard_link(s.outside.join("target.txt"), s.ws.join("shared.txt")).unwrap();
    fs::write(s.ws.join("mine.txt"), "mine").unwrap();
    fs::hard_link(s.ws.join("mine.txt"), s.ws.join("also-mine.txt")).unwrap();
    let files = s.strict();
    let message = denied(files.write("shared.txt", b"changed"));
    assert!(message.contains("hard link"), "{message}");
    denied(files.write("also-mine.txt", b"changed"));
    assert_eq!(s.target(), "original");
    assert_eq!(fs::read_to_string(s.ws.join("mine.txt")).unwrap(), "mine");
    // Reading it is harmless: bash could too.
    assert_eq!(files.read("shared.txt").unwrap(), b"original");
}

#[test]
fn hidden_paths_cannot_be_read_or_written() {
    let s = Setup::new();
    let tasks = s.ws.join("tasks");
    fs::create_dir_all(&tasks).unwrap();
    fs::write(tasks.join("solution.py"), "secret").unwrap();
    symlink("tasks", s.ws.join("t")).unwrap();
    fs::write(s.ws.join("open.txt"), "fine").unwrap();
    let confinement = Confinement::strict(&s.ws).hiding([tasks.clone()]);
    let files = WorkspaceFiles::new(&s.ws, &confinement).unwrap();
    let message = denied(files.read("tasks/solution.py"));
    assert!(message.contains("not visible"), "{message}");
    denied(files.read("t/solution.py"));
    denied(files.write("tasks/solution.py", b"x"));
    denied(files.write("tasks/new.py", b"x"));
    denied(files.resolve_for_read("tasks"));
    denied(files.resolve_for_read("t/solution.py"));
    let root = files.root().to_path_buf();
    assert!(!files.is_readable(&root.join("tasks")));
    assert!(!files.is_readable(&root.join("tasks/solution.py")));
    assert!(files.is_readable(&root.join("open.txt")));
    assert!(files.is_readable(&root));
    assert!(!files.is_readable(&root.join("../outside/target.txt")));
    assert!(!files.is_readable(Path::new("/etc/passwd")));
    assert_eq!(
        fs::read_to_string(tasks.join("solution.py")).unwrap(),
        "secret"
    );
    assert!(!tasks.join("new.py").exists());
}

#[test]
fn off_has_no_protected_paths_but_stays_beneath_the_workspace() {
    let s = Setup::new();
    let confinement = Confinement::off().hiding([s.ws.join(".git")]);
    let files = WorkspaceFiles::new(&s.ws, &confinement).unwrap();
    files
        .write(".git/config", b"[core]\n\tbare = false\n")
        .unwrap();
    assert_eq!(
        files.read(".git/config").unwrap(),
        b"[core]\n\tbare = false\n"
    );
    denied(files.write("../outside/target.txt", b"changed"));
    assert_eq!(s.target(), "original");
}

#[test]
fn ordinary_errors_are_not_denials_and_say_what_is_wrong() {
    let s = Setup::new();
    fs::create_dir(s.ws.join("dir")).unwrap();
    let fifo = s.ws.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let files = s.strict();
    let io = |result: Result<Vec<u8>, FileAccessError>| match result {
        Err(error @ FileAccessError::Io { .. }) => error.to_string(),
        other => panic!("expected an I/O error, got {other:?}"),
    };
    assert_eq!(
        io(files.read("missing.txt")),
        "`missing.txt` does not exist"
    );
    assert_eq!(io(files.read("dir")), "`dir` is a directory, not a file");
    assert_eq!(io(files.read(".")), "`.` is a directory, not a file");
    assert!(io(files.read("fifo")).contains("not a regular file"));
    assert!(io(files.read("")).contains("give a path relative to the workspace"));
    let error = files.write("dir", b"x").unwrap_err();
    assert!(!error.is_denied(), "{error}");
    let error = files.write("fifo", b"x").unwrap_err();
    assert!(!error.is_denied(), "{error}");
    let error = files.resolve_for_read("nope").unwrap_err();
    assert!(!error.is_denied(), "{error}");
}

#[test]
fn a_workspace_that_does_not_exist_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let error = WorkspaceFiles::new(&missing, &Confinement::strict(&missing)).unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");
}

/// The model names files where `bash` sees the workspace (`/app/x`) when
/// the workspace is placed there; other absolute paths stay refused.
#[test]
fn the_placed_workspace_path_names_workspace_files() {
    let s = Setup::new();
    let confinement = Confinement::strict(&s.ws).placing(&s.ws, Path::new("/app"), true);
    let files = WorkspaceFiles::new(&s.ws, &confinement).unwrap();
    files.write("/app/src/new.txt", b"placed").unwrap();
    assert_eq!(
        fs::read_to_string(s.ws.join("src/new.txt")).unwrap(),
        "placed"
    );
    assert_eq!(files.read("/app/src/new.txt").unwrap(), b"placed");
    denied(files.read("/apple/x"));
    denied(files.write("/app/../outside/target.txt", b"x"));
    assert_eq!(s.target(), "original");
    denied(files.write("/app/.git/config", b"x"));
}

/// A trial's file tools share one root, opened at their first call: later
/// calls resolve beneath that same directory (even once its path names
/// another, which under `strict` bash cannot do to a mount point), and a
/// call for another workspace opens its own.
#[test]
fn a_held_root_serves_every_call_of_its_workspace_and_no_other() {
    let s = Setup::new();
    let held = HeldWorkspace::default();
    let confinement = Confinement::strict(&s.ws);
    let first = WorkspaceFiles::held(&held, &s.ws, &confinement).unwrap();
    first.write("notes.txt", b"kept").unwrap();
    let moved = s.ws.with_file_name("ws-moved");
    fs::rename(&s.ws, &moved).unwrap();
    fs::create_dir(&s.ws).unwrap();
    let later = WorkspaceFiles::held(&held, &s.ws, &confinement).unwrap();
    assert_eq!(later.read("notes.txt").unwrap(), b"kept");
    // Without the held root, the path is looked up again.
    let fresh = WorkspaceFiles::new(&s.ws, &confinement).unwrap();
    assert!(fresh.read("notes.txt").is_err());

    fs::write(s.outside.join("own.txt"), "its own").unwrap();
    let other = WorkspaceFiles::held(&held, &s.outside, &Confinement::strict(&s.outside)).unwrap();
    assert_eq!(other.read("own.txt").unwrap(), b"its own");
    assert!(other.read("notes.txt").is_err());
}
