use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use tack_protocol::tool_names::{READ_FILE, STR_REPLACE, WRITE_FILE};
use tack_protocol::{ToolAccess, ToolSpec};
use tack_sandbox::WorkspaceFiles;

use super::paths::{file_error, workspace_files};
use super::{Tool, ToolContext, ToolError, ToolOutput, parse_arguments, string_argument};

#[derive(Debug)]
pub struct ReadFileTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    end_line: Option<usize>,
}

#[async_trait]
impl Tool for ReadFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: READ_FILE.to_string(),
            description: "Read a text file of the workspace (or a saved tool result, by the path its preview names), whole or a range of lines (1-based, inclusive). Large files are cut with a marker.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace."},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn access(&self, arguments: &serde_json::Value) -> Vec<ToolAccess> {
        path_access(arguments, ToolAccess::Read)
    }

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = parse_arguments(READ_FILE, arguments)?;
        let file = open_for_reading(ctx, &args.path)?;
        let range = match (args.start_line, args.end_line) {
            (None, None) => None,
            (start, end) => Some((start.unwrap_or(1).max(1), end)),
        };
        let read = read_lines(std::io::BufReader::new(file), range, ctx.output_limit)
            .map_err(|e| ToolError::failed(format!("`{}` could not be read: {e}", args.path)))?;
        if let Some((start, end)) = range
            && read.selected == 0
        {
            let end = end.unwrap_or(read.lines).min(read.lines);
            return Err(ToolError::failed(format!(
                "line range {start}..{end} is empty: the file has {} lines",
                read.lines
            )));
        }
        read.output(&args.path, range.is_some())
    }
}

/// What [`read_lines`] read: the start of what was asked for (at most the
/// output limit and a little), how many bytes that was in all, and how
/// many lines the file has.
struct Read {
    kept: Vec<u8>,
    selected: u64,
    lines: usize,
    limit: usize,
}

/// Lines `start..=end` (1-based; all of the file without a range) of
/// `reader`, streamed: at most `limit` bytes and a few are kept, so a
/// file of a gigabyte costs a pass over it, not a gigabyte of tack's
/// memory.
fn read_lines(
    mut reader: impl std::io::BufRead,
    range: Option<(usize, Option<usize>)>,
    limit: usize,
) -> std::io::Result<Read> {
    let (start, end) = range.unwrap_or((1, None));
    let wanted = |line: usize| line >= start && end.is_none_or(|end| line <= end);
    // Enough to cut at a character's boundary.
    let keep = limit.saturating_add(4);
    let mut read = Read {
        kept: Vec::new(),
        selected: 0,
        lines: 0,
        limit,
    };
    let mut line = 1;
    let mut in_line = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        let (chunk, ends_line) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..=at], true),
            None => (buffer, false),
        };
        if wanted(line) {
            read.selected += chunk.len() as u64;
            let room = keep.saturating_sub(read.kept.len()).min(chunk.len());
            read.kept.extend_from_slice(&chunk[..room]);
        }
        let used = chunk.len();
        reader.consume(used);
        in_line = !ends_line;
        if ends_line {
            read.lines = line;
            line += 1;
        }
    }
    if in_line {
        read.lines = line;
    }
    // A range's last line ends with a newline, as the file's would.
    if range.is_some() && read.selected > 0 && !read.kept.ends_with(b"\n") && read.kept.len() < keep
    {
        read.kept.push(b'\n');
        read.selected += 1;
    }
    Ok(read)
}

impl Read {
    /// The text for the model: cut at the limit, with a marker.
    fn output(self, path: &str, ranged: bool) -> Result<ToolOutput, ToolError> {
        let truncated = self.selected > self.limit as u64;
        let mut kept = self.kept;
        if truncated {
            kept.truncate(self.limit);
        }
        let text = match String::from_utf8(kept) {
            Ok(text) => text,
            // Cut inside a character: keep what comes before it.
            Err(error) if truncated && error.utf8_error().error_len().is_none() => {
                let valid = error.utf8_error().valid_up_to();
                let mut bytes = error.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).map_err(|_| not_text(path))?
            }
            Err(_) => return Err(not_text(path)),
        };
        if !truncated {
            return Ok(ToolOutput::Text {
                text,
                truncated: false,
            });
        }
        let hint = if ranged {
            "read a smaller line range"
        } else {
            "read a line range to see more"
        };
        Ok(ToolOutput::Text {
            text: format!(
                "{text}\n[truncated: showing {} of {} bytes; {hint}]",
                text.len(),
                self.selected
            ),
            truncated: true,
        })
    }
}

