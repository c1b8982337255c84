//! The variants section: what each variant is and how its harness is
//! configured, as one table with a row per setting and a column per variant,
//! so a reader sees why two variants score differently. Settings whose values
//! differ between variants come first and are marked.
//!
//! The configuration is the manifest's `config` of each variant, a JSON
//! value whose shape has changed over time: any missing key is shown as "—",
//! and harness or sim keys this module does not know get a row of their own.

use crate::view::thousands;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use tack_protocol::{BuiltinModel, ModelSpec};
use tack_trace::VariantInfo;

/// Characters of a system prompt shown before the full text is folded away.
const PROMPT_CHARS: usize = 80;
/// The text of a setting that is missing or does not apply.
const NONE: &str = "—";

#[derive(Debug, Serialize)]
pub(crate) struct VariantsView {
    pub variants: Vec<VariantColumn>,
    /// Differing settings first, each group in the order of `SETTINGS`.
    pub rows: Vec<SettingRow>,
    /// How many of `rows` differ between variants.
    pub differing: usize,
    /// Some variants have sim rows that do not apply to them.
    pub sim_elsewhere: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct VariantColumn {
    pub name: String,
    pub model: String,
    pub simulated: bool,
    pub description: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct SettingRow {
    pub name: String,
    /// Some variants have another value than the others.
    pub differs: bool,
    pub cells: Vec<SettingCell>,
}

#[derive(Debug, Serialize)]
pub(crate) struct SettingCell {
    /// What the cell shows: the value, shortened if long.
    pub text: String,
    /// The whole value when `text` is shortened.
    pub full: Option<String>,
    /// In a differing row, this value is not the one most variants share.
    pub odd: bool,
}

/// Which part of a variant's config a setting lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Harness,
    /// Only meaningful for the `sim` model.
    Sim,
    /// Only meaningful for models wrapped in `chaos(...)`.
    Chaos,
}

impl Part {
    fn key(self) -> &'static str {
        match self {
            Part::Harness => "harness",
            Part::Sim => "sim",
            Part::Chaos => "chaos",
        }
    }

    /// Whether the part's settings mean anything for the variant.
    fn applies_to(self, info: &VariantInfo) -> bool {
        match self {
            Part::Harness => true,
            Part::Sim => is_sim(info),
            Part::Chaos => model_spec(info).is_some_and(|spec| spec.is_chaos()),
        }
    }
}

struct Setting {
    name: &'static str,
    part: Part,
    key: &'static str,
    format: fn(&Value) -> String,
    shorten: bool,
}

const SETTINGS: [Setting; 22] = [
    setting("Tool results", Part::Harness, "tool_results", plain),
    setting("Max steps", Part::Harness, "max_steps", plain),
    setting("Permissions", Part::Harness, "permissions", off_when_null),
    setting("Approver", Part::Harness, "approver", approver),
    setting(
        "Requires approval",
        Part::Harness,
        "requires_approval",
        plain,
    ),
    setting("Feedback rounds", Part::Harness, "feedback_rounds", plain),
    setting("Max wall time", Part::Harness, "max_wall_secs", seconds),
    setting("Max tokens", Part::Harness, "max_tokens", off_when_null),
    setting(
        "Max cost (USD)",
        Part::Harness,
        "max_cost_usd",
        off_when_null,
    ),
    setting("Model attempts", Part::Harness, "model_attempts", plain),
    setting("Tools", Part::Harness, "tools", plain),
    setting(
        "Command timeout",
        Part::Harness,
        "command_timeout_secs",
        seconds,
    ),
    setting("Output limit", Part::Harness, "output_limit_bytes", bytes),
    Setting {
        shorten: true,
        ..setting("System prompt", Part::Harness, "system_prompt", plain)
    },
    setting("Sim skill", Part::Sim, "skill", plain),
    setting("Sim malformed rate", Part::Sim, "malformed_rate", plain),
    setting("Sim max attempts", Part::Sim, "max_attempts", plain),
    setting(
        "Chaos transport errors",
        Part::Chaos,
        "transport_error",
        plain,
    ),
    setting("Chaos malformed JSON", Part::Chaos, "malformed_json", plain),
    setting("Chaos unknown tools", Part::Chaos, "unknown_tool", plain),
    setting("Chaos wrong types", Part::Chaos, "wrong_types", plain),
    setting("Chaos cut-off answers", Part::Chaos, "truncated", plain),
];

