//! What a model call cost: a dated, versioned price table (built in, or the
//! user's own file) and the arithmetic. A model with no price has an
//! unknown cost (`None`), never a cost of 0.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use tack_protocol::Usage;

const BUILTIN: &str = include_str!("../prices/2026-11-01.toml");

/// Dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cache reads; default: `input`.
    pub cached_input: Option<f64>,
    /// Cache writes; default: `input`.
    pub cache_write: Option<f64>,
    /// Reasoning tokens; default: `output`.
    pub reasoning: Option<f64>,
}

/// The cost in dollars of one call's `usage` at `price`. Usage follows the
/// conventions: `input_tokens` includes cache reads and writes, and
/// `reasoning_tokens` are part of `output_tokens`, so each token is charged
/// once, at the rate of its kind.
pub fn cost(usage: &Usage, price: &Price) -> f64 {
    let read = usage.cache_read_tokens;
    let write = usage.cache_write_tokens;
    let uncached = usage.input_tokens.saturating_sub(read + write);
    let reasoning = usage.reasoning_tokens.min(usage.output_tokens);
    let visible_output = usage.output_tokens - reasoning;
    let dollars = uncached as f64 * price.input
        + read as f64 * price.cached_input.unwrap_or(price.input)
        + write as f64 * price.cache_write.unwrap_or(price.input)
        + visible_output as f64 * price.output
        + reasoning as f64 * price.reasoning.unwrap_or(price.output);
    dollars / 1e6
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    version: String,
    #[serde(default)]
    models: BTreeMap<String, Price>,
}

#[derive(Debug, Clone)]
pub struct PriceTable {
    version: String,
    exact: BTreeMap<String, Price>,
    /// Longest pattern first: the most specific wins.
    patterns: Vec<(String, globset::GlobMatcher, Price)>,
}

#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("could not read the price table {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid price table: {0}")]
    Invalid(String),
}

impl PriceTable {
    /// The table shipped with tack (see `prices/` for its date).
    pub fn builtin() -> &'static PriceTable {
        static TABLE: OnceLock<PriceTable> = OnceLock::new();
        // A unit test proves the embedded file parses; should it ever not,
        // every cost is unknown rather than the program failing.
        TABLE.get_or_init(|| {
            PriceTable::parse(BUILTIN).unwrap_or_else(|_| PriceTable::empty("invalid"))
        })
    }

    fn empty(version: &str) -> PriceTable {
        PriceTable {
            version: version.to_string(),
            exact: BTreeMap::new(),
            patterns: Vec::new(),
        }
    }

    /// A user's price file, in the built-in table's format.
    pub fn load(path: &Path) -> Result<PriceTable, PriceError> {
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Io {
            path: path.display().to_string(),
            source,
        })?;
        PriceTable::parse(&text)
            .map_err(|e| PriceError::Invalid(format!("{}: {e}", path.display())))
    }

    pub fn parse(text: &str) -> Result<PriceTable, PriceError> {
        let file: PriceFile =
            toml::from_str(text).map_err(|e| PriceError::Invalid(e.to_string()))?;
        let mut table = PriceTable::empty(&file.version);
        for (name, price) in file.models {
            table.insert(name, price)?;
        }
        Ok(table)
    }

    fn insert(&mut self, name: String, price: Price) -> Result<(), PriceError> {
        let rates = [
            Some(price.input),
            Some(price.output),
            price.cached_input,
            price.cache_write,
            price.reasoning,
        ];
        if rates
            .into_iter()
            .flatten()
            .any(|r| !r.is_finite() || r < 0.0)
        {
            return Err(PriceError::Invalid(format!(
                "`{name}` has a negative or invalid price"
            )));
        }
        if !name.contains(['*', '?', '[']) {
            self.exact.insert(name, price);
            return Ok(());
        }
        let glob = globset::Glob::new(&name)
            .map_err(|e| PriceError::Invalid(format!("pattern `{name}`: {e}")))?;
        self.patterns.retain(|(pattern, ..)| *pattern != name);
        self.patterns.push((name, glob.compile_matcher(), price));
        self.patterns
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(())
    }

    /// This table with `overrides`' entries added or replacing its own; the
    /// version becomes the override's.
    pub fn with_overrides(mut self, overrides: &PriceTable) -> Result<PriceTable, PriceError> {
        for (name, price) in &overrides.exact {
            self.exact.insert(name.clone(), *price);
        }
        for (name, _, price) in &overrides.patterns {
            self.insert(name.clone(), *price)?;
        }
        self.version = overrides.version.clone();
        Ok(self)
    }

    /// The table's `version` (its date).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The price for `model` and the entry that matched it: exact name, then
    /// without a `provider:` (or OpenRouter-style `vendor/`) prefix, then
    /// without a date suffix, then the patterns.
    pub fn lookup(&self, model: &str) -> Option<(&str, &Price)> {
        let unprefixed = strip_prefix(model);
        let undated = strip_date(unprefixed);
        let names = [model, unprefixed, undated];
        names
            .iter()
            .find_map(|name| self.exact.get_key_value(*name))
            .map(|(name, price)| (name.as_str(), price))
            .or_else(|| {
                self.patterns.iter().find_map(|(pattern, matcher, price)| {
                    names
                        .iter()
                        .any(|name| matcher.is_match(name))
                        .then_some((pattern.as_str(), price))
                })
            })
    }

    /// The cost of `usage` on `model`; `None` when the table has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.lookup(model).map(|(_, price)| cost(usage, price))
    }
}

