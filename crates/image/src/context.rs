//! What a build may read: its context, nothing beside it. A `COPY ../x` or
//! a symbolic link in the context pointing out of the task would have the
//! engine read the host's files into the image (and a task is untrusted),
//! so both are refused before any build, naming the line or the link.

use std::path::{Component, Path, PathBuf};

use crate::ImageError;

/// A `COPY`/`ADD` source that names something outside the build context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escape {
    /// 1-based line of the instruction in the Dockerfile.
    pub line: usize,
    pub source: String,
}

/// The `COPY`/`ADD` sources of `dockerfile` that climb out of the build
/// context with `..` (`COPY --from` reads another stage, and a URL the
/// network: neither is the context).
pub fn sources_outside_context(dockerfile: &str) -> Vec<Escape> {
    let mut escapes = Vec::new();
    for (line, text) in instructions(dockerfile) {
        let (keyword, args) = text
            .trim_start()
            .split_once(char::is_whitespace)
            .unwrap_or((text.trim(), ""));
        if !keyword.eq_ignore_ascii_case("COPY") && !keyword.eq_ignore_ascii_case("ADD") {
            continue;
        }
        let args = args.trim();
        if args.starts_with("<<") {
            continue;
        }
        let mut words: Vec<String> = if args.starts_with('[') {
            serde_json::from_str(args).unwrap_or_else(|_| split_words(args))
        } else {
            split_words(args)
        };
        let flags = words.iter().take_while(|w| w.starts_with("--")).count();
        if words[..flags].iter().any(|w| w.starts_with("--from=")) {
            continue;
        }
        let mut paths = words.split_off(flags);
        paths.pop();
        for source in paths {
            let remote = source.contains("://") || source.starts_with("git@");
            if !remote && climbs_out(&source) {
                escapes.push(Escape { line, source });
            }
        }
    }
    escapes
}

/// Whether a context-relative path (absolute ones are relative to the
/// context's root too) goes above that root at some point.
fn climbs_out(path: &str) -> bool {
    climbs_out_from(Path::new(path), 0)
}

/// Whether `path`, read `depth` directories below a root (absolute parts
/// taken as that root's), goes above the root at some point: a build
/// context's source, a link's text in a copied tree.
pub fn climbs_out_from(path: &Path, depth: usize) -> bool {
    let mut depth = depth as i64;
    for component in path.components() {
        match component {
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            Component::Normal(_) => depth += 1,
            _ => {}
        }
    }
    false
}

/// Instructions with their first line: continuation lines (the escape
/// character, `\` unless a `# escape=` parser directive says otherwise, at
/// the end) joined; comments (within a continuation too, as Docker drops
/// them) and blank lines dropped.
fn instructions(dockerfile: &str) -> Vec<(usize, String)> {
    let escape = escape_directive(dockerfile);
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in dockerfile.lines().enumerate() {
        let trimmed = line.trim();
        // A blank line inside a continuation is skipped, as BuildKit does.
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        let (start, mut text) = current.take().unwrap_or((index + 1, String::new()));
        match trimmed.strip_suffix(escape) {
            Some(part) => {
                text.push_str(part);
                text.push(' ');
                current = Some((start, text));
            }
            None => {
                text.push_str(trimmed);
                out.push((start, text));
            }
        }
    }
    out.extend(current);
    out
}

/// The escape character the Dockerfile's parser directives name
/// (`# escape=\``), else `\`. Directives are the comments of the form
/// `# key=value` at the very top; as Docker reads them, the first line that
/// is not a known directive (`syntax`, `escape`, `check`) ends them.
fn escape_directive(dockerfile: &str) -> char {
    for line in dockerfile.lines() {
        let Some(directive) = line.trim().strip_prefix('#') else {
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            break;
        };
        let key = key.trim().to_ascii_lowercase();
        if !matches!(key.as_str(), "syntax" | "escape" | "check") {
            break;
        }
        if key == "escape" {
            return match value.trim() {
                "`" => '`',
                _ => '\\',
            };
        }
    }
    '\\'
}

/// Whitespace-separated words, quotes removed.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// Every symbolic link under `dir` whose target lies outside `boundary`
/// (or cannot be resolved), with that target: nothing a build or an
/// import reads may lead out of the task.
pub fn links_leaving(dir: &Path, boundary: &Path) -> Result<Vec<(PathBuf, PathBuf)>, ImageError> {
    let boundary = boundary
        .canonicalize()
        .map_err(|e| ImageError::io(boundary, e))?;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).map_err(|e| ImageError::io(&path, e))?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| ImageError::io(&path, e))?;
            let inside = path
                .canonicalize()
                .is_ok_and(|real| real.starts_with(&boundary));
            if !inside {
                found.push((path, target));
            }
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(|e| ImageError::io(&path, e))? {
                stack.push(entry.map_err(|e| ImageError::io(&path, e))?.path());
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_above_the_context_are_found_with_their_line() {
        let text = "FROM x\n# COPY ../commented /x\nCOPY a.txt /app/\nCOPY ../secret /app/\nADD --chown=1:1 \\\n  ok /x \\\n  ../../etc/passwd /y/\nCOPY [\"../j\", \"/z\"]\nCOPY --from=build ../bin /b\nADD https://example.com/../x /u\nCOPY sub/../x /ok\nCOPY /abs/../../up /no\n";
        let found = sources_outside_context(text);
        let pairs: Vec<(usize, &str)> = found.iter().map(|e| (e.line, e.source.as_str())).collect();
        assert_eq!(
            pairs,
            [
                (4, "../secret"),
                (5, "../../etc/passwd"),
                (8, "../j"),
                (12, "/abs/../../up")
            ]
        );
    }

    #[test]
    fn the_escape_directive_and_comments_in_continuations_are_read_as_docker_does() {
        let text = "# escape=`\nFROM x\nCOPY `\n  ../x /app/x\n";
        let found = sources_outside_context(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].line, found[0].source.as_str()), (3, "../x"));
        // An unknown directive ends them: Docker's escape stays `\`.
        let late = "# foo=bar\n# escape=`\nFROM x\nCOPY \\\n\n  ../w /app/w\n";
        let found = sources_outside_context(late);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].source, "../w");
        let commented = "FROM x\nCOPY a \\\n# a comment inside\n  ../y /z\n";
        let found = sources_outside_context(commented);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].source, "../y");
    }

    #[test]
    fn links_out_of_the_boundary_are_found_and_links_within_are_not() {
        let task = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let context = task.path().join("environment");
        std::fs::create_dir_all(context.join("sub")).unwrap();
        std::fs::write(task.path().join("shared.txt"), "ok").unwrap();
        std::os::unix::fs::symlink("../shared.txt", context.join("shared")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), context.join("sub/secret"))
            .unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", context.join("dangling")).unwrap();
        let found = links_leaving(&context, task.path()).unwrap();
        let names: Vec<PathBuf> = found
            .iter()
            .map(|(p, _)| p.strip_prefix(&context).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            names,
            [PathBuf::from("dangling"), PathBuf::from("sub/secret")]
        );
    }
}
