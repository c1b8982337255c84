//! The first line of defence for tool arguments: each tool's JSON Schema,
//! compiled once, checked before the tool runs. Unlike the typed parse, which
//! stops at the first problem, it reports every problem at once, each naming
//! its field by JSON pointer (`/command`), so one retry can fix them all.

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::Value;
use tack_protocol::{ToolErrorKind, ToolSpec};

use super::ToolError;

/// Problems listed in one message; the rest are only counted.
const MAX_PROBLEMS: usize = 5;

/// A tool whose parameter schema is not a valid JSON Schema: a bug in the
/// tool, found when the dispatcher is built rather than on the model's calls.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the parameter schema of the `{tool}` tool is not a valid JSON Schema: {reason}")]
pub struct InvalidToolSchema {
    pub tool: String,
    pub reason: String,
}

/// One tool's compiled parameter schema.
pub(crate) struct ArgumentSchema {
    validator: Validator,
    /// Kept to name the allowed fields when an unexpected one shows up.
    schema: Value,
}

impl ArgumentSchema {
    pub(crate) fn compile(spec: &ToolSpec) -> Result<ArgumentSchema, InvalidToolSchema> {
        // `validator_for` also checks the schema against its meta-schema, so a
        // typo such as `"type": "strng"` is caught here, not on every call.
        let validator =
            jsonschema::validator_for(&spec.parameters).map_err(|e| InvalidToolSchema {
                tool: spec.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(ArgumentSchema {
            validator,
            schema: spec.parameters.clone(),
        })
    }

    /// Checks `arguments` for `tool`: every problem, one line each, in an
    /// `InvalidArguments` error.
    pub(crate) fn check(&self, tool: &str, arguments: &Value) -> Result<(), ToolError> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .flat_map(|error| self.describe(&error))
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            report(tool, &problems),
        ))
    }

    /// `<field pointer>: <what is wrong>` lines for one error. Missing and
    /// unexpected fields are reported at the object, so their pointer is
    /// extended with the field's name.
    fn describe(&self, error: &ValidationError<'_>) -> Vec<String> {
        let at = error.instance_path().as_str();
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                vec![format!(
                    "{}: {property} is a required property",
                    pointer(at, name)
                )]
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let allowed = self.allowed_fields(error.schema_path().as_str());
                unexpected
                    .iter()
                    .map(|name| {
                        format!(
                            "{}: {} is not expected (additional property; allowed: {allowed})",
                            pointer(at, name),
                            Value::from(name.as_str())
                        )
                    })
                    .collect()
            }
            _ => {
                let at = if at.is_empty() { "/" } else { at };
                vec![format!("{at}: {error}")]
            }
        }
    }

    /// The `properties` of the schema object that holds the failing
    /// `additionalProperties` keyword.
    fn allowed_fields(&self, schema_path: &str) -> String {
        let object = schema_path
            .rsplit_once('/')
            .map_or("", |(parent, _)| parent);
        let names: Vec<&str> = self
            .schema
            .pointer(object)
            .and_then(|schema| schema.get("properties"))
            .and_then(Value::as_object)
            .map(|properties| properties.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }
}

/// A JSON pointer to field `name` of the object at `parent`.
fn pointer(parent: &str, name: &str) -> String {
    format!("{parent}/{}", name.replace('~', "~0").replace('/', "~1"))
}

fn report(tool: &str, problems: &[String]) -> String {
    let count = match problems.len() {
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    };
    let mut message = format!("invalid arguments for `{tool}` ({count}):");
    for problem in problems.iter().take(MAX_PROBLEMS) {
        message.push_str(&format!("\n- {problem}"));
    }
    if problems.len() > MAX_PROBLEMS {
        message.push_str(&format!("\n- … and {} more", problems.len() - MAX_PROBLEMS));
    }
    message.push_str("\nCheck the tool's schema and call it again with every field fixed.");
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(parameters: Value) -> ToolSpec {
        ToolSpec {
            name: "t".to_string(),
            description: String::new(),
            parameters,
        }
    }

    #[test]
    fn broken_schemas_are_refused_with_the_tool_named() {
        let error = ArgumentSchema::compile(&spec(json!({"type": "strng"}))).err();
        let error = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("`t` tool"), "{error}");
    }

    #[test]
    fn every_problem_is_listed_up_to_the_cap() {
        let schema = ArgumentSchema::compile(&spec(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer", "minimum": 1}},
            "required": ["a", "b"],
            "additionalProperties": false
        })))
        .unwrap();
        assert!(schema.check("t", &json!({"a": "x", "b": 2})).is_ok());
        let error = schema.check("t", &json!({"b": 0, "c": 1})).unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::InvalidArguments);
        let message = &error.message;
        assert!(message.contains("(3 problems)"), "{message}");
        assert!(
            message.contains(r#"/a: "a" is a required property"#),
            "{message}"
        );
        assert!(
            message.contains("/b: 0 is less than the minimum of 1"),
            "{message}"
        );
        assert!(
            message.contains(r#"/c: "c" is not expected (additional property; allowed: a, b)"#),
            "{message}"
        );
        let many: serde_json::Map<String, Value> =
            (0..8).map(|i| (format!("x{i}"), json!(i))).collect();
        let error = schema.check("t", &Value::Object(many)).unwrap_err();
        assert!(error.message.contains("… and 5 more"), "{}", error.message);
    }
}
