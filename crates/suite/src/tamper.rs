//! Tamper detection: the files the checks depend on (the visible tests, by
//! default) are fingerprinted before the agent starts and before the checks
//! run ([`TamperWatch`]). An agent that "fixes" a failing test by editing the
//! test is flagged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};
use tack_sandbox::{Confinement, WorkspaceFiles};

/// The protected globs of a task, compiled.
#[derive(Debug, Clone)]
pub struct Protected {
    globs: GlobSet,
}

/// Why a task's `protected` globs do not compile.
#[derive(Debug, thiserror::Error)]
pub enum ProtectedError {
    #[error("`{pattern}` is not a valid glob: {source}")]
    Glob {
        pattern: String,
        source: globset::Error,
    },
    #[error("the globs cannot be combined: {0}")]
    Set(#[source] globset::Error),
}

/// Content hashes of the protected files that exist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint(BTreeMap<PathBuf, Vec<u8>>);

impl Protected {
    pub fn new(patterns: &[String]) -> Result<Protected, ProtectedError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = Glob::new(pattern).map_err(|source| ProtectedError::Glob {
                pattern: pattern.clone(),
                source,
            })?;
            builder.add(glob);
        }
        let globs = builder.build().map_err(ProtectedError::Set)?;
        Ok(Protected { globs })
    }

    /// Hashes every protected file below `workspace`. Unreadable entries are
    /// skipped: a file the agent made unreadable shows up as changed. What
    /// the agent left there is read by tack itself, outside the sandbox, so
    /// as the file tools read: a link within the workspace is followed (an
    /// edit through it is an edit), one out of it is fingerprinted by its
    /// target's name, never followed (to `/dev/zero`, it would fill tack's
    /// memory), and a FIFO or device by its kind, never opened (a FIFO
    /// would hang the trial).
    pub fn fingerprint(&self, workspace: &Path) -> Fingerprint {
        let mut files = BTreeMap::new();
        let Ok(reader) = WorkspaceFiles::new(workspace, &Confinement::off()) else {
            return Fingerprint(files);
        };
        let mut budget = HASHED_TOTAL;
        let mut pending = vec![workspace.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if entry.file_name() != ".git" {
                        pending.push(path);
                    }
                    continue;
                }
                let relative = path.strip_prefix(workspace).unwrap_or(&path).to_path_buf();
                if self.globs.is_match(&relative)
                    && let Some(hash) = entry_hash(&reader, &relative, kind, &mut budget)
                {
                    files.insert(relative, hash);
                }
            }
        }
        Fingerprint(files)
    }
}

/// Bytes hashed over one fingerprint: past them, files are told apart by
/// their length alone.
const HASHED_TOTAL: u64 = 256 * 1024 * 1024;

/// Bytes of one protected file hashed, with its length: far more than any
/// test file, and a bound on what a planted giant costs.
const HASHED_BYTES: u64 = 64 * 1024 * 1024;

/// A protected entry's hash: a regular file's (or a link's within the
/// workspace) length and content, opened as the file tools open (no FIFO
/// waited on, nothing outside followed); a link out of the workspace's
/// target name; another kind's name.
fn entry_hash(
    reader: &WorkspaceFiles,
    relative: &Path,
    kind: std::fs::FileType,
    budget: &mut u64,
) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let mut hasher = Sha256::new();
    if kind.is_file() || kind.is_symlink() {
        match reader.open(&relative.to_string_lossy()) {
            Ok(file) => {
                let length = file.metadata().ok()?.len();
                hasher.update(b"file\0");
                hasher.update(length.to_le_bytes());
                // Each file's first bytes, within what is left of the
                // fingerprint's budget: an agent's thousand giant files
                // must not cost tack minutes outside every limit.
                let share = HASHED_BYTES.min(*budget);
                *budget -= share.min(length);
                let mut reader = file.take(share);
                let mut buffer = vec![0u8; 64 * 1024];
                loop {
                    match reader.read(&mut buffer) {
                        Ok(0) => break,
                        Ok(n) => hasher.update(&buffer[..n]),
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return None,
                    }
                }
            }
            Err(_) if kind.is_symlink() => {
                let target = std::fs::read_link(reader.root().join(relative)).ok()?;
                hasher.update(b"link\0");
                hasher.update(target.as_os_str().as_encoded_bytes());
            }
            Err(_) => return None,
        }
    } else {
        let name = if kind.is_fifo() {
            "fifo"
        } else if kind.is_socket() {
            "socket"
        } else {
            "device"
        };
        hasher.update(name.as_bytes());
    }
    Some(hasher.finalize().to_vec())
}

impl Fingerprint {
    /// Protected files added, removed or changed since `before`.
    pub fn changed_since(&self, before: &Fingerprint) -> Vec<PathBuf> {
        let mut changed: Vec<PathBuf> = before
            .0
            .iter()
            .filter(|(path, hash)| self.0.get(*path) != Some(hash))
            .map(|(path, _)| path.clone())
            .collect();
        changed.extend(
            self.0
                .keys()
                .filter(|p| !before.0.contains_key(*p))
                .cloned(),
        );
        changed.sort();
        changed
    }
}

/// Whether the agent changed the files a task protects. They are compared
/// before each round of checks with how they were when the agent started,
/// or when the last round of checks ended: what the checks themselves write
/// (a Harbor test leaving its output in `/app`) is not the agent's doing.
#[derive(Debug)]
pub struct TamperWatch {
    protected: Option<Protected>,
    /// The files as the agent found them.
    expected: Option<Fingerprint>,
    /// Some round of checks was about to run.
    checked: bool,
    tampered: bool,
}

