//! What `list_files` and `grep` share: walking the workspace the way ripgrep
//! does, filtering by glob, and cutting long listings with a marker that says
//! how much was left out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use globset::{GlobBuilder, GlobMatcher};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{Match, WalkBuilder};

use super::{ToolError, ToolOutput};

/// Past this many results a listing stops counting: the marker then says
/// "N+" instead of walking a huge tree just to report an exact total.
pub(crate) const COUNT_CEILING: usize = 10_000;

/// The regular files at or under `target` (inside `workspace`), in path order.
///
/// The walk always starts at the workspace root, so the root's and every
/// intermediate folder's `.gitignore`/`.ignore` apply to a subfolder too, yet
/// no ignore file above the workspace does (trial workspaces sit in temporary
/// folders whose ancestors are none of the agent's business). Only folders on
/// the way to `target` are entered.
pub(crate) fn files(workspace: &Path, target: &Path) -> impl Iterator<Item = PathBuf> + use<> {
    let target = target.to_path_buf();
    let ignores = IgnoreFiles::new(workspace);
    let mut builder = WalkBuilder::new(workspace);
    builder
        // Dotfiles such as `.env` or `.github/` are part of a project; only
        // `.git` is skipped, below.
        .hidden(false)
        .parents(false)
        // The ignore files are the agent's: read by `IgnoreFiles`, as the
        // file tools read, never by the walker, which opens them as they
        // are (a `.gitignore` linked to /dev/zero filled tack's memory, a
        // FIFO hung it). Never the host's global excludes either, which
        // would make results depend on the machine.
        .git_ignore(false)
        .git_exclude(false)
        .ignore(false)
        .git_global(false)
        // A symlink may point out of the workspace; neither listed nor read.
        .follow_links(false)
        // Depth-first with sorted names is path order, so output is stable and
        // truncation keeps the first paths.
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            let path = entry.path();
            let git_dir = entry.depth() > 0 && entry.file_name() == ".git";
            let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
            !git_dir
                && (target.starts_with(path) || path.starts_with(&target))
                && (entry.depth() == 0 || !ignores.ignored(path, is_dir))
        });
    builder
        .build()
        // Unreadable entries are skipped, as ripgrep skips them.
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .map(ignore::DirEntry::into_path)
}

/// The `.gitignore` and `.ignore` files of a workspace's folders, read as
/// the file tools read (regular files beneath the workspace, at most
/// [`IGNORE_FILE_LIMIT`] bytes) and kept by folder as the walk meets them.
struct IgnoreFiles {
    workspace: PathBuf,
    by_dir: Mutex<HashMap<PathBuf, Arc<Gitignore>>>,
}

/// More than any ignore file a project writes.
const IGNORE_FILE_LIMIT: u64 = 1 << 20;

impl IgnoreFiles {
    fn new(workspace: &Path) -> IgnoreFiles {
        IgnoreFiles {
            workspace: workspace.to_path_buf(),
            by_dir: Mutex::default(),
        }
    }

    /// Whether `path` is ignored by its folders' files, the nearest first
    /// (a `!pattern` there takes back what a folder above ignores).
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut dir = path.parent();
        while let Some(here) = dir.filter(|d| d.starts_with(&self.workspace)) {
            match self.of(here).matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => dir = here.parent(),
            }
        }
        false
    }

    /// The patterns of `dir`'s `.gitignore` then `.ignore` (whose lines,
    /// coming later, win, as ripgrep gives `.ignore` precedence).
    fn of(&self, dir: &Path) -> Arc<Gitignore> {
        let mut by_dir = self.by_dir.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = by_dir.get(dir) {
            return found.clone();
        }
        let mut builder = GitignoreBuilder::new(dir);
        let relative = dir.strip_prefix(&self.workspace).unwrap_or(dir);
        for name in [".gitignore", ".ignore"] {
            let file = relative.join(name);
            let read = tack_sandbox::read_beneath(
                &self.workspace,
                &file.to_string_lossy(),
                IGNORE_FILE_LIMIT,
            );
            let Ok(Some(bytes)) = read else { continue };
            for line in String::from_utf8_lossy(&bytes).lines() {
                // A line that is no pattern is skipped, as git skips it.
                let _ = builder.add_line(None, line);
            }
        }
        let built = Arc::new(builder.build().unwrap_or_else(|_| Gitignore::empty()));
        by_dir.insert(dir.to_path_buf(), built.clone());
        built
    }
}

/// `path` relative to the workspace, with `/` separators, for output.
pub(crate) fn relative(workspace: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(workspace).unwrap_or(path);
    if relative.as_os_str().is_empty() {
        return ".".to_string();
    }
    relative.to_string_lossy().into_owned()
}

