//! A query's result (`tack query`) as a table for people, or as CSV or
//! JSON for programs.

use tack_analysis::cost::csv_field;
use tack_analysis::query::{Cell, QueryResult};

/// Widest a text column gets in the table view; CSV and JSON print whole
/// values.
const MAX_WIDTH: usize = 60;

/// The result as a table: numbers aligned right, floats to six decimals,
/// each value on one line and cut at [`MAX_WIDTH`] characters; then the
/// row count.
pub fn query_table(result: &QueryResult) -> String {
    let numeric: Vec<bool> = result
        .types
        .iter()
        .map(|t| t.starts_with('i') || t.starts_with('u') || t.starts_with('f'))
        .collect();
    let rows: Vec<Vec<String>> = result
        .rows
        .iter()
        .map(|row| row.iter().map(shown).collect())
        .collect();
    let mut out = super::table(&result.columns, &rows, &numeric);
    out.push_str(&format!(
        "({})\n",
        tack_protocol::count(result.rows.len(), "row")
    ));
    out
}

/// The result as CSV: a header line, then one line per row.
pub fn query_csv(result: &QueryResult) -> String {
    let line = |fields: Vec<String>| {
        let quoted: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        quoted.join(",") + "\n"
    };
    let mut out = line(result.columns.clone());
    for row in &result.rows {
        out.push_str(&line(row.iter().map(plain).collect()));
    }
    out
}

/// The result as a JSON array of one object per row, keys in column order
/// (serde_json's map would sort them), one row a line.
pub fn query_json(result: &QueryResult) -> String {
    let keys: Vec<String> = result
        .columns
        .iter()
        .map(|c| serde_json::Value::from(c.as_str()).to_string())
        .collect();
    let rows: Vec<String> = result
        .rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = keys
                .iter()
                .zip(row)
                .map(|(key, cell)| {
                    let value = serde_json::to_string(cell).unwrap_or_else(|_| "null".into());
                    format!("{key}: {value}")
                })
                .collect();
            format!("  {{{}}}", fields.join(", "))
        })
        .collect();
    if rows.is_empty() {
        "[]\n".to_string()
    } else {
        format!("[\n{}\n]\n", rows.join(",\n"))
    }
}

/// The value as CSV and JSON show it: whole, numbers unrounded; a list as
/// its JSON array.
fn plain(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Bool(b) => b.to_string(),
        Cell::Int(v) => v.to_string(),
        Cell::UInt(v) => v.to_string(),
        Cell::Float(v) => v.to_string(),
        Cell::Text(s) => s.clone(),
        Cell::List(_) => serde_json::to_string(cell).unwrap_or_default(),
    }
}

/// The value as the table view shows it: one line, floats to six decimals.
fn shown(cell: &Cell) -> String {
    let text = match cell {
        Cell::Null => "null".to_string(),
        Cell::Float(v) => {
            let fixed = format!("{v:.6}");
            let trimmed = fixed.trim_end_matches('0').trim_end_matches('.');
            trimmed.to_string()
        }
        other => plain(other),
    };
    // Trace content: shown, never obeyed by the terminal.
    let flat = tack_protocol::printable(&text)
        .replace('\n', "⏎")
        .replace('\t', " ");
    if flat.chars().count() > MAX_WIDTH {
        let cut: String = flat.chars().take(MAX_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> QueryResult {
        QueryResult {
            columns: vec!["variant".into(), "rate".into()],
            types: vec!["str".into(), "f64".into()],
            rows: vec![
                vec![Cell::Text("a,b".into()), Cell::Float(0.5)],
                vec![Cell::Text("x\n".repeat(40)), Cell::Null],
            ],
        }
    }

    #[test]
    fn the_table_rounds_floats_flattens_and_cuts_text() {
        let text = query_table(&result());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["variant", "rate"]
        );
        assert!(
            lines[2].starts_with("a,b") && lines[2].ends_with(" 0.5"),
            "{text}"
        );
        assert!(lines[3].contains("x⏎x") && lines[3].contains('…'), "{text}");
        assert!(lines[3].ends_with("null"), "{text}");
        assert_eq!(lines[4], "(2 rows)");
    }

    #[test]
    fn csv_quotes_and_json_keeps_the_column_order() {
        let csv = query_csv(&result());
        assert!(csv.starts_with("variant,rate\n\"a,b\",0.5\n"), "{csv}");
        let json = query_json(&result());
        assert!(
            json.starts_with("[\n  {\"variant\": \"a,b\", \"rate\": 0.5},\n"),
            "{json}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed[1]["rate"], serde_json::Value::Null);
        let empty = QueryResult {
            rows: vec![],
            ..result()
        };
        assert_eq!(query_json(&empty), "[]\n");
    }
}