/// Only a provider's prefix goes: `llama3:8b` (Ollama) keeps its colon.
fn strip_prefix(model: &str) -> &str {
    let model = match model.split_once(':') {
        Some((provider, rest)) if crate::Provider::parse(provider).is_some() => rest,
        _ => model,
    };
    model.rsplit_once('/').map_or(model, |(_, rest)| rest)
}

/// `gpt-4o-2024-08-06` → `gpt-4o`; `claude-sonnet-4-20250514` → `claude-sonnet-4`.
fn strip_date(model: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let bytes = model.as_bytes();
    let len = bytes.len();
    if len > 11 && bytes[len - 11] == b'-' {
        let date = &model[len - 10..];
        let parts: Vec<&str> = date.split('-').collect();
        if parts.len() == 3
            && [4, 2, 2] == [parts[0].len(), parts[1].len(), parts[2].len()]
            && parts.iter().all(|p| digits(p))
        {
            return &model[..len - 11];
        }
    }
    if len > 9 && bytes[len - 9] == b'-' && digits(&model[len - 8..]) {
        return &model[..len - 9];
    }
    model
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64, reasoning: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: reasoning,
        }
    }

    #[test]
    fn the_builtin_table_parses_and_is_dated() {
        let table = PriceTable::parse(BUILTIN).unwrap();
        assert_eq!(table.version(), "2026-11-01");
        assert_eq!(PriceTable::builtin().version(), "2026-11-01");
        assert!(table.lookup("gpt-4o").is_some());
    }

    #[test]
    fn cost_charges_each_token_once_at_its_rate() {
        let sonnet = Price {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
            cache_write: Some(3.75),
            reasoning: None,
        };
        // 10_000 input of which 6_000 read and 1_000 written: 3_000 uncached.
        // 3_000·3 + 6_000·0.3 + 1_000·3.75 + 2_000·15 = 9_000 + 1_800 + 3_750 + 30_000
        let dollars = cost(&usage(10_000, 2_000, 6_000, 1_000, 0), &sonnet);
        assert!((dollars - 0.04455).abs() < 1e-12, "{dollars}");

        let o3 = Price {
            input: 2.0,
            output: 8.0,
            cached_input: Some(0.5),
            cache_write: None,
            reasoning: Some(4.0),
        };
        // 1_000 input (200 cached), 500 output of which 300 reasoning:
        // 800·2 + 200·0.5 + 200·8 + 300·4 = 1_600 + 100 + 1_600 + 1_200 = 4_500
        let dollars = cost(&usage(1_000, 500, 200, 0, 300), &o3);
        assert!((dollars - 0.0045).abs() < 1e-12, "{dollars}");

        // Without a reasoning price, reasoning is output: 1_000·2 + 500·8.
        let plain = Price {
            reasoning: None,
            ..o3
        };
        let dollars = cost(&usage(1_000, 500, 0, 0, 300), &plain);
        assert!((dollars - 0.006).abs() < 1e-12, "{dollars}");
    }

    #[test]
    fn names_match_exactly_then_unprefixed_then_undated_then_by_pattern() {
        let table = PriceTable::builtin();
        let matched = |model: &str| table.lookup(model).map(|(name, _)| name.to_string());
        assert_eq!(matched("gpt-4o").as_deref(), Some("gpt-4o"));
        assert_eq!(
            matched("openai:gpt-4o-mini").as_deref(),
            Some("gpt-4o-mini")
        );
        assert_eq!(matched("gpt-4o-2024-08-06").as_deref(), Some("gpt-4o"));
        assert_eq!(
            matched("openai/gpt-4.1-mini").as_deref(),
            Some("gpt-4.1-mini")
        );
        assert_eq!(
            matched("anthropic:claude-sonnet-4-20250514").as_deref(),
            Some("claude-sonnet-4*")
        );
        assert_eq!(
            matched("claude-opus-4-5-20251101").as_deref(),
            Some("claude-opus-4-5*")
        );
        assert_eq!(
            matched("claude-opus-4-1-20250805").as_deref(),
            Some("claude-opus-4*")
        );
        assert_eq!(matched("llama3:8b"), None);
        assert_eq!(
            matched("openai:deepseek-chat").as_deref(),
            Some("deepseek-chat")
        );
        assert_eq!(table.cost("llama3:8b", &usage(10, 10, 0, 0, 0)), None);
        // gpt-4o-mini at 0.15 / 0.075 / 0.60: 1_000·0.15 + 1_000·0.075 + 1_000·0.6 = 825
        let dollars = table
            .cost("gpt-4o-mini", &usage(2_000, 1_000, 1_000, 0, 0))
            .unwrap();
        assert!((dollars - 0.000825).abs() < 1e-12, "{dollars}");
    }

    #[test]
    fn a_user_table_overrides_and_extends_the_builtin_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prices.toml");
        std::fs::write(
            &path,
            "version = \"2027-01-01\"\n[models.\"gpt-4o\"]\ninput = 1.0\noutput = 2.0\n\
             [models.\"llama*\"]\ninput = 0.0\noutput = 0.0\n",
        )
        .unwrap();
        let user = PriceTable::load(&path).unwrap();
        let table = PriceTable::builtin().clone().with_overrides(&user).unwrap();
        assert_eq!(table.version(), "2027-01-01");
        assert_eq!(table.lookup("gpt-4o").unwrap().1.input, 1.0);
        assert_eq!(table.cost("llama3:8b", &usage(10, 10, 0, 0, 0)), Some(0.0));
        assert!(table.lookup("o3").is_some());

        std::fs::write(
            &path,
            "version = \"x\"\n[models.a]\ninput = -1.0\noutput = 0.0\n",
        )
        .unwrap();
        assert!(PriceTable::load(&path).is_err());
        assert!(PriceTable::parse("[models.a]\ninput = 1.0\noutput = 1.0\n").is_err());
        assert!(PriceTable::load(&dir.path().join("missing.toml")).is_err());
    }

    #[test]
    fn date_suffixes_of_both_shapes_are_removed() {
        assert_eq!(strip_date("gpt-4o-2024-08-06"), "gpt-4o");
        assert_eq!(strip_date("claude-sonnet-4-20250514"), "claude-sonnet-4");
        assert_eq!(strip_date("o4-mini"), "o4-mini");
        assert_eq!(strip_date("model-12345678x"), "model-12345678x");
    }
}
