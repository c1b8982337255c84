//! Where the files a Dockerfile copies land in the imported task: under
//! the WORKDIR they become the fixture; elsewhere (`/queries`, `/skills`)
//! each destination directory becomes a place shown read-only at its path.
//! `COPY` semantics follow Docker's: a directory source copies its
//! contents; a file goes into a destination ending in `/` (or taking
//! several sources) under its own name, else to the destination itself.

use std::path::{Path, PathBuf};

use globset::Glob;

use super::assess::{Placement, within};

/// Where a task's copied files go, relative to the imported task's
/// directory, and what cannot be placed.
#[derive(Debug, Default)]
pub(super) struct Layout {
    /// (source on the host, destination relative to the task directory).
    pub files: Vec<(PathBuf, PathBuf)>,
    /// (task-relative directory, absolute path it appears at).
    pub places: Vec<(String, String)>,
    pub container_reasons: Vec<String>,
    pub notes: Vec<String>,
}

pub(super) fn layout(placements: &[Placement], workdir: &str) -> Layout {
    let mut out = Layout::default();
    for placement in placements {
        let sources = expand(&placement.source);
        if sources.is_empty() {
            out.notes.push(format!(
                "{} matches nothing in the build context; nothing was copied to {}",
                placement.source.display(),
                placement.at
            ));
            continue;
        }
        let into = placement.at.ends_with('/') || sources.len() > 1 || is_glob(&placement.source);
        for source in sources {
            let at = if source.is_dir() || !into {
                placement.at.trim_end_matches('/').to_string()
            } else {
                let name = source.file_name().map(|n| n.to_string_lossy().into_owned());
                format!(
                    "{}/{}",
                    placement.at.trim_end_matches('/'),
                    name.unwrap_or_default()
                )
            };
            out.place(source, &at, workdir);
        }
        if let Some(owner) = &placement.chown {
            out.notes.push(format!(
                "{} is owned by {owner} in the image; here it belongs to the user running tack",
                placement.at
            ));
        }
    }
    out
}

impl Layout {
    /// Records `source` (a file or a directory's contents) at absolute `at`.
    fn place(&mut self, source: PathBuf, at: &str, workdir: &str) {
        if within(at, workdir) {
            let relative = at[workdir.trim_end_matches('/').len()..].trim_start_matches('/');
            self.files
                .push((source, Path::new("fixture").join(relative)));
            return;
        }
        // The directory shown at its path: the copy itself for a directory,
        // the one it lands in for a file.
        let root = if source.is_dir() {
            at.to_string()
        } else {
            match at.rsplit_once('/') {
                Some(("", _)) | None => "/".to_string(),
                Some((parent, _)) => parent.to_string(),
            }
        };
        let existing = self
            .places
            .iter()
            .find(|(_, shown)| within(&root, shown))
            .cloned();
        let (dir, shown) = match existing {
            Some(place) => place,
            None => {
                if root == "/" || Path::new(&root).exists() {
                    self.container_reasons.push(format!(
                        "copies {} to {at}: showing {root} there would hide the host's own {root}",
                        source.display()
                    ));
                    return;
                }
                let dir = format!("places/{}", self.places.len() + 1);
                self.places.push((dir.clone(), root.clone()));
                (dir, root)
            }
        };
        let relative = at[shown.trim_end_matches('/').len()..].trim_start_matches('/');
        self.files.push((source, Path::new(&dir).join(relative)));
    }
}

fn is_glob(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().contains(['*', '?', '[']))
}

/// A source as written, or the entries its last component's glob matches,
/// sorted; nothing when it does not exist.
fn expand(source: &Path) -> Vec<PathBuf> {
    if !is_glob(source) {
        return if source.exists() {
            vec![source.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let (Some(parent), Some(pattern)) = (source.parent(), source.file_name()) else {
        return Vec::new();
    };
    let Ok(glob) = Glob::new(&pattern.to_string_lossy()) else {
        return Vec::new();
    };
    let matcher = glob.compile_matcher();
    let mut found: Vec<PathBuf> = std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| matcher.is_match(entry.file_name()))
        .map(|entry| entry.path())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(source: &Path, at: &str) -> Placement {
        Placement {
            source: source.to_path_buf(),
            at: at.to_string(),
            chown: None,
            outside_workdir: false,
        }
    }

    #[test]
    fn follows_docker_copy_semantics() {
        let context = tempfile::tempdir().unwrap();
        let root = context.path();
        std::fs::create_dir_all(root.join("project/pkg")).unwrap();
        std::fs::write(root.join("project/pkg/a.py"), "").unwrap();
        std::fs::write(root.join("access.log"), "").unwrap();
        std::fs::write(root.join("q1.sql"), "").unwrap();
        std::fs::write(root.join("q2.sql"), "").unwrap();
        let placements = [
            placement(&root.join("project"), "/app/"),
            placement(&root.join("access.log"), "/app/logs/access.log"),
            placement(&root.join("*.sql"), "/queries"),
            placement(&root.join("access.log"), "/queries/raw/"),
        ];
        let layout = layout(&placements, "/app");
        let targets: Vec<String> = layout
            .files
            .iter()
            .map(|(_, to)| to.display().to_string())
            .collect();
        assert_eq!(
            targets,
            [
                "fixture/",
                "fixture/logs/access.log",
                "places/1/q1.sql",
                "places/1/q2.sql",
                "places/1/raw/access.log"
            ]
        );
        assert_eq!(
            layout.places,
            [("places/1".to_string(), "/queries".to_string())]
        );
        assert!(layout.container_reasons.is_empty());
    }

    #[test]
    fn refuses_to_hide_a_host_directory() {
        let context = tempfile::tempdir().unwrap();
        std::fs::write(context.path().join("tool"), "").unwrap();
        let layout = layout(
            &[placement(&context.path().join("tool"), "/usr/bin/tool")],
            "/app",
        );
        assert!(layout.files.is_empty());
        assert!(
            layout.container_reasons[0].contains("/usr/bin"),
            "{:?}",
            layout.container_reasons
        );
    }
}
