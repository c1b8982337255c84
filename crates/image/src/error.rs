use crate::engine::ENGINE_VAR;
use std::path::PathBuf;

/// Why an image could not be built, inspected or extracted. Each says what
/// to do.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(
        "no container engine is usable here ({tried}); install podman (or docker with a running \
         daemon), or run tasks without an image"
    )]
    NoEngine { tried: String },
    #[error(
        "{ENGINE_VAR} is `{value}`, which is not an engine tack drives: set it to podman or \
         docker, or unset it to use whichever answers"
    )]
    EngineVar { value: String },
    #[error("the container engine `{engine}` is not usable: {why}; `{engine} info` says more")]
    Unusable { engine: String, why: String },
    #[error("could not run `{command}`: {source}")]
    Run {
        command: String,
        source: std::io::Error,
    },
    #[error(
        "building the image failed (exit {status}); the whole log is in {}:\n{tail}{}",
        log.display(),
        unmapped_hint(missing)
    )]
    Build {
        status: String,
        log: PathBuf,
        tail: String,
        /// Base images (`FROM`) the engine does not have: where no registry
        /// answers, the likely cause. With the name the suite's `[images]`
        /// maps to it, when it is a map's target.
        missing: Vec<(String, Option<String>)>,
    },
    #[error(
        "image {image} is neither here nor pullable ({why}); without a registry, map it to a \
         local image in the suite's [images] (see suites/README.md)"
    )]
    Pull { image: String, why: String },
    #[error(
        "the image's user `{user}` is not in its /etc/passwd (or /etc/group); name a user the \
         image has, or numeric ids"
    )]
    NoSuchUser { user: String },
    #[error(
        "the image's user `{user}` is uid {uid}, gid {gid}: tack maps an image's ids below \
         {mapped} only; run the task as a user of a smaller id (USER in the Dockerfile, or the \
         task's user)"
    )]
    UserBeyondMap {
        user: String,
        uid: u32,
        gid: u32,
        mapped: u32,
    },
    #[error(
        "{}: line {line}: `{source_path}` is outside the build context; a build reads only its \
         context: move the file into it",
        dockerfile.display()
    )]
    OutsideContext {
        dockerfile: PathBuf,
        line: usize,
        source_path: String,
    },
    #[error(
        "{}: a symbolic link to {}, outside the task; a build never follows a link out of its \
         task: copy the file in instead",
        link.display(),
        target.display()
    )]
    LinkOut { link: PathBuf, target: PathBuf },
    #[error("`{command}` failed: {stderr}")]
    Engine { command: String, stderr: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the image of service `{name}`: {error}")]
    Service {
        name: String,
        error: Box<ImageError>,
    },
    #[error("the engine's description of image {image} could not be read: {source}")]
    Inspect {
        image: String,
        source: serde_json::Error,
    },
}

/// What to do about base images the engine lacks, when there are any.
fn unmapped_hint(missing: &[(String, Option<String>)]) -> String {
    let mut hint = String::new();
    let unmapped: Vec<&str> = (missing.iter())
        .filter(|(_, from)| from.is_none())
        .map(|(image, _)| image.as_str())
        .collect();
    if !unmapped.is_empty() {
        hint.push_str(&format!(
            "\nnot on this machine: {}; the build pulls them from a registry. Where none is \
             reachable, map each to a local image in the suite's [images] (see suites/README.md)",
            unmapped.join(", ")
        ));
    }
    for (image, from) in missing {
        if let Some(from) = from {
            hint.push_str(&format!(
                "\n[images] (the suite's, or ~/.config/tack/images.toml) maps {from} to {image}, \
                 which is not on this machine: correct the name in the map (the engine's \
                 `images` command lists what is here), or build or import that image"
            ));
        }
    }
    hint
}

impl ImageError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> ImageError {
        ImageError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The last `n` lines of `text`: where a failed build or script says why.
pub fn last_lines(text: &str, n: usize) -> &str {
    let text = text.trim_end();
    let start = text
        .rmatch_indices('\n')
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i + 1);
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::{last_lines, unmapped_hint};

    #[test]
    fn a_missing_map_target_names_its_entry() {
        let hint = unmapped_hint(&[
            ("ubuntu:24.04".to_string(), None),
            (
                "localhost/tack-base:bookwrm".to_string(),
                Some("debian:bookworm".to_string()),
            ),
        ]);
        assert!(
            hint.contains("not on this machine: ubuntu:24.04;"),
            "{hint}"
        );
        assert!(
            hint.contains(
                "[images] (the suite's, or ~/.config/tack/images.toml) maps debian:bookworm to \
                 localhost/tack-base:bookwrm, which is not on this machine: correct the name"
            ),
            "{hint}"
        );
    }

    #[test]
    fn keeps_the_last_lines_only() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a\nb\n", 5), "a\nb");
        assert_eq!(last_lines("", 3), "");
    }
}
