//! Building a task's image with the engine, once per content: the tag is
//! the hash of the build context, the Dockerfile and the image map, so a
//! task whose environment did not change is not built again, and one whose
//! environment changed gets a new image (and a new id in the run's
//! fingerprint).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sha2::{Digest, Sha256};

use crate::{Engine, ImageConfig, ImageError};

/// Public image names and the local images that stand for them on a
/// machine without a registry (`ubuntu:24.04` → `localhost/tack-base:bookworm`).
pub type ImageMap = BTreeMap<String, String>;

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildSpec {
    /// The build context (what `COPY` and `ADD` read).
    pub context: PathBuf,
    pub dockerfile: PathBuf,
    /// What nothing of the build may lead out of (the task's directory):
    /// a `COPY ../` above the context, or a link out of it, is refused.
    pub boundary: PathBuf,
}

/// A built (or already cached) image.
#[derive(Debug, Clone)]
pub struct Built {
    /// `localhost/tack-env:<hash>`.
    pub tag: String,
    pub config: ImageConfig,
    /// The build's output (none when the image was cached).
    pub log: Option<PathBuf>,
    pub cached: bool,
}

/// Lines of a failed build's log an error quotes.
const TAIL_LINES: usize = 30;

/// Builds `spec` unless an image of the same content exists; the build's
/// log goes under `cache`.
pub fn build(
    engine: &Engine,
    spec: &BuildSpec,
    map: &ImageMap,
    cache: &Path,
) -> Result<Built, ImageError> {
    let text = std::fs::read_to_string(&spec.dockerfile)
        .map_err(|e| ImageError::io(&spec.dockerfile, e))?;
    if let Some(escape) = crate::sources_outside_context(&text).into_iter().next() {
        return Err(ImageError::OutsideContext {
            dockerfile: spec.dockerfile.clone(),
            line: escape.line,
            source_path: escape.source,
        });
    }
    if let Some((link, target)) = crate::links_leaving(&spec.context, &spec.boundary)?
        .into_iter()
        .next()
    {
        return Err(ImageError::LinkOut { link, target });
    }
    let dockerfile = map_from_lines(&text, map);
    // The base images' ids are part of what is built: a stand-in rebuilt,
    // or a tag that moved, is another image.
    let bases = base_ids(engine, &dockerfile);
    let hash = context_hash(&spec.context, &format!("{dockerfile}\n{bases}"))?;
    let tag = format!("localhost/tack-env:{}", &hash[..16]);
    if engine.has_image(&tag) {
        return Ok(Built {
            config: engine.config(&tag)?,
            tag,
            log: None,
            cached: true,
        });
    }
    let logs = cache.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| ImageError::io(&logs, e))?;
    let log = logs.join(format!("{}.log", &hash[..16]));
    let mut written =
        tempfile::NamedTempFile::new_in(&logs).map_err(|e| ImageError::io(&logs, e))?;
    written
        .write_all(dockerfile.as_bytes())
        .map_err(|e| ImageError::io(written.path(), e))?;
    let file = std::fs::File::create(&log).map_err(|e| ImageError::io(&log, e))?;
    let err = file.try_clone().map_err(|e| ImageError::io(&log, e))?;
    let dockerfile_arg = written.path().display().to_string();
    let context_arg = spec.context.display().to_string();
    let status = engine
        .command(&["build", "-t", &tag, "-f", &dockerfile_arg, &context_arg])
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        .status()
        .map_err(|source| ImageError::Run {
            command: format!("{} build", engine.kind.as_str()),
            source,
        })?;
    if !status.success() {
        let tail = tail(&log);
        let missing = missing_bases(engine, &dockerfile, map);
        return Err(ImageError::Build {
            status: status
                .code()
                .map_or_else(|| "by a signal".to_string(), |c| c.to_string()),
            log,
            tail,
            missing,
        });
    }
    Ok(Built {
        config: engine.config(&tag)?,
        tag,
        log: Some(log),
        cached: false,
    })
}

