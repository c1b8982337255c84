//! The system tmp (`$TMPDIR`, else `/tmp`), where the trials' directories
//! are made, for `tack doctor` and the check before a confined run.
//!
//! What it holds costs a confined command nothing: it sees `/tmp`,
//! `/var/tmp` and the directory holding tack's roots (`$TMPDIR`) through
//! read-only overlays (`plan::tmps`), whatever they hold.

use std::path::PathBuf;

/// `$TMPDIR` (else `/tmp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemTmp {
    pub path: PathBuf,
}

impl SystemTmp {
    /// This process's.
    pub fn here() -> SystemTmp {
        SystemTmp {
            path: std::env::temp_dir(),
        }
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

    /// Where it is and how confined commands see it.
    pub fn summary(&self) -> String {
        format!(
            "{} (confined commands see it through a read-only overlay, whatever it holds)",
            self.path.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_tmp_below_dev_shm_is_unusable() {
        let tmp = SystemTmp {
            path: PathBuf::from("/tmp"),
        };
        assert!(tmp.usable().is_ok());
        assert!(tmp.summary().starts_with("/tmp (") && tmp.summary().contains("overlay"));
        if let Some(shm) = crate::plan::private_shm() {
            let below = SystemTmp {
                path: shm.join("x"),
            };
            assert!(below.usable().is_err());
        }
    }
}
