//! Where a path points: inside the workspace (shown relative, so rules can
//! say `src/**`) or outside (shown absolute, so `/**` means "outside").
//! Resolution is lexical — `..`, `.`, `~` and the current directory — and
//! does not follow symlinks: a link inside the workspace that points out is
//! judged as inside.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone)]
pub(crate) struct Places {
    workspace: PathBuf,
    /// The workspace as given and, when it differs, with symlinks resolved,
    /// so that `/tmp/ws/x` and `/private/tmp/ws/x` both count as inside.
    roots: Vec<PathBuf>,
    home: Option<PathBuf>,
}

impl Places {
    pub fn new(workspace: &Path) -> Places {
        let given = absolute(workspace);
        let mut roots = vec![given.clone()];
        match std::fs::canonicalize(&given) {
            Ok(canonical) if canonical != given => roots.push(canonical),
            _ => {}
        }
        Places {
            workspace: given,
            roots,
            home: std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute()),
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The absolute, normalized path `text` names when the shell is in `base`.
    pub fn resolve(&self, base: &Path, text: &str) -> PathBuf {
        let joined = if text == "~" || text.starts_with("~/") {
            let home = self.home.clone().unwrap_or_else(|| PathBuf::from("/~"));
            home.join(text.trim_start_matches('~').trim_start_matches('/'))
        } else if let Some(user) = text.strip_prefix('~') {
            // `~alice/x`: someone else's home, outside the workspace in any case.
            Path::new("/home").join(user)
        } else {
            base.join(text)
        };
        normalize(&joined)
    }

    pub fn is_inside(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }

    /// How path rules see `path` (absolute): relative to the workspace, `.`
    /// for the workspace itself, or absolute when outside.
    pub fn display(&self, path: &Path) -> String {
        for root in &self.roots {
            if let Ok(relative) = path.strip_prefix(root) {
                let text = relative.to_string_lossy();
                return if text.is_empty() {
                    ".".to_string()
                } else {
                    text.into_owned()
                };
            }
        }
        path.to_string_lossy().into_owned()
    }
}

fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    normalize(&joined)
}

/// Removes `.` and applies `..` lexically (never above `/`).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn places() -> Places {
        let mut places = Places::new(Path::new("/ws/proj"));
        places.home = Some(PathBuf::from("/home/me"));
        places
    }

    fn show(text: &str) -> String {
        let p = places();
        p.display(&p.resolve(p.workspace(), text))
    }

    #[test]
    fn inside_paths_are_relative_outside_paths_absolute() {
        assert_eq!(show("src/../a.txt"), "a.txt");
        assert_eq!(show("."), ".");
        assert_eq!(show("./"), ".");
        assert_eq!(show("../x"), "/ws/x");
        assert_eq!(show("../../../../etc/passwd"), "/etc/passwd");
        assert_eq!(show("/ws/proj/b"), "b");
        assert_eq!(show("/ws/projects"), "/ws/projects");
        assert_eq!(show("~/.ssh/id"), "/home/me/.ssh/id");
        assert_eq!(show("~bob/x"), "/home/bob/x");
        assert_eq!(show("/dev/null"), "/dev/null");
    }

    #[test]
    fn resolves_against_another_base() {
        let p = places();
        assert_eq!(
            p.display(&p.resolve(Path::new("/etc"), "passwd")),
            "/etc/passwd"
        );
        assert!(p.is_inside(&p.resolve(Path::new("/ws/proj/sub"), "..")));
    }
}
