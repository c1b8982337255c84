//! What a tool loop reads of a request body — the messages' roles, texts
//! and tool results, the tools' names and first parameters, `stream` and
//! `model` — borrowed from the body. Everything else is skipped, the JSON
//! still checked whole, instead of being built into a `serde_json::Value`
//! tree and dropped: with a thousand conversations at once that tree was
//! most of the loopback server's CPU, on the cores the harness under test
//! runs on.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A request body as the tool loop reads it; `Default` for a body that is
/// not a JSON object of this shape.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RequestView<'a> {
    #[serde(borrow, default)]
    pub messages: Vec<MessageView<'a>>,
    #[serde(borrow, default)]
    pub tools: Vec<ToolView<'a>>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(borrow, default)]
    pub model: Option<Text<'a>>,
}

impl RequestView<'_> {
    /// `bytes` read as a request; a body of another shape reads as empty.
    pub(crate) fn parse(bytes: &[u8]) -> RequestView<'_> {
        serde_json::from_slice(bytes).unwrap_or_default()
    }
}

/// One message (OpenAI's or Anthropic's).
#[derive(Debug, Deserialize)]
pub(crate) struct MessageView<'a> {
    #[serde(borrow, default)]
    pub role: Option<Text<'a>>,
    /// OpenAI's tool result names its call here.
    #[serde(borrow, default)]
    pub tool_call_id: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub content: Content<'a>,
}

/// A message's or a block's `content`: text, a list of blocks, or
/// anything else (null, absent).
#[derive(Debug, Default)]
pub(crate) enum Content<'a> {
    #[default]
    Other,
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

impl Content<'_> {
    /// The text of it: itself, or its blocks' `text` joined.
    pub(crate) fn text(&self) -> String {
        match self {
            Content::Text(text) => text.to_string(),
            Content::Blocks(blocks) => blocks.iter().filter_map(|b| b.text.as_deref()).collect(),
            Content::Other => String::new(),
        }
    }
}

/// A content block (Anthropic's `text`, `tool_use`, `tool_result`;
/// OpenAI's content parts).
#[derive(Debug, Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub text: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub tool_use_id: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub content: Content<'a>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message's content")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Owned(text.to_string())))
            }
            fn visit_string<E>(self, text: String) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Owned(text)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<'de>, A::Error> {
                let mut blocks = Vec::new();
                while let Some(block) = seq.next_element()? {
                    blocks.push(block);
                }
                Ok(Content::Blocks(blocks))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Content::Other)
            }
            fn visit_unit<E>(self) -> Result<Content<'de>, E> {
                Ok(Content::Other)
            }
            fn visit_none<E>(self) -> Result<Content<'de>, E> {
                Ok(Content::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Content<'de>, E> {
                Ok(Content::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Content<'de>, E> {
                Ok(Content::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Content<'de>, E> {
                Ok(Content::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Content<'de>, E> {
                Ok(Content::Other)
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

/// A tool the request offers: OpenAI's `{function: {name, parameters}}`
/// or Anthropic's `{name, input_schema}`.
#[derive(Debug, Deserialize)]
pub(crate) struct ToolView<'a> {
    #[serde(borrow, default)]
    pub name: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub function: Option<FunctionView<'a>>,
    #[serde(borrow, default)]
    pub input_schema: Option<SchemaView<'a>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct FunctionView<'a> {
    #[serde(borrow, default)]
    pub name: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub parameters: Option<SchemaView<'a>>,
}

/// A tool's JSON schema: its required parameters and, of its properties,
/// the first by name (as a `serde_json::Map` would list them).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SchemaView<'a> {
    #[serde(borrow, default)]
    pub required: Vec<Text<'a>>,
    #[serde(borrow, default)]
    pub properties: FirstKey<'a>,
}

/// The smallest key of a JSON object.
#[derive(Debug, Default)]
pub(crate) struct FirstKey<'a>(pub Option<Text<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstKey<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeysVisitor;
        impl<'de> Visitor<'de> for KeysVisitor {
            type Value = FirstKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of properties")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FirstKey<'de>, A::Error> {
                let mut first: Option<Text<'de>> = None;
                while let Some(key) = map.next_key::<Text<'de>>()? {
                    map.next_value::<IgnoredAny>()?;
                    if first.as_ref().is_none_or(|f| key.0 < f.0) {
                        first = Some(key);
                    }
                }
                Ok(FirstKey(first))
            }
            fn visit_unit<E>(self) -> Result<FirstKey<'de>, E> {
                Ok(FirstKey(None))
            }
        }
        deserializer.deserialize_any(KeysVisitor)
    }
}

impl<'a> ToolView<'a> {
    /// Its name and schema in `dialect`'s spelling.
    pub(crate) fn named(&self, openai: bool) -> (Option<&str>, Option<&SchemaView<'a>>) {
        if openai {
            let function = self.function.as_ref();
            (
                function.and_then(|f| f.name.as_deref()),
                function.and_then(|f| f.parameters.as_ref()),
            )
        } else {
            (self.name.as_deref(), self.input_schema.as_ref())
        }
    }
}

/// A JSON string, borrowed from the body unless it has escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Text<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_loop_needs_and_borrows_what_has_no_escapes() {
        let body = br#"{
            "model": "m", "stream": true, "temperature": 0.2,
            "messages": [
                {"role": "user", "content": "line\none", "name": {"nested": [1, 2]}},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1"}]},
                {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "o"}, {"type": "text", "text": "k"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}
            ],
            "tools": [
                {"type": "function", "function": {"name": "bash", "parameters": {"properties": {"z": {}, "cmd": {}}}}},
                {"name": "read", "input_schema": {"required": ["path"], "properties": {}}}
            ]
        }"#;
        let view = RequestView::parse(body);
        assert_eq!(
            (view.model.as_deref(), view.stream),
            (Some("m"), Some(true))
        );
        let [first, second, third, fourth] = &view.messages[..] else {
            panic!("{view:?}")
        };
        // An escape makes its own string; the rest borrow the body.
        assert!(matches!(&first.content, Content::Text(Cow::Owned(text)) if text == "line\none"));
        assert!(matches!(
            view.model.as_ref().map(|m| &m.0),
            Some(Cow::Borrowed("m"))
        ));
        assert!(matches!(second.content, Content::Other));
        assert_eq!(
            (third.tool_call_id.as_deref(), third.content.text().as_str()),
            (Some("call_1"), "ok")
        );
        let Content::Blocks(blocks) = &fourth.content else {
            panic!("{fourth:?}")
        };
        assert_eq!(blocks[0].tool_use_id.as_deref(), Some("t1"));
        assert_eq!(blocks[0].content.text(), "done");
        let (name, schema) = view.tools[0].named(true);
        assert_eq!(name, Some("bash"));
        // The first property by name, as a serde_json::Map lists them.
        assert_eq!(schema.and_then(|s| s.properties.0.as_deref()), Some("cmd"));
        let (name, schema) = view.tools[1].named(false);
        assert_eq!(name, Some("read"));
        assert_eq!(
            schema.map(|s| s.required[0].to_string()).as_deref(),
            Some("path")
        );
        // A body of another shape reads as empty.
        assert!(RequestView::parse(b"[1, 2]").messages.is_empty());
        assert!(
            RequestView::parse(b"{\"messages\": [1]}")
                .messages
                .is_empty()
        );
    }
}
