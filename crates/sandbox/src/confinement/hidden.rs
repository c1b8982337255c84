//! What a confined command does not see unless asked: daemon sockets and
//! credentials in the home directories.

use std::path::{Path, PathBuf};

use tack_protocol::SandboxProfile;

/// Daemon sockets live under /run (docker, D-Bus, systemd): below Landlock
/// ABI 9 nothing else stops a confined command connecting to them, and a
/// command run by root would be root to them. `strict` has no network, so
/// it loses nothing by not seeing /run (workspace-write keeps it for DNS
/// configurations that point there).
///
/// Credentials in the home directory are hidden too: under `strict` every
/// usual place ([`CREDENTIAL_DIRS`]), which a command with no network has
/// no use for but to show the model (and so the trace); under
/// `workspace-write`, whose network a task may use with the user's own
/// keys (`git push` over ssh), only tack's (`~/.config/tack`, its
/// providers' API keys), which no command needs.
///
/// Both homes count: `$HOME` and the account's (from the user database),
/// when they differ (`HOME` pointed elsewhere must not uncover `/root`).
pub(super) fn default_hidden(profile: SandboxProfile, workspace: &Path) -> Vec<PathBuf> {
    hidden_in(profile, workspace, &homes())
}

/// [`default_hidden`] with `homes` the home directories to look in.
fn hidden_in(profile: SandboxProfile, workspace: &Path, homes: &[PathBuf]) -> Vec<PathBuf> {
    let writable = [workspace.to_path_buf()];
    let names = match profile {
        SandboxProfile::Off => return Vec::new(),
        SandboxProfile::Strict => CREDENTIAL_DIRS,
        SandboxProfile::WorkspaceWrite => &[TACK_CONFIG][..],
    };
    let mut hidden = match profile {
        SandboxProfile::Strict => daemon_socket_dirs(&writable),
        _ => Vec::new(),
    };
    for home in homes {
        hidden.extend(home_dirs(Some(home), names, &writable));
    }
    hidden
}

/// `$HOME`, and the account's home directory when it is another.
fn homes() -> Vec<PathBuf> {
    // Asked once: every confined command's walls are made with it.
    static ACCOUNT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Some(account) = ACCOUNT.get_or_init(account_home)
        && !homes.contains(account)
    {
        homes.push(account.clone());
    }
    homes
}

/// The home directory the user database gives this process's user.
#[allow(unsafe_code)] // getpwuid_r: the user database has no safe binding here
fn account_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer is to memory owned here and live for the call;
    // the buffer's length is passed with it. `found` is null or `&entry`.
    let status = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into `buffer`, NUL-terminated by getpwuid_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    path.is_absolute().then_some(path)
}

/// tack's own configuration: the providers' API keys (`env`).
const TACK_CONFIG: &str = ".config/tack";

/// Where credentials usually live in a home directory.
const CREDENTIAL_DIRS: &[&str] = &[
    TACK_CONFIG,
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".config/gh",
    ".password-store",
    // Coding agents' and model tools' logins.
    ".codex",
    ".claude",
    ".gemini",
    ".huggingface",
    ".config/huggingface",
    // Registry logins (podman's auth.json) and cloud CLIs.
    ".config/containers",
    ".oci",
    ".terraform.d",
];

/// The directories `names` under `home` that exist and hold none of the
/// `writable` paths (a workspace inside one stays visible).
fn home_dirs(home: Option<&Path>, names: &[&str], writable: &[PathBuf]) -> Vec<PathBuf> {
    let Some(home) = home.filter(|h| h.is_absolute()) else {
        return Vec::new();
    };
    names
        .iter()
        .map(|name| home.join(name))
        .filter(|dir| dir.is_dir() && !writable.iter().any(|w| w.starts_with(dir)))
        .collect()
}

/// `/run` and `/var/run`, where they are real directories holding none of
/// the `writable` paths.
pub(super) fn daemon_socket_dirs(writable: &[PathBuf]) -> Vec<PathBuf> {
    ["/run", "/var/run"]
        .iter()
        .map(Path::new)
        .filter(|dir| {
            dir.is_dir() && !dir.is_symlink() && !writable.iter().any(|w| w.starts_with(dir))
        })
        .map(Path::to_path_buf)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_the_home_are_hidden_but_a_workspace_inside_one() {
        let home = tempfile::tempdir().unwrap();
        for dir in [".ssh", ".config/tack", ".aws/work"] {
            std::fs::create_dir_all(home.path().join(dir)).unwrap();
        }
        let workspace = [home.path().join(".aws/work")];
        let strict = home_dirs(Some(home.path()), CREDENTIAL_DIRS, &workspace);
        assert_eq!(
            strict,
            [home.path().join(".config/tack"), home.path().join(".ssh")]
        );
        let tack_only = home_dirs(Some(home.path()), &[TACK_CONFIG], &workspace);
        assert_eq!(tack_only, [home.path().join(".config/tack")]);
        assert!(home_dirs(Some(Path::new("relative")), CREDENTIAL_DIRS, &workspace).is_empty());
        assert!(home_dirs(None, CREDENTIAL_DIRS, &workspace).is_empty());
    }

    #[test]
    fn every_home_given_has_its_credentials_covered() {
        // $HOME pointed elsewhere must not uncover the account's home.
        let (elsewhere, account) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir_all(account.path().join(".ssh")).unwrap();
        std::fs::create_dir_all(elsewhere.path().join(".config/tack")).unwrap();
        let workspace = Path::new("/nonexistent-workspace");
        let homes = [elsewhere.path().to_path_buf(), account.path().to_path_buf()];
        let hidden = hidden_in(SandboxProfile::Strict, workspace, &homes);
        assert!(hidden.contains(&account.path().join(".ssh")), "{hidden:?}");
        assert!(
            hidden.contains(&elsewhere.path().join(".config/tack")),
            "{hidden:?}"
        );
        let only_tack = hidden_in(SandboxProfile::WorkspaceWrite, workspace, &homes);
        assert_eq!(only_tack, [elsewhere.path().join(".config/tack")]);
    }
}