/// The base images of `dockerfile` (its `FROM`s mapped) the engine lacks,
/// each with the name `map` maps to it when it is a map's target: the map
/// is there, its image is not (a typo, or not built yet).
fn missing_bases(
    engine: &Engine,
    dockerfile: &str,
    map: &ImageMap,
) -> Vec<(String, Option<String>)> {
    // `scratch` is no image, and a name still holding `$` is a build
    // argument tack cannot know.
    from_images(dockerfile)
        .into_iter()
        .filter(|image| !image.eq_ignore_ascii_case("scratch") && !image.contains('$'))
        .filter(|image| !engine.has_image(image))
        .map(|image| {
            let mapped_from = map
                .iter()
                .find(|(_, target)| **target == image)
                .map(|(name, _)| name.clone());
            (image, mapped_from)
        })
        .collect()
}

/// `FROM` and `COPY --from=` images of `dockerfile` the engine has, each
/// with its id, one per line (stages named earlier and images still to be
/// pulled are left out).
fn base_ids(engine: &Engine, dockerfile: &str) -> String {
    let mut stages: Vec<String> = Vec::new();
    let mut ids = String::new();
    for line in dockerfile.lines() {
        if let Some(from) = copy_from(line)
            && !stages.contains(&from.to_ascii_lowercase())
            && let Ok(config) = engine.config(from)
        {
            ids.push_str(&format!("# copied from {from} {}\n", config.id));
        }
        let Some((image, stage)) = from_line(line) else {
            continue;
        };
        if let Some(name) = stage {
            stages.push(name.to_ascii_lowercase());
        }
        if stages.contains(&image.to_ascii_lowercase()) && !engine.has_image(image) {
            continue;
        }
        if let Ok(config) = engine.config(image) {
            ids.push_str(&format!("# base {image} {}\n", config.id));
        }
    }
    ids
}

/// A `FROM` line's image and the stage it names (`AS name`), if any.
fn from_line(line: &str) -> Option<(&str, Option<&str>)> {
    let mut words = line.split_whitespace();
    if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
        return None;
    }
    let rest: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
    let image = rest.first()?;
    let stage = match rest.as_slice() {
        [_, as_word, name, ..] if as_word.eq_ignore_ascii_case("AS") => Some(*name),
        _ => None,
    };
    Some((image, stage))
}

/// The images `dockerfile`'s `FROM` lines start from, stages named earlier
/// left out, each once.
fn from_images(dockerfile: &str) -> Vec<String> {
    let args = global_args(dockerfile);
    let mut stages: Vec<String> = Vec::new();
    let mut images: Vec<String> = Vec::new();
    for line in dockerfile.lines() {
        let expanded = expand_args(line, &args);
        let Some((image, stage)) = from_line(&expanded) else {
            continue;
        };
        if !stages.contains(&image.to_ascii_lowercase()) && !images.iter().any(|i| i == image) {
            images.push(image.to_string());
        }
        if let Some(name) = stage {
            stages.push(name.to_ascii_lowercase());
        }
    }
    images
}

/// The last lines of a log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    crate::last_lines(&text, TAIL_LINES).to_string()
}

/// A Dockerfile with each image the map names replaced by its local
/// stand-in: a `FROM` image, and the image a `COPY --from=` copies out of
/// (`COPY --from=ghcr.io/astral-sh/uv:latest /uv /bin/`). A stage name
/// (`FROM builder`, `COPY --from=builder`) is left alone unless the map
/// names it; a pinned digest is looked up with and without its pin.
pub fn map_from_lines(dockerfile: &str, map: &ImageMap) -> String {
    let mut out = String::with_capacity(dockerfile.len());
    let args = global_args(dockerfile);
    for line in dockerfile.split_inclusive('\n') {
        let expanded = expand_args(line, &args);
        let mapped = map_from_line(&expanded, map).or_else(|| map_copy_from(line, map));
        out.push_str(&mapped.unwrap_or_else(|| line.to_string()));
    }
    out
}

