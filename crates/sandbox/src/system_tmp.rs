//! What the system tmp costs every confined command, for `tack doctor` and
//! the warning before a confined run.
//!
//! `/tmp` costs nothing per entry: a confined command sees it through a
//! read-only overlay (`plan::tmps`), whatever it holds. A `$TMPDIR`
//! elsewhere does: its entries, and those of the directories above it, are
//! a Landlock read rule each beside the trials' sealed roots kept there, so
//! with thousands, starting a command costs many times what it does in a
//! tidy one.

use std::path::{Path, PathBuf};

use crate::plan::SYSTEM_TMP;

/// Entries from which [`SystemTmp`] calls a tmp crowded.
pub const CROWDED_TMP: usize = 1000;

/// What each entry of a tmp is in every confined command's walls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryCost {
    /// Nothing: in `/tmp`, seen through the overlay that covers it.
    Nothing,
    /// A Landlock read rule.
    ReadRule,
}

impl EntryCost {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryCost::Nothing => "nothing",
            EntryCost::ReadRule => "a Landlock read rule",
        }
    }
}

/// `$TMPDIR` (else `/tmp`), where the trials' directories are made, and how
/// many entries it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemTmp {
    pub path: PathBuf,
    pub entries: usize,
    pub each: EntryCost,
}

impl SystemTmp {
    /// Lists `$TMPDIR` (else `/tmp`).
    pub fn count() -> std::io::Result<SystemTmp> {
        SystemTmp::list(std::env::temp_dir())
    }

    fn list(path: PathBuf) -> std::io::Result<SystemTmp> {
        let entries = std::fs::read_dir(&path)?.count();
        let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let each = if in_system_tmp(&canonical) {
            EntryCost::Nothing
        } else {
            EntryCost::ReadRule
        };
        Ok(SystemTmp {
            path,
            entries,
            each,
        })
    }

    /// Whether confined commands can work here: a system tmp below
    /// `/dev/shm` (`TMPDIR=/dev/shm`) is covered by each command's own, so
    /// every trial's workspace would vanish from under it.
    pub fn usable(&self) -> Result<(), crate::SetupError> {
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        match crate::plan::private_shm() {
            Some(shm) if path.starts_with(shm) => Err(crate::SetupError::BelowPrivateShm(path)),
            _ => Ok(()),
        }
    }

    /// At least [`CROWDED_TMP`] entries, each a rule.
    pub fn crowded(&self) -> bool {
        self.each == EntryCost::ReadRule && self.entries >= CROWDED_TMP
    }

    /// Where it is and what its entries cost; when crowded, [`advice`](Self::advice).
    pub fn summary(&self) -> String {
        if self.crowded() {
            return self.advice();
        }
        match self.each {
            EntryCost::Nothing => format!(
                "{} ({} entries; confined commands see {SYSTEM_TMP} through a read-only \
                 overlay, whatever it holds)",
                self.path.display(),
                self.entries
            ),
            EntryCost::ReadRule => format!(
                "{} ({} entries; a Landlock read rule each in every confined command's walls)",
                self.path.display(),
                self.entries
            ),
        }
    }

    /// What a crowded one costs and what to do about it.
    pub fn advice(&self) -> String {
        format!(
            "{} holds {} entries — a Landlock read rule each in every confined command's \
             walls, which slows each one's start; point TMPDIR at a directory in {SYSTEM_TMP} \
             (or unset it), or at a directory of tack's own in a tidy parent \
             (e.g. TMPDIR=/var/tmp/tack), or clear out {0}",
            self.path.display(),
            self.entries
        )
    }
}

/// Whether `path` is in the system tmp, which confined commands see through
/// an overlay.
fn in_system_tmp(path: &Path) -> bool {
    path.starts_with(SYSTEM_TMP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_the_system_tmp_cost_nothing_and_elsewhere_a_rule() {
        let tmp = SystemTmp::list(PathBuf::from("/tmp")).unwrap();
        assert_eq!(tmp.each, EntryCost::Nothing);
        let crowded_tmp = SystemTmp {
            entries: 5 * CROWDED_TMP,
            ..tmp
        };
        assert!(!crowded_tmp.crowded());
        assert!(crowded_tmp.summary().contains("read-only overlay"));
        let dir = tempfile::tempdir().unwrap();
        for i in 0..CROWDED_TMP {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        let listed = SystemTmp::list(dir.path().to_path_buf()).unwrap();
        assert_eq!(listed.entries, CROWDED_TMP);
        let in_tmp = in_system_tmp(&dir.path().canonicalize().unwrap());
        assert_eq!(listed.each == EntryCost::Nothing, in_tmp);
        let elsewhere = SystemTmp {
            each: EntryCost::ReadRule,
            ..listed
        };
        assert!(elsewhere.crowded());
        let said = elsewhere.summary();
        assert!(
            said.contains("a Landlock read rule each") && said.contains("point TMPDIR at"),
            "{said}"
        );
    }
}