fn not_text(path: &str) -> ToolError {
    ToolError::failed(format!(
        "`{path}` is not UTF-8 text; inspect binary files with `bash` (e.g. `xxd`)"
    ))
}

#[derive(Debug)]
pub struct WriteFileTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: WRITE_FILE.to_string(),
            description: "Create or overwrite a file of the workspace with the given content."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace."},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn access(&self, arguments: &serde_json::Value) -> Vec<ToolAccess> {
        path_access(arguments, ToolAccess::Write)
    }

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_arguments(WRITE_FILE, arguments)?;
        workspace_files(ctx)?
            .write(&args.path, args.content.as_bytes())
            .map_err(file_error)?;
        Ok(ToolOutput::Text {
            text: format!("wrote {} bytes to {}", args.content.len(), args.path),
            truncated: false,
        })
    }
}

#[derive(Debug)]
pub struct StrReplaceTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceArgs {
    path: String,
    old_string: String,
    new_string: String,
}

#[async_trait]
impl Tool for StrReplaceTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: STR_REPLACE.to_string(),
            description: "Replace one exact occurrence of `old_string` in a file with `new_string`. `old_string` must occur exactly once; include surrounding lines to make it unique.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace."},
                    "old_string": {"type": "string", "description": "Exact text to replace, occurring once."},
                    "new_string": {"type": "string"}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        }
    }

    fn access(&self, arguments: &serde_json::Value) -> Vec<ToolAccess> {
        path_access(arguments, ToolAccess::Write)
    }

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReplaceArgs = parse_arguments(STR_REPLACE, arguments)?;
        if args.old_string.is_empty() {
            return Err(ToolError::failed(
                "`old_string` is empty; give the exact text to replace",
            ));
        }
        let files = workspace_files(ctx)?;
        let text = text_to_edit(&files, &args.path)?;
        let replaced = replace_once(&text, &args.old_string, &args.new_string)
            .map_err(|why| ToolError::failed(format!("{why} in `{}`", args.path)))?;
        files
            .write(&args.path, replaced.as_bytes())
            .map_err(file_error)?;
        Ok(ToolOutput::Text {
            text: format!("replaced 1 occurrence in {}", args.path),
            truncated: false,
        })
    }
}

/// A file of the workspace opened for reading, through the sandbox's
/// checks; or an offloaded result: an absolute path in the results
/// directory, opened beneath it with the same kernel checks.
fn open_for_reading(ctx: &ToolContext, path: &str) -> Result<std::fs::File, ToolError> {
    if let Some(dir) = &ctx.results_dir
        && let Ok(name) = std::path::Path::new(path).strip_prefix(dir)
    {
        let results = WorkspaceFiles::new(dir, &ctx.confinement).map_err(file_error)?;
        return results.open(&name.to_string_lossy()).map_err(file_error);
    }
    workspace_files(ctx)?.open(path).map_err(file_error)
}

/// The largest file `str_replace` edits: it holds the file twice in
/// tack's memory; `bash` (sed) edits a bigger one.
const EDIT_LIMIT: u64 = 64 << 20;