/// A file filter with ripgrep's `-g` semantics: a glob without `/` matches
/// file names at any depth (`*.py`); one with `/` matches the path relative
/// to the searched folder (`src/**/*.py`), `*` staying within one folder.
#[derive(Debug)]
pub(crate) struct GlobFilter {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl GlobFilter {
    pub(crate) fn new(pattern: &str) -> Result<GlobFilter, ToolError> {
        let trimmed = pattern.trim_start_matches("./").trim_start_matches('/');
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                ToolError::failed(format!(
                    "invalid glob `{pattern}`: {e}; use patterns like `*.py` or `src/**/*.rs`"
                ))
            })?;
        Ok(GlobFilter {
            matcher: glob.compile_matcher(),
            whole_path: trimmed.contains('/'),
        })
    }

    /// Whether `path`, relative to the searched folder, passes the filter.
    pub(crate) fn matches(&self, path: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(path)
        } else {
            path.file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

/// Output lines kept up to a count and a byte budget; past them lines are only
/// counted, so the marker can say how many were left out.
#[derive(Debug)]
pub(crate) struct Listing {
    shown: Vec<String>,
    bytes: usize,
    max_items: usize,
    max_bytes: usize,
    total: usize,
    /// Set once a line was left out: later lines are not shown either, so the
    /// output stays a prefix of the sorted whole.
    full: bool,
}

impl Listing {
    pub(crate) fn new(max_items: usize, max_bytes: usize) -> Listing {
        Listing {
            shown: Vec::new(),
            bytes: 0,
            max_items,
            max_bytes,
            total: 0,
            full: false,
        }
    }

    pub(crate) fn push(&mut self, line: String) {
        self.total += 1;
        let fits = self.shown.len() < self.max_items && self.bytes + line.len() < self.max_bytes;
        if self.full || !fits {
            self.full = true;
            return;
        }
        self.bytes += line.len() + 1;
        self.shown.push(line);
    }

    /// Counts lines that were found but not handed over.
    pub(crate) fn skip(&mut self, count: usize) {
        if count > 0 {
            self.total += count;
            self.full = true;
        }
    }

    /// Lines that can still be shown.
    pub(crate) fn room(&self) -> usize {
        if self.full {
            0
        } else {
            self.max_items - self.shown.len()
        }
    }

    /// Whether to keep looking: false once the count reached the ceiling.
    pub(crate) fn counting(&self) -> bool {
        self.total < COUNT_CEILING
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The lines, then `[truncated: showing N of M <noun>; <hint>]` if cut.
    pub(crate) fn finish(self, noun: &str, hint: &str) -> ToolOutput {
        let shown = self.shown.len();
        let mut text = self.shown.join("\n");
        let truncated = self.total > shown;
        if truncated {
            let more = if self.counting() { "" } else { "+" };
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "[truncated: showing {shown} of {}{more} {noun}; {hint}]",
                self.total
            ));
        }
        ToolOutput::Text { text, truncated }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_without_a_slash_match_names_at_any_depth() {
        let name = GlobFilter::new("*.py").unwrap();
        assert!(name.matches(Path::new("a.py")) && name.matches(Path::new("src/deep/a.py")));
        assert!(!name.matches(Path::new("a.pyc")));
        let anchored = GlobFilter::new("src/*.py").unwrap();
        assert!(anchored.matches(Path::new("src/a.py")));
        assert!(!anchored.matches(Path::new("src/deep/a.py")));
        let any = GlobFilter::new("**/*.py").unwrap();
        assert!(any.matches(Path::new("a.py")) && any.matches(Path::new("x/y/a.py")));
        assert!(GlobFilter::new("a[").is_err());
    }

    #[test]
    fn listings_keep_a_prefix_and_say_what_was_cut() {
        let mut listing = Listing::new(2, 1000);
        for line in ["a", "b", "c"] {
            listing.push(line.to_string());
        }
        let ToolOutput::Text { text, truncated } = listing.finish("files", "narrow it") else {
            unreachable!()
        };
        assert!(truncated);
        assert_eq!(text, "a\nb\n[truncated: showing 2 of 3 files; narrow it]");

        // The byte budget cuts too, and a shorter later line does not sneak in.
        let mut listing = Listing::new(10, 6);
        for line in ["abcd", "efghijk", "x"] {
            listing.push(line.to_string());
        }
        let ToolOutput::Text { text, .. } = listing.finish("files", "narrow it") else {
            unreachable!()
        };
        assert!(
            text.starts_with("abcd\n[truncated: showing 1 of 3 files"),
            "{text}"
        );
    }
}
