//! What the system tmp costs every confined command, for `tack doctor` and
//! the warning before a confined run.
//!
//! Two directories grow with what other programs leave: `/tmp`, which a
//! confined command sees covered, each entry bound back into the cover
//! (`plan::tmps`), and `$TMPDIR` where it is elsewhere, whose entries are
//! a Landlock read rule each beside the trials' sealed roots kept there.
//! Either way each entry is work at every command's (or trial's) start:
//! with thousands, starting one costs many times what it does in a tidy tmp.

use std::path::{Path, PathBuf};

use crate::plan::SYSTEM_TMP;

/// Entries from which [`SystemTmp`] calls a tmp crowded.
pub const CROWDED_TMP: usize = 1000;

/// What each entry of a tmp is in every confined command's walls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryCost {
    /// Bound back into the cover of `/tmp`.
    BindMount,
    /// A Landlock read rule.
    ReadRule,
}

impl EntryCost {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryCost::BindMount => "a bind mount",
            EntryCost::ReadRule => "a Landlock read rule",
        }
    }
}

/// A tmp and how many entries it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemTmp {
    pub path: PathBuf,
    pub entries: usize,
    pub each: EntryCost,
}

impl SystemTmp {
    /// `$TMPDIR` (else `/tmp`), where the trials' directories are made.
    pub fn count() -> std::io::Result<SystemTmp> {
        SystemTmp::list(std::env::temp_dir())
    }

    /// `/tmp`, when `$TMPDIR` is elsewhere: covered all the same.
    pub fn covered() -> Option<std::io::Result<SystemTmp>> {
        let tmpdir = std::env::temp_dir();
        let tmpdir = std::fs::canonicalize(&tmpdir).unwrap_or(tmpdir);
        (tmpdir != Path::new(SYSTEM_TMP)).then(|| SystemTmp::list(PathBuf::from(SYSTEM_TMP)))
    }

    fn list(path: PathBuf) -> std::io::Result<SystemTmp> {
        let entries = std::fs::read_dir(&path)?.count();
        let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let each = if canonical.starts_with(SYSTEM_TMP) {
            EntryCost::BindMount
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

    /// At least [`CROWDED_TMP`] entries.
    pub fn crowded(&self) -> bool {
        self.entries >= CROWDED_TMP
    }

    /// Where it is and what its entries cost; when crowded, [`advice`](Self::advice).
    pub fn summary(&self) -> String {
        if self.crowded() {
            return self.advice();
        }
        format!(
            "{} ({} entries; {} each in every confined command's walls)",
            self.path.display(),
            self.entries,
            self.each.as_str()
        )
    }

    /// What a crowded one costs and what to do about it. `/tmp` is covered
    /// wherever `TMPDIR` points, so clearing it out is the only way there.
    pub fn advice(&self) -> String {
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let what = if path == Path::new(SYSTEM_TMP) {
            format!("clear out {}", self.path.display())
        } else {
            format!(
                "point TMPDIR at a directory of tack's own in a tidy parent \
                 (e.g. TMPDIR=/var/tmp/tack) or clear out {}",
                self.path.display()
            )
        };
        format!(
            "{} holds {} entries — {} each in every confined command's walls, which slows \
             each one's start; {what}",
            self.path.display(),
            self.entries,
            self.each.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_the_system_tmp_are_mounts_and_elsewhere_rules() {
        let tmp = SystemTmp::list(PathBuf::from("/tmp")).unwrap();
        assert_eq!(tmp.each, EntryCost::BindMount);
        let dir = tempfile::tempdir().unwrap();
        for i in 0..CROWDED_TMP {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        let listed = SystemTmp::list(dir.path().to_path_buf()).unwrap();
        assert_eq!(listed.entries, CROWDED_TMP);
        assert!(listed.crowded());
        let in_tmp = dir.path().canonicalize().unwrap().starts_with("/tmp");
        assert_eq!(listed.each == EntryCost::BindMount, in_tmp);
        let elsewhere = SystemTmp {
            each: EntryCost::ReadRule,
            ..listed
        };
        let said = elsewhere.summary();
        assert!(
            said.contains("a Landlock read rule each") && said.contains("point TMPDIR at"),
            "{said}"
        );
        let covered = SystemTmp {
            entries: CROWDED_TMP,
            ..tmp
        };
        let said = covered.summary();
        assert!(
            said.contains("a bind mount each") && said.ends_with("clear out /tmp"),
            "{said}"
        );
    }
}
