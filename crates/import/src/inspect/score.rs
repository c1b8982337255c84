//! Inspect scores as pass or fail. tack's outcomes are binary, Inspect's
//! scores are not, so the rule is written down here and in the README:
//!
//! * `C` (correct) passes; `I` (incorrect), `P` (partial) and `N` (no
//!   answer) fail; so do `yes`/`true` pass and `no`/`false` fail, in any
//!   case, as Inspect's `value_to_float` reads them.
//! * A number (or a string holding one) passes only at 1.0 or more: Inspect's
//!   "correct" is 1.0, and a partial 0.5 is not a pass.
//! * `true` passes, `false` fails.
//! * A list or dict passes only if every entry does (an empty one fails).
//! * A sample with several scorers passes only if every scorer passes.
//!
//! The raw value, the answer and the explanation are kept verbatim in each
//! scorer's check span, so nothing of the original score is lost.

use serde_json::Value;

use super::values::{str_field, text_of};

/// Whether an Inspect score value counts as a pass.
pub fn passes(value: &Value) -> bool {
    match value {
        Value::Bool(passed) => *passed,
        Value::Number(number) => number.as_f64().is_some_and(|n| n >= 1.0),
        Value::String(text) => string_passes(text),
        Value::Array(items) => !items.is_empty() && items.iter().all(passes),
        Value::Object(fields) => !fields.is_empty() && fields.values().all(passes),
        Value::Null => false,
    }
}

fn string_passes(text: &str) -> bool {
    let text = text.trim();
    match text.to_ascii_lowercase().as_str() {
        "c" | "yes" | "true" => true,
        "i" | "p" | "n" | "no" | "false" => false,
        _ => text.parse::<f64>().is_ok_and(|n| n >= 1.0),
    }
}

/// What a scorer's check span shows: the raw value first (as Inspect wrote
/// it, so `C`, `0.5` or a dict stays visible), then answer and explanation.
pub fn check_output(score: &Value) -> String {
    let mut lines = vec![format!(
        "value: {}",
        score.get("value").map(text_of).unwrap_or_default()
    )];
    for field in ["answer", "explanation"] {
        if let Some(text) = str_field(score, field)
            && !text.is_empty()
        {
            lines.push(format!("{field}: {text}"));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn letter_grades_pass_only_when_correct() {
        assert!(passes(&json!("C")));
        assert!(passes(&json!("c")));
        for failing in ["I", "P", "N", "no", "false", "garbage", ""] {
            assert!(!passes(&json!(failing)), "{failing}");
        }
        assert!(passes(&json!("yes")));
    }

    #[test]
    fn numbers_pass_at_one() {
        assert!(passes(&json!(1)));
        assert!(passes(&json!(1.0)));
        assert!(passes(&json!("1.0")));
        assert!(!passes(&json!(0.5)));
        assert!(!passes(&json!(0)));
        assert!(!passes(&json!("0.99")));
    }

    #[test]
    fn containers_pass_when_every_entry_does() {
        assert!(passes(&json!({"a": "C", "b": 1})));
        assert!(!passes(&json!({"a": "C", "b": 0})));
        assert!(!passes(&json!([])));
        assert!(passes(&json!([true, "C"])));
        assert!(!passes(&Value::Null));
    }

    #[test]
    fn the_check_output_keeps_the_raw_score() {
        let score = json!({"value": "I", "answer": "3", "explanation": "ANSWER: 3"});
        assert_eq!(
            check_output(&score),
            "value: I\nanswer: 3\nexplanation: ANSWER: 3"
        );
        assert_eq!(check_output(&json!({"value": 0.5})), "value: 0.5");
    }
}
