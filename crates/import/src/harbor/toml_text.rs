//! The task.toml an import writes, by hand so that its comments can say
//! what differs from the image: values quoted as TOML, the task's own
//! words kept inside comments.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// `text`, the task's own words (its name, a key, a note), fit for one
/// comment line of the task.toml written: a line break in it would end
/// the comment and write settings of the task's choosing.
pub(super) fn in_comment(text: &str) -> String {
    tack_protocol::printable_line(text)
}

pub(super) fn whole_secs(duration: Duration) -> u64 {
    duration.as_secs_f64().ceil().max(1.0) as u64
}

/// A TOML string (basic or multi-line, as the serializer chooses).
pub(super) fn quote(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

pub(super) fn write_list(out: &mut String, key: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let items: Vec<String> = items.iter().map(|i| quote(i)).collect();
    let line = items.join(", ");
    if line.len() <= 80 {
        let _ = writeln!(out, "{key} = [{line}]");
    } else {
        let _ = writeln!(out, "{key} = [\n  {},\n]", items.join(",\n  "));
    }
}

pub(super) fn write_table(out: &mut String, key: &str, table: &BTreeMap<String, String>) {
    if table.is_empty() {
        return;
    }
    let entries: Vec<String> = table
        .iter()
        .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
        .collect();
    let _ = writeln!(out, "{key} = {{ {} }}", entries.join(", "));
}