/// A file to edit, whole, as text.
fn text_to_edit(files: &WorkspaceFiles, path: &str) -> Result<String, ToolError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    files
        .open(path)
        .map_err(file_error)?
        .take(EDIT_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::failed(format!("`{path}` could not be read: {e}")))?;
    if bytes.len() as u64 > EDIT_LIMIT {
        return Err(ToolError::failed(format!(
            "`{path}` is larger than {} MiB: edit it with `bash` (e.g. `sed -i`)",
            EDIT_LIMIT >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|_| not_text(path))
}

/// The `path` argument as the one file a call touches.
fn path_access(arguments: &serde_json::Value, access: fn(String) -> ToolAccess) -> Vec<ToolAccess> {
    string_argument(arguments, "path")
        .map(|path| access(path.to_string()))
        .into_iter()
        .collect()
}

/// Why `old_string` cannot be replaced: the model reads this and retries.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplaceError {
    #[error("`old_string` was not found (0 matches); read the file and copy the text exactly")]
    NotFound,
    /// The 1-based lines of each match, so the model can make its text unique.
    #[error(
        "`old_string` matches {} times (lines {}); include more surrounding text so it matches once",
        .0.len(),
        list(.0)
    )]
    Ambiguous(Vec<usize>),
}

fn list(lines: &[usize]) -> String {
    let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
    lines.join(", ")
}

/// Replaces the single occurrence of `old`, or says how many there are and on
/// which lines.
pub(crate) fn replace_once(text: &str, old: &str, new: &str) -> Result<String, ReplaceError> {
    let starts: Vec<usize> = text.match_indices(old).map(|(at, _)| at).collect();
    match starts.as_slice() {
        [at] => Ok(format!(
            "{}{}{}",
            &text[..*at],
            new,
            &text[at + old.len()..]
        )),
        [] => Err(ReplaceError::NotFound),
        many => Err(ReplaceError::Ambiguous(
            many.iter()
                .map(|at| text[..*at].matches('\n').count() + 1)
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_requires_exactly_one_match() {
        assert_eq!(replace_once("a b c", "b", "x").unwrap(), "a x c");
        assert!(
            replace_once("a b c", "z", "x")
                .unwrap_err()
                .to_string()
                .contains("0 matches")
        );
        let many = replace_once("x\ny\nx\n", "x", "z").unwrap_err().to_string();
        assert!(
            many.contains("2 times") && many.contains("lines 1, 3"),
            "{many}"
        );
    }

    fn lines(
        text: &str,
        range: Option<(usize, Option<usize>)>,
        limit: usize,
    ) -> (String, u64, usize) {
        let read = read_lines(text.as_bytes(), range, limit).unwrap();
        (
            String::from_utf8(read.kept).unwrap(),
            read.selected,
            read.lines,
        )
    }

    #[test]
    fn line_ranges_are_inclusive_and_checked() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(
            lines(text, Some((2, Some(3))), 100),
            ("two\nthree\n".into(), 10, 3)
        );
        assert_eq!(lines(text, Some((5, None)), 100), (String::new(), 0, 3));
        assert_eq!(lines(text, None, 100), (text.into(), 14, 3));
        // The last line without its newline: counted, and given one.
        assert_eq!(lines("a\nb", Some((2, None)), 100), ("b\n".into(), 2, 2));
        assert_eq!(lines("a\nb", None, 100), ("a\nb".into(), 3, 2));
    }

    /// A long file is read through, but only the start of what was asked
    /// for is kept, cut at a character's boundary, with the whole size said.
    #[test]
    fn a_long_file_keeps_only_what_is_shown() {
        let text = format!("{}\nlast\n", "é".repeat(50_000));
        let read = read_lines(text.as_bytes(), None, 101).unwrap();
        assert!(read.kept.len() <= 105, "{}", read.kept.len());
        assert_eq!((read.selected, read.lines), (text.len() as u64, 2));
        let ToolOutput::Text {
            text: shown,
            truncated,
        } = read.output("f", false).unwrap()
        else {
            panic!("text")
        };
        assert!(truncated);
        assert!(shown.starts_with(&"é".repeat(50)), "{shown}");
        assert!(
            shown.ends_with(
                "[truncated: showing 100 of 100006 bytes; read a line range to see more]"
            ),
            "{shown}"
        );
        let read = read_lines(text.as_bytes(), Some((2, Some(2))), 101).unwrap();
        assert_eq!(
            read.output("f", true).unwrap(),
            ToolOutput::Text {
                text: "last\n".into(),
                truncated: false
            }
        );
    }
}
