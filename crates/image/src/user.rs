//! The image's `USER` (`name`, `uid`, `name:group`, `uid:gid`) as the ids
//! and home directory its commands get, looked up in the extracted
//! filesystem's /etc/passwd and /etc/group as the engine would.

use std::path::{Path, PathBuf};

use crate::ImageError;

/// Who an image's commands run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUser {
    pub uid: u32,
    pub gid: u32,
    /// `HOME` for its commands.
    pub home: PathBuf,
}

/// Bytes of an image's `/etc/passwd` or `/etc/group` read: far more than
/// any image's.
const USERS_LIMIT: u64 = 16 * 1024 * 1024;

/// A file of the extracted image, read by tack on the host: only a regular
/// file (a link is resolved on the host, where `/etc/passwd -> /dev/zero`
/// would fill memory), within [`USERS_LIMIT`]; empty otherwise.
fn image_file(rootfs: &Path, relative: &str) -> String {
    use std::io::Read;
    // Resolved on the host: a link on the way that leads out of the image
    // (`/etc` -> the host's `/etc`) would read the host's users.
    let inside = |path: &Path| {
        let (Ok(real), Ok(root)) = (path.canonicalize(), rootfs.canonicalize()) else {
            return None;
        };
        real.starts_with(&root).then_some(real)
    };
    let Some(path) = inside(&rootfs.join(relative)) else {
        return String::new();
    };
    if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file()) {
        return String::new();
    }
    let mut text = String::new();
    let read = std::fs::File::open(&path)
        .and_then(|file| file.take(USERS_LIMIT).read_to_string(&mut text));
    if read.is_err() {
        text.clear();
    }
    text
}

/// `spec` (the image's `USER`; `None` or empty is root) in `rootfs`, whose
/// ids below `mapped` are the sandbox's (a user beyond them is refused).
pub fn resolve_user(
    rootfs: &Path,
    spec: Option<&str>,
    mapped: u32,
) -> Result<ImageUser, ImageError> {
    let spec = spec.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("0");
    let (user, group) = match spec.split_once(':') {
        Some((user, group)) => (user, Some(group)),
        None => (spec, None),
    };
    let passwd = image_file(rootfs, "etc/passwd");
    let missing = || ImageError::NoSuchUser {
        user: spec.to_string(),
    };
    // name:x:uid:gid:gecos:home:shell
    let entry = passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && (f[0] == user || (user.parse::<u32>().is_ok() && f[2] == user)));
    let (uid, primary, home) = match (&entry, user.parse::<u32>()) {
        (Some(f), _) => (
            f[2].parse().map_err(|_| missing())?,
            f[3].parse().map_err(|_| missing())?,
            PathBuf::from(f[5]),
        ),
        // A numeric user the image does not list runs with its own id as
        // its group, in `/` (as docker does).
        (None, Ok(uid)) => (uid, uid, PathBuf::from("/")),
        (None, Err(_)) => return Err(missing()),
    };
    let gid = match group {
        None => primary,
        Some(group) => match group.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => {
                let groups = image_file(rootfs, "etc/group");
                groups
                    .lines()
                    .map(|line| line.split(':').collect::<Vec<_>>())
                    .find(|f| f.len() >= 3 && f[0] == group)
                    .and_then(|f| f[2].parse().ok())
                    .ok_or_else(missing)?
            }
        },
    };
    if uid >= mapped || gid >= mapped {
        return Err(ImageError::UserBeyondMap {
            user: spec.to_string(),
            uid,
            gid,
            mapped,
        });
    }
    Ok(ImageUser { uid, gid, home })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(rootfs: &Path, spec: Option<&str>) -> Result<ImageUser, ImageError> {
        resolve_user(rootfs, spec, 65_536)
    }

    fn rootfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\napp:x:1000:1001::/home/app:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("etc/group"), "root:x:0:\nstaff:x:50:\n").unwrap();
        dir
    }

    #[test]
    fn users_resolve_by_name_or_id_with_their_home_and_group() {
        let dir = rootfs();
        let root = resolve(dir.path(), None).unwrap();
        assert_eq!(
            (root.uid, root.gid, root.home),
            (0, 0, PathBuf::from("/root"))
        );
        let app = resolve(dir.path(), Some("app")).unwrap();
        assert_eq!((app.uid, app.gid), (1000, 1001));
        assert_eq!(app.home, PathBuf::from("/home/app"));
        let by_id = resolve(dir.path(), Some("1000:staff")).unwrap();
        assert_eq!((by_id.uid, by_id.gid), (1000, 50));
        let unlisted = resolve(dir.path(), Some("4242")).unwrap();
        assert_eq!((unlisted.uid, unlisted.gid), (4242, 4242));
    }

    #[test]
    fn an_unknown_user_or_group_is_an_error_naming_it() {
        let dir = rootfs();
        let error = resolve(dir.path(), Some("ghost")).unwrap_err();
        assert!(error.to_string().contains("`ghost`"), "{error}");
        assert!(resolve(dir.path(), Some("app:nogroup")).is_err());
    }

    /// The image's files are read on the host: a link there (to
    /// /dev/zero) is not followed; the image has no users but root then.
    #[test]
    fn a_linked_passwd_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("etc/passwd")).unwrap();
        assert!(resolve(dir.path(), Some("nobody")).is_err());
        assert_eq!(resolve(dir.path(), None).unwrap().uid, 0);
    }

    /// An image whose /etc is a link to the host's: the host's users are
    /// not the image's (nor their homes the agent's).
    #[test]
    fn an_etc_linked_out_of_the_image_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        assert!(resolve(dir.path(), Some("root")).is_err());
        assert_eq!(resolve(dir.path(), None).unwrap().home, PathBuf::from("/"));
    }

    /// Ids beyond the sandbox's map would wrap onto other host ids.
    #[test]
    fn a_user_beyond_the_map_is_refused() {
        let dir = rootfs();
        let error = resolve(dir.path(), Some("4294967295"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("uid 4294967295") && error.contains("below 65536"),
            "{error}"
        );
        assert!(resolve(dir.path(), Some("1000:70000")).is_err());
        assert!(resolve(dir.path(), Some("65535")).is_ok());
    }
}