impl TamperWatch {
    /// Fingerprints `workspace` as the agent starts on it. A task whose
    /// globs do not compile (refused when the suite loads) is not watched.
    pub fn start(patterns: &[String], workspace: &Path) -> TamperWatch {
        let protected = Protected::new(patterns).ok();
        let expected = protected.as_ref().map(|p| p.fingerprint(workspace));
        TamperWatch {
            protected,
            expected,
            checked: false,
            tampered: false,
        }
    }

    /// The agent stopped and the checks are about to run.
    pub fn before_checks(&mut self, workspace: &Path) {
        self.checked = true;
        if let (Some(protected), Some(expected)) = (&self.protected, &self.expected) {
            self.tampered |= !protected
                .fingerprint(workspace)
                .changed_since(expected)
                .is_empty();
        }
    }

    /// The checks ended and the agent goes on (their feedback sent back):
    /// what it finds now is what it is answerable for.
    pub fn after_checks(&mut self, workspace: &Path) {
        if let Some(protected) = &self.protected {
            self.expected = Some(protected.fingerprint(workspace));
        }
    }

    /// Whether the agent changed a protected file before some round of
    /// checks, or, when no checks ran, since it started.
    pub fn tampered(&mut self, workspace: &Path) -> bool {
        if !self.checked {
            self.before_checks(workspace);
        }
        self.tampered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_checks_write_is_not_the_agents_doing() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("test_app.py"), "assert f() == 2").unwrap();
        let defaults: Vec<String> = crate::DEFAULT_PROTECTED.map(String::from).to_vec();
        let check_writes = |n: &str| std::fs::write(ws.join("test_output.txt"), n).unwrap();

        // The agent fixes the code; the checks leave a file the globs match,
        // twice (a feedback round between).
        let mut watch = TamperWatch::start(&defaults, ws);
        std::fs::write(ws.join("app.py"), "def f(): return 2").unwrap();
        watch.before_checks(ws);
        check_writes("1");
        watch.after_checks(ws);
        watch.before_checks(ws);
        check_writes("2");
        assert!(!watch.tampered(ws));

        // The agent edits the test in the feedback round.
        let mut watch = TamperWatch::start(&defaults, ws);
        watch.before_checks(ws);
        check_writes("3");
        watch.after_checks(ws);
        std::fs::write(ws.join("test_app.py"), "assert True").unwrap();
        watch.before_checks(ws);
        check_writes("4");
        assert!(watch.tampered(ws));

        // No checks ran: compared when asked.
        let mut watch = TamperWatch::start(&defaults, ws);
        std::fs::write(ws.join("test_app.py"), "assert False").unwrap();
        assert!(watch.tampered(ws));
    }

    #[test]
    fn edits_to_protected_files_are_seen_and_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("pkg")).unwrap();
        std::fs::write(ws.join("test_app.py"), "assert f() == 2").unwrap();
        std::fs::write(ws.join("pkg/test_more.py"), "x").unwrap();
        std::fs::write(ws.join("app.py"), "def f(): return 1").unwrap();
        let defaults: Vec<String> = crate::DEFAULT_PROTECTED.map(String::from).to_vec();
        let protected = Protected::new(&defaults).unwrap();
        let before = protected.fingerprint(ws);
        std::fs::write(ws.join("app.py"), "def f(): return 2").unwrap();
        assert!(protected.fingerprint(ws).changed_since(&before).is_empty());
        std::fs::write(ws.join("test_app.py"), "assert True").unwrap();
        std::fs::remove_file(ws.join("pkg/test_more.py")).unwrap();
        assert_eq!(
            protected.fingerprint(ws).changed_since(&before),
            [
                PathBuf::from("pkg/test_more.py"),
                PathBuf::from("test_app.py")
            ]
        );
    }

    /// What the agent leaves among the protected files is looked at, not
    /// followed or opened: a FIFO would hang the trial, a link to
    /// /dev/zero fill tack's memory. Replacing a test with either is seen.
    #[test]
    fn fifos_and_links_are_fingerprinted_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("test_app.py"), "assert f() == 2").unwrap();
        let defaults: Vec<String> = crate::DEFAULT_PROTECTED.map(String::from).to_vec();
        let protected = Protected::new(&defaults).unwrap();
        let before = protected.fingerprint(ws);
        std::os::unix::fs::symlink("/dev/zero", ws.join("test_zero.py")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(ws.join("test_fifo.py"))
            .status()
            .unwrap();
        assert!(made.success());
        std::fs::remove_file(ws.join("test_app.py")).unwrap();
        std::os::unix::fs::symlink("elsewhere.py", ws.join("test_app.py")).unwrap();
        // Returns (no hang, no endless read) and sees all three.
        assert_eq!(
            protected.fingerprint(ws).changed_since(&before),
            [
                PathBuf::from("test_app.py"),
                PathBuf::from("test_fifo.py"),
                PathBuf::from("test_zero.py"),
            ]
        );
    }

    /// A protected file that is a link within the workspace is its
    /// target's content: an edit made through the target is an edit.
    #[test]
    fn an_edit_through_a_link_within_the_workspace_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("lib")).unwrap();
        std::fs::write(ws.join("lib/cases.py"), "CASES = [1, 2]").unwrap();
        std::os::unix::fs::symlink("lib/cases.py", ws.join("test_cases.py")).unwrap();
        let defaults: Vec<String> = crate::DEFAULT_PROTECTED.map(String::from).to_vec();
        let protected = Protected::new(&defaults).unwrap();
        let before = protected.fingerprint(ws);
        std::fs::write(ws.join("lib/cases.py"), "CASES = []").unwrap();
        assert_eq!(
            protected.fingerprint(ws).changed_since(&before),
            [PathBuf::from("test_cases.py")]
        );
    }
}