/// The `ARG NAME=default` lines before the first `FROM`: what `FROM
/// ${NAME}` names (tack passes no --build-arg, so the default is what is
/// built). Quotes around a value are dropped.
fn global_args(dockerfile: &str) -> Vec<(String, String)> {
    let arg = |line: &str| {
        let mut words = line.split_whitespace();
        if !words.next()?.eq_ignore_ascii_case("ARG") {
            return None;
        }
        let (name, value) = words.next()?.split_once('=')?;
        Some((
            name.to_string(),
            value.trim_matches(['"', '\'']).to_string(),
        ))
    };
    dockerfile
        .lines()
        .take_while(|line| from_line(line).is_none())
        .filter_map(arg)
        .collect()
}

/// `line` with `$NAME` and `${NAME}` of `args` replaced by their values;
/// a name is read whole (`$BASE_IMAGE` is not `$BASE` and `_IMAGE`), and
/// one `args` does not name is left as written.
fn expand_args(line: &str, args: &[(String, String)]) -> String {
    let value_of = |name: &str| args.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v);
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, used) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => ("", 0),
            },
            None => {
                let end = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        match value_of(name).filter(|_| !name.is_empty()) {
            Some(value) => out.push_str(value),
            None => out.push_str(&rest[at..at + 1 + used]),
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    out
}

/// The image (or stage) a `COPY --from=` line copies out of.
fn copy_from(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("COPY") {
        return None;
    }
    words
        .take_while(|w| w.starts_with("--"))
        .find_map(|w| w.strip_prefix("--from="))
        .filter(|from| !from.is_empty())
}

fn map_copy_from(line: &str, map: &ImageMap) -> Option<String> {
    let from = copy_from(line)?;
    let mapped = mapped(from, map)?;
    Some(line.replacen(&format!("--from={from}"), &format!("--from={mapped}"), 1))
}

fn map_from_line(line: &str, map: &ImageMap) -> Option<String> {
    let trimmed = line.trim_start();
    let keyword = trimmed.get(..4)?;
    if !keyword.eq_ignore_ascii_case("from") || !trimmed[4..].starts_with([' ', '\t']) {
        return None;
    }
    let words: Vec<&str> = trimmed[4..].split_whitespace().collect();
    let image = words.iter().find(|w| !w.starts_with("--"))?;
    let mapped = mapped(image, map)?;
    let rest: Vec<String> = words
        .iter()
        .map(|w| {
            if w == image {
                mapped.clone()
            } else {
                (*w).to_string()
            }
        })
        .collect();
    let newline = if line.ends_with('\n') { "\n" } else { "" };
    Some(format!("FROM {}{newline}", rest.join(" ")))
}

/// The local image the map names for `image` (as written, without its
/// digest pin, or without `docker.io/library/`), if any.
pub fn mapped(image: &str, map: &ImageMap) -> Option<String> {
    let unpinned = image.split('@').next().unwrap_or(image);
    let short = |name: &str| {
        name.strip_prefix("docker.io/library/")
            .or_else(|| name.strip_prefix("docker.io/"))
            .unwrap_or(name)
            .to_string()
    };
    [
        image.to_string(),
        unpinned.to_string(),
        short(image),
        short(unpinned),
    ]
    .iter()
    .find_map(|key| map.get(key).cloned())
}

/// The hash of a build: every entry of the context (its path, kind, mode,
/// a symlink's target, a file's bytes) and the Dockerfile as built.
pub fn context_hash(context: &Path, dockerfile: &str) -> Result<String, ImageError> {
    let mut entries = Vec::new();
    collect(context, context, &mut entries)?;
    entries.sort();
    let mut hasher = Sha256::new();
    hasher.update(b"tack-image-1\0");
    hasher.update(dockerfile.as_bytes());
    for relative in entries {
        let path = context.join(&relative);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| ImageError::io(&path, e))?;
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update(meta.permissions().mode().to_le_bytes());
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| ImageError::io(&path, e))?;
            hasher.update(b"link\0");
            hasher.update(target.to_string_lossy().as_bytes());
        } else if meta.is_file() {
            let bytes = std::fs::read(&path).map_err(|e| ImageError::io(&path, e))?;
            hasher.update(meta.size().to_le_bytes());
            hasher.update(&bytes);
        }
        hasher.update([0]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Bytes in lower-case hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ImageError> {
    for entry in std::fs::read_dir(dir).map_err(|e| ImageError::io(dir, e))? {
        let entry = entry.map_err(|e| ImageError::io(dir, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| ImageError::io(&path, e))?;
        out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        if kind.is_dir() {
            collect(root, &path, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> ImageMap {
        [
            ("ubuntu:24.04", "localhost/tack-base:bookworm"),
            ("python:3.13-slim-bookworm", "localhost/tack-base:trixie"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    #[test]
    fn from_lines_are_mapped_and_the_rest_is_kept() {
        let text = "FROM ubuntu:24.04\nRUN echo hi\nfrom --platform=linux/amd64 python:3.13-slim-bookworm@sha256:9d7f AS base\nFROM base\nFROM alpine:3\n";
        assert_eq!(
            map_from_lines(text, &map()),
            "FROM localhost/tack-base:bookworm\nRUN echo hi\nFROM --platform=linux/amd64 localhost/tack-base:trixie AS base\nFROM base\nFROM alpine:3\n"
        );
        assert_eq!(
            map_from_lines("FROM docker.io/library/ubuntu:24.04", &map()),
            "FROM localhost/tack-base:bookworm"
        );
        assert_eq!(
            map_from_lines(
                "FROM base AS build\nCOPY --chown=0:0 --from=ubuntu:24.04 /etc/os-release /x\n\
                 COPY --from=build /app /app\nCOPY --from=alpine:3 /a /b\ncopy --from=0 /c /d\n",
                &map()
            ),
            "FROM base AS build\nCOPY --chown=0:0 --from=localhost/tack-base:bookworm /etc/os-release /x\n\
             COPY --from=build /app /app\nCOPY --from=alpine:3 /a /b\ncopy --from=0 /c /d\n"
        );
    }

    #[test]
    fn a_from_named_by_a_global_arg_is_mapped_and_listed() {
        let text = "ARG BASE=ubuntu:24.04\nARG TAG=\"3\"\nFROM ${BASE}\nFROM alpine:$TAG AS tools\nFROM tools\n";
        assert_eq!(
            map_from_lines(text, &map()),
            "ARG BASE=ubuntu:24.04\nARG TAG=\"3\"\nFROM localhost/tack-base:bookworm\nFROM alpine:$TAG AS tools\nFROM tools\n"
        );
        assert_eq!(from_images(text), ["ubuntu:24.04", "alpine:3"]);
        let args = [
            ("BASE".to_string(), "x".to_string()),
            ("BASE_IMAGE".to_string(), "y".to_string()),
        ];
        assert_eq!(
            expand_args("FROM $BASE_IMAGE ${BASE} $OTHER ${", &args),
            "FROM y x $OTHER ${"
        );
    }

    #[test]
    fn the_hash_follows_content_modes_and_links_not_times() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let first = context_hash(dir.path(), "FROM x").unwrap();
        assert_eq!(first, context_hash(dir.path(), "FROM x").unwrap());
        assert_ne!(first, context_hash(dir.path(), "FROM y").unwrap());
        std::fs::set_permissions(
            dir.path().join("a.txt"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let chmodded = context_hash(dir.path(), "FROM x").unwrap();
        assert_ne!(first, chmodded);
        std::os::unix::fs::symlink("a.txt", dir.path().join("l")).unwrap();
        assert_ne!(chmodded, context_hash(dir.path(), "FROM x").unwrap());
    }
}