const fn setting(
    name: &'static str,
    part: Part,
    key: &'static str,
    format: fn(&Value) -> String,
) -> Setting {
    Setting {
        name,
        part,
        key,
        format,
        shorten: false,
    }
}

pub(crate) fn variants(infos: &[VariantInfo]) -> VariantsView {
    let any_sim = infos.iter().any(is_sim);
    let used = |part: Part| infos.iter().any(|info| part.applies_to(info));
    let known: Vec<Row> = SETTINGS
        .iter()
        .filter(|s| used(s.part))
        .map(|s| Row {
            name: s.name.to_string(),
            part: s.part,
            key: s.key.to_string(),
            format: s.format,
            shorten: s.shorten,
        })
        .collect();
    let others = [Part::Harness, Part::Sim, Part::Chaos]
        .into_iter()
        .filter(|&part| used(part))
        .flat_map(|part| {
            unknown_keys(infos, part)
                .into_iter()
                .map(move |key| (part, key))
        })
        .map(|(part, key)| Row {
            name: other_name(part, &key),
            part,
            key,
            format: plain,
            shorten: true,
        });
    let rows: Vec<SettingRow> = known
        .into_iter()
        .chain(others)
        .map(|row| row.view(infos))
        .collect();
    let (mut differing, same): (Vec<SettingRow>, Vec<SettingRow>) =
        rows.into_iter().partition(|r| r.differs);
    let count = differing.len();
    differing.extend(same);
    VariantsView {
        variants: infos
            .iter()
            .map(|v| VariantColumn {
                name: v.name.clone(),
                model: v.model.clone(),
                simulated: v.simulated,
                description: v.description.clone(),
            })
            .collect(),
        rows: differing,
        differing: count,
        sim_elsewhere: any_sim && !infos.iter().all(is_sim),
    }
}

/// A setting row before its cells are filled in.
struct Row {
    name: String,
    part: Part,
    key: String,
    format: fn(&Value) -> String,
    shorten: bool,
}

impl Row {
    fn view(&self, infos: &[VariantInfo]) -> SettingRow {
        // `None`: the setting does not apply to the variant (sim parameters
        // of another model) and takes no part in the comparison.
        let values: Vec<Option<String>> = infos
            .iter()
            .map(|info| {
                if !self.part.applies_to(info) {
                    return None;
                }
                Some(match lookup(info, self.part, &self.key) {
                    Some(value) => (self.format)(value),
                    None => NONE.to_string(),
                })
            })
            .collect();
        let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
        for value in values.iter().flatten() {
            *counts.entry(value).or_default() += 1;
        }
        let usual = usual_value(&counts).cloned();
        let differs = counts.len() > 1;
        SettingRow {
            name: self.name.clone(),
            differs,
            cells: values
                .into_iter()
                .map(|value| {
                    let odd = differs
                        && usual.is_some()
                        && value.is_some()
                        && value.as_ref() != usual.as_ref();
                    self.cell(value.unwrap_or_else(|| NONE.to_string()), odd)
                })
                .collect(),
        }
    }

    fn cell(&self, value: String, odd: bool) -> SettingCell {
        let (text, full) = if self.shorten {
            shortened(value)
        } else {
            (value, None)
        };
        SettingCell { text, full, odd }
    }
}

/// The value most variants share, if one is shared by more than any other
/// and by at least two.
fn usual_value<'a>(counts: &BTreeMap<&'a String, usize>) -> Option<&'a String> {
    let most = counts.values().copied().max()?;
    let mut at_most = counts.iter().filter(|(_, n)| **n == most);
    match (at_most.next(), at_most.next()) {
        (Some((value, _)), None) if most >= 2 => Some(value),
        _ => None,
    }
}

