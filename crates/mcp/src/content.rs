//! What the model reads of a tool's result: its text; for images, audio and
//! binary resources, what they are (the harness's models read text).

use rmcp::model::CallToolResult;
use serde_json::Value;

/// The result's content blocks as text, one after another; the structured
/// result when there is no content.
pub(crate) fn render(result: &CallToolResult) -> String {
    let blocks: Vec<String> = result
        .content
        .iter()
        .filter_map(|block| serde_json::to_value(block).ok())
        .map(|block| describe(&block))
        .collect();
    if blocks.is_empty() {
        return result
            .structured_content
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default();
    }
    blocks.join("\n")
}

/// One content block. Read from its JSON form so that block kinds a newer
/// server sends still show as what they are.
fn describe(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    let data_bytes = || field("data").len() / 4 * 3;
    match field("type") {
        "text" => field("text").to_string(),
        "image" | "audio" => format!(
            "[{} {}, {} bytes, not shown]",
            field("type"),
            field("mimeType"),
            data_bytes()
        ),
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let of = |name: &str| resource.get(name).and_then(Value::as_str);
            match of("text") {
                Some(text) => format!("[resource {}]\n{text}", of("uri").unwrap_or_default()),
                None => format!(
                    "[resource {} ({}), binary, not shown]",
                    of("uri").unwrap_or_default(),
                    of("mimeType").unwrap_or("unknown type")
                ),
            }
        }
        "resource_link" => format!("[resource link {} — {}]", field("uri"), field("name")),
        other => format!("[{other} content, not shown]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_images_and_resources_read_as_text() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
                {"type": "resource_link", "uri": "test://1", "name": "one"}
            ]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            render(&result),
            "hello\n[image image/png, 3 bytes, not shown]\n[resource file:///a.txt]\ninside\n[resource link test://1 — one]"
        );
        let structured: CallToolResult = serde_json::from_value(
            serde_json::json!({"content": [], "structuredContent": {"sum": 3}}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(render(&structured), r#"{"sum":3}"#);
    }
}
