//! Offloading: a tool result too long for the context is written to a file
//! the agent can read, and the model is shown its head and tail with the
//! file's path. The whole result stays in the trace's tool span either way.

use std::path::{Path, PathBuf};

use tack_protocol::ToolCall;
use tack_protocol::tool_names::READ_FILE;

/// Bytes of the head, and of the tail, that the preview keeps.
const PREVIEW_EDGE: usize = 1024;

/// Writes `text` to `dir` as the result of `call_id`, and returns what the
/// model reads in its place.
pub(crate) fn offload(dir: &Path, call_id: &str, text: &str) -> std::io::Result<String> {
    let path = result_path(dir, call_id);
    std::fs::write(&path, text)?;
    Ok(preview(&path, text))
}

/// Whether `call` reads a file of the results directory.
pub(crate) fn reads_saved_result(call: &ToolCall, dir: &Path) -> bool {
    call.name == READ_FILE
        && serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|arguments| arguments.get("path")?.as_str().map(PathBuf::from))
            .is_some_and(|path| path.starts_with(dir))
}

/// One file per call; the id is the provider's, so only its safe
/// characters go into the name, and a clash (two calls whose ids differ
/// only in unsafe characters) gets a number.
fn result_path(dir: &Path, call_id: &str) -> PathBuf {
    let safe: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let mut path = dir.join(format!("{safe}.txt"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{safe}-{n}.txt"));
    }
    path
}

fn preview(path: &Path, text: &str) -> String {
    let head = floor_boundary(text, PREVIEW_EDGE.min(text.len()));
    let tail = ceil_boundary(text, text.len().saturating_sub(PREVIEW_EDGE).max(head));
    let lines = text.lines().count();
    format!(
        "[this result is {} bytes ({lines} lines), too long for the context: it was saved to {}. \
         The first and last {PREVIEW_EDGE} bytes are below; read the file with read_file (a line range) or search it with bash for the rest.]\n\
         {}\n[… {} bytes not shown …]\n{}",
        text.len(),
        path.display(),
        &text[..head],
        tail - head,
        &text[tail..],
    )
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preview_keeps_head_and_tail_and_names_the_file_with_the_whole_result() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..2000).map(|i| format!("line {i} é\n")).collect();
        let shown = offload(dir.path(), "call/1", &text).unwrap();
        let path = dir.path().join("call_1.txt");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains("line 0 é\nline 1 é"), "{shown}");
        assert!(shown.contains("line 1999 é\n"), "{shown}");
        assert!(!shown.contains("line 1000 é"), "{shown}");
        assert!(shown.len() < 2 * PREVIEW_EDGE + 400, "{}", shown.len());
        // A second call with a clashing id gets its own file.
        offload(dir.path(), "call:1", "other").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("call_1-2.txt")).unwrap(),
            "other"
        );
    }
}
