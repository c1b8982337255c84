use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use tack_protocol::ToolSpec;

use super::paths::resolve;
use super::{Tool, ToolContext, ToolError, ToolOutput, parse_arguments};

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
            name: "read_file".to_string(),
            description: "Read a text file of the workspace, whole or a range of lines (1-based, inclusive). Large files are cut with a marker.".to_string(),
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

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = parse_arguments("read_file", arguments)?;
        let path = resolve(&ctx.workspace, &args.path)?;
        let text = tokio::fs::read_to_string(&path)
            .await
            .map_err(|e| ToolError::failed(format!("cannot read `{}`: {e}", args.path)))?;
        let text = select_lines(&text, args.start_line, args.end_line)?;
        Ok(cap_text(text, ctx.output_limit))
    }
}

fn select_lines(text: &str, start: Option<usize>, end: Option<usize>) -> Result<String, ToolError> {
    if start.is_none() && end.is_none() {
        return Ok(text.to_string());
    }
    let total = text.lines().count();
    let start = start.unwrap_or(1).max(1);
    let end = end.unwrap_or(total).min(total);
    if start > total || start > end {
        return Err(ToolError::failed(format!(
            "line range {start}..{end} is empty: the file has {total} lines"
        )));
    }
    let mut selected: String = text
        .lines()
        .skip(start - 1)
        .take(end + 1 - start)
        .collect::<Vec<_>>()
        .join("\n");
    selected.push('\n');
    Ok(selected)
}

fn cap_text(text: String, limit: usize) -> ToolOutput {
    if text.len() <= limit {
        return ToolOutput::Text {
            text,
            truncated: false,
        };
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let kept = format!(
        "{}\n[truncated: showing {cut} of {} bytes; read a line range to see more]",
        &text[..cut],
        text.len()
    );
    ToolOutput::Text {
        text: kept,
        truncated: true,
    }
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
            name: "write_file".to_string(),
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

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_arguments("write_file", arguments)?;
        let path = resolve(&ctx.workspace, &args.path)?;
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| {
                ToolError::failed(format!("cannot create the folder of `{}`: {e}", args.path))
            })?;
        }
        tokio::fs::write(&path, args.content.as_bytes())
            .await
            .map_err(|e| ToolError::failed(format!("cannot write `{}`: {e}", args.path)))?;
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
            name: "str_replace".to_string(),
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

    async fn run(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReplaceArgs = parse_arguments("str_replace", arguments)?;
        if args.old_string.is_empty() {
            return Err(ToolError::failed(
                "`old_string` is empty; give the exact text to replace",
            ));
        }
        let path = resolve(&ctx.workspace, &args.path)?;
        let text = tokio::fs::read_to_string(&path)
            .await
            .map_err(|e| ToolError::failed(format!("cannot read `{}`: {e}", args.path)))?;
        let replaced = replace_once(&text, &args.old_string, &args.new_string)
            .map_err(|why| ToolError::failed(format!("{why} in `{}`", args.path)))?;
        tokio::fs::write(&path, replaced.as_bytes())
            .await
            .map_err(|e| ToolError::failed(format!("cannot write `{}`: {e}", args.path)))?;
        Ok(ToolOutput::Text {
            text: format!("replaced 1 occurrence in {}", args.path),
            truncated: false,
        })
    }
}

/// Replaces the single occurrence of `old`, or says how many there are and on
/// which lines, so the model can make its text unique.
pub(crate) fn replace_once(text: &str, old: &str, new: &str) -> Result<String, String> {
    let starts: Vec<usize> = text.match_indices(old).map(|(at, _)| at).collect();
    match starts.as_slice() {
        [at] => Ok(format!(
            "{}{}{}",
            &text[..*at],
            new,
            &text[at + old.len()..]
        )),
        [] => Err(
            "`old_string` was not found (0 matches); read the file and copy the text exactly"
                .to_string(),
        ),
        many => {
            let lines: Vec<String> = many
                .iter()
                .map(|at| (text[..*at].matches('\n').count() + 1).to_string())
                .collect();
            Err(format!(
                "`old_string` matches {} times (lines {}); include more surrounding text so it matches once",
                many.len(),
                lines.join(", ")
            ))
        }
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
                .contains("0 matches")
        );
        let many = replace_once("x\ny\nx\n", "x", "z").unwrap_err();
        assert!(
            many.contains("2 times") && many.contains("lines 1, 3"),
            "{many}"
        );
    }

    #[test]
    fn line_ranges_are_inclusive_and_checked() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(
            select_lines(text, Some(2), Some(3)).unwrap(),
            "two\nthree\n"
        );
        assert!(select_lines(text, Some(5), None).is_err());
    }
}