/// One line of at most `PROMPT_CHARS` characters and an ellipsis, and the
/// whole text if that differs from what is shown.
fn shortened(value: String) -> (String, Option<String>) {
    let flat = value.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(PROMPT_CHARS) {
        Some((end, _)) => (format!("{}…", cut_at_word(&flat, end)), Some(value)),
        None if flat != value => (flat, Some(value)),
        None => (value, None),
    }
}

/// `text[..end]`, or less to end at a word boundary if one is near.
fn cut_at_word(text: &str, end: usize) -> &str {
    const NEAR: usize = 16;
    let head = &text[..end];
    if text[end..].starts_with(' ') {
        return head.trim_end();
    }
    match head.rfind(' ') {
        Some(space) if head[space..].chars().count() <= NEAR => head[..space].trim_end(),
        _ => head,
    }
}

/// The model as the manifest recorded it; `None` for a spelling this
/// version no longer reads (it then gets no sim or chaos rows).
fn model_spec(info: &VariantInfo) -> Option<ModelSpec> {
    ModelSpec::parse(&info.model).ok()
}

/// The simulated agent, bare or wrapped in `chaos(...)`: the model whose
/// `sim` parameters mean something.
fn is_sim(info: &VariantInfo) -> bool {
    model_spec(info).and_then(|spec| spec.builtin()) == Some(BuiltinModel::Sim)
}

fn lookup<'a>(info: &'a VariantInfo, part: Part, key: &str) -> Option<&'a Value> {
    info.config
        .get(part.key())?
        .get(key)
        .filter(|v| !v.is_null())
}

/// Keys of `part` in any variant's config that `SETTINGS` does not list,
/// sorted.
fn unknown_keys(infos: &[VariantInfo], part: Part) -> BTreeSet<String> {
    infos
        .iter()
        .filter(|info| part.applies_to(info))
        .filter_map(|info| info.config.get(part.key())?.as_object())
        .flat_map(|object| object.keys())
        .filter(|key| {
            !SETTINGS
                .iter()
                .any(|s| s.part == part && s.key == key.as_str())
        })
        .cloned()
        .collect()
}

fn other_name(part: Part, key: &str) -> String {
    let words = key.replace('_', " ");
    match part {
        Part::Harness => words,
        Part::Sim => format!("sim {words}"),
        Part::Chaos => format!("chaos {words}"),
    }
}

/// Strings as written, lists comma-separated, anything else as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "none".to_string(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

fn seconds(value: &Value) -> String {
    match value.as_u64() {
        Some(secs) => format!("{secs} s"),
        None => off_when_null(value),
    }
}

/// Optional limits and switches: `null` means not set.
fn off_when_null(value: &Value) -> String {
    if value.is_null() {
        "off".to_string()
    } else {
        plain(value)
    }
}

/// `rules: python3 -m unittest*, str_replace`, `deny_all`, `script: ./review.sh`.
fn approver(value: &Value) -> String {
    let policy = value
        .get("policy")
        .and_then(Value::as_str)
        .unwrap_or("deny_all");
    match policy {
        "rules" => format!(
            "rules: {}",
            value.get("approve").map(plain).unwrap_or_default()
        ),
        "script" => format!(
            "script: {}",
            value.get("script").map(plain).unwrap_or_default()
        ),
        other => other.to_string(),
    }
}

fn bytes(value: &Value) -> String {
    match value.as_u64() {
        Some(n) => format!("{} bytes", thousands(n as f64)),
        None => plain(value),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn info(name: &str, model: &str, config: Value) -> VariantInfo {
        VariantInfo {
            name: name.to_string(),
            model: model.to_string(),
            simulated: model == "sim",
            description: String::new(),
            config,
        }
    }

    fn row<'a>(view: &'a VariantsView, name: &str) -> &'a SettingRow {
        view.rows.iter().find(|r| r.name == name).unwrap()
    }

    fn texts(row: &SettingRow) -> Vec<&str> {
        row.cells.iter().map(|c| c.text.as_str()).collect()
    }

    #[test]
    fn differing_settings_come_first() {
        let harness = |results: &str| {
            json!({"harness": {"tool_results": results, "max_steps": 20, "tools": ["bash", "read_file"],
                "command_timeout_secs": 60, "output_limit_bytes": 32768}})
        };
        let view = variants(&[
            info("full", "openai:gpt-4o", harness("full")),
            info("stdout", "openai:gpt-4o", harness("stdout_only")),
        ]);
        assert_eq!(view.differing, 1);
        assert_eq!(view.rows[0].name, "Tool results");
        assert!(view.rows[0].differs);
        assert_eq!(texts(&view.rows[0]), ["full", "stdout_only"]);
        assert!(
            view.rows[0].cells.iter().all(|c| !c.odd),
            "one against one: neither is the odd one out"
        );
        assert!(!row(&view, "Max steps").differs);
        assert_eq!(texts(row(&view, "Tools")), ["bash, read_file"; 2]);
        assert_eq!(texts(row(&view, "Command timeout")), ["60 s"; 2]);
        assert_eq!(texts(row(&view, "Output limit")), ["32,768 bytes"; 2]);
        assert!(
            view.rows.iter().all(|r| !r.name.starts_with("Sim")),
            "no sim rows without a sim model"
        );
    }

    #[test]
    fn missing_keys_show_a_dash() {
        let view = variants(&[
            info("old", "oracle", json!({"max_steps": 10})),
            info("older", "oracle", Value::Null),
        ]);
        assert_eq!(view.differing, 0);
        assert_eq!(view.rows.len(), 14, "every harness setting, no sim rows");
        for row in &view.rows {
            assert_eq!(texts(row), [NONE; 2], "{}", row.name);
        }
    }

    #[test]
    fn sim_parameters_only_for_the_sim_model() {
        let sim =
            |skill: f64| json!({"sim": {"skill": skill, "malformed_rate": 0.1, "max_attempts": 3}});
        let view = variants(&[
            info("oracle", "oracle", sim(0.7)),
            info("a", "sim", sim(0.5)),
            info("b", "sim", sim(0.5)),
        ]);
        let skill = row(&view, "Sim skill");
        assert_eq!(texts(skill), [NONE, "0.5", "0.5"]);
        assert!(!skill.differs, "oracle's unused skill is no difference");
        assert!(skill.cells.iter().all(|c| !c.odd));
        let view = variants(&[
            info("a", "sim", sim(0.5)),
            info("b", "sim", sim(0.9)),
            info("c", "sim", sim(0.5)),
            info("oracle", "oracle", sim(0.9)),
        ]);
        let skill = &view.rows[0];
        assert_eq!(skill.name, "Sim skill");
        assert!(skill.differs);
        let odd: Vec<bool> = skill.cells.iter().map(|c| c.odd).collect();
        assert_eq!(odd, [false, true, false, false]);
    }

    #[test]
    fn long_prompts_are_shortened_and_kept_whole() {
        let long = format!("Be\ncareful. {}", "x".repeat(100));
        let view = variants(&[
            info("a", "oracle", json!({"harness": {"system_prompt": long}})),
            info(
                "b",
                "oracle",
                json!({"harness": {"system_prompt": "Short."}}),
            ),
        ]);
        let prompt = row(&view, "System prompt");
        assert!(prompt.differs);
        let cell = &prompt.cells[0];
        assert!(cell.text.starts_with("Be careful. xxx"));
        assert!(cell.text.ends_with('…'));
        assert_eq!(cell.text.chars().count(), PROMPT_CHARS + 1);
        assert_eq!(cell.full.as_deref(), Some(long.as_str()));
        assert_eq!(prompt.cells[1].text, "Short.");
        assert_eq!(cut_at_word("one two three", 9), "one two");
        assert_eq!(cut_at_word("one two three", 7), "one two");
        assert_eq!(cut_at_word("one two three", 8), "one two");
        assert_eq!(prompt.cells[1].full, None);
    }

    #[test]
    fn unknown_keys_get_their_own_rows() {
        let view = variants(&[
            info("a", "oracle", json!({"harness": {"temperature": 0.2}})),
            info("b", "oracle", json!({"harness": {}})),
        ]);
        let other = row(&view, "temperature");
        assert!(other.differs);
        assert_eq!(texts(other), ["0.2", NONE]);
    }
}
