//! The trials table's counts ([`TRIAL_COUNTS`]) as the analysis hands them
//! on: per trial ([`Counts`]) and per variant ([`VariantCounts`]). Both
//! serialise flat, one key per count, so `--json` names each count by its
//! column whatever counts a run has.

use polars::prelude::*;
use serde::ser::{Serialize, SerializeMap, Serializer};
use tack_trace::schema::{Summary, TRIAL_COUNTS, TrialCount};

use crate::AnalysisError;
use crate::frame::Frame;

/// One trial's counts, in [`TRIAL_COUNTS`] order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts(Vec<(&'static str, u32)>);

impl Counts {
    /// The count of `column`; 0 for a column that is not a count.
    pub fn get(&self, column: &str) -> u32 {
        self.0
            .iter()
            .find(|(name, _)| *name == column)
            .map_or(0, |(_, value)| *value)
    }

    /// Sets the count of `column` (tests and fixtures build rows by hand).
    pub fn set(&mut self, column: &'static str, value: u32) {
        match self.0.iter_mut().find(|(name, _)| *name == column) {
            Some((_, old)) => *old = value,
            None => self.0.push((column, value)),
        }
    }

    /// Each count's column and value, in [`TRIAL_COUNTS`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u32)> + '_ {
        self.0.iter().copied()
    }
}

impl Serialize for Counts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (column, value) in &self.0 {
            map.serialize_entry(column, value)?;
        }
        map.end()
    }
}

/// One count over a variant's scored trials.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantCount {
    /// The count's column.
    pub column: &'static str,
    /// What it counts, as a table heading says it.
    pub label: &'static str,
    /// How a run report shows it; `None`: per trial only.
    pub summary: Option<Summary>,
    pub sum: u64,
    /// `sum` per scored trial; 0 with no trials.
    pub mean: f64,
}

impl VariantCount {
    fn new(count: &TrialCount, sum: u64, mean: f64) -> VariantCount {
        VariantCount {
            column: count.column,
            label: count.label,
            summary: count.summary,
            sum,
            mean,
        }
    }

    /// The figure a run report shows, as its count's [`Summary`] says;
    /// `None` for counts shown per trial only.
    pub fn shown(&self) -> Option<f64> {
        match self.summary? {
            Summary::Mean => Some(self.mean),
            Summary::Sum => Some(self.sum as f64),
        }
    }
}

/// A variant's counts, in [`TRIAL_COUNTS`] order. Serialised as each
/// summarised count's sum under its column (`retries`), or its mean under
/// `mean_<column>` (`mean_steps`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VariantCounts(Vec<VariantCount>);

impl VariantCounts {
    /// Zeros for a variant with no scored trial.
    pub fn zero() -> VariantCounts {
        VariantCounts(
            TRIAL_COUNTS
                .iter()
                .map(|count| VariantCount::new(count, 0, 0.0))
                .collect(),
        )
    }

    /// The sum of `column` over the variant's scored trials.
    pub fn sum(&self, column: &str) -> u64 {
        self.find(column).map_or(0, |c| c.sum)
    }

    /// The mean of `column` per scored trial.
    pub fn mean(&self, column: &str) -> f64 {
        self.find(column).map_or(0.0, |c| c.mean)
    }

    pub fn iter(&self) -> impl Iterator<Item = &VariantCount> {
        self.0.iter()
    }

    fn find(&self, column: &str) -> Option<&VariantCount> {
        self.0.iter().find(|c| c.column == column)
    }
}

impl Serialize for VariantCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for count in &self.0 {
            match count.summary {
                Some(Summary::Mean) => {
                    map.serialize_entry(&format!("mean_{}", count.column), &count.mean)?
                }
                Some(Summary::Sum) => map.serialize_entry(count.column, &count.sum)?,
                None => {}
            }
        }
        map.end()
    }
}

/// The count columns, with what a trace written before a count existed
/// reads there: 0.
pub(crate) fn added_columns() -> Vec<(&'static str, DataType, Expr)> {
    TRIAL_COUNTS
        .iter()
        .map(|c| (c.column, DataType::UInt32, lit(0u32)))
        .collect()
}

/// The count columns, to select.
pub(crate) fn columns() -> impl Iterator<Item = Expr> {
    names().map(col)
}

/// The count columns' names.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    TRIAL_COUNTS.iter().map(|c| c.column)
}

/// Name of the aggregate holding a count's sum.
fn sum_name(count: &TrialCount) -> String {
    format!("{}__sum", count.column)
}

/// A group's sums of every count, as u64 (Polars keeps narrow integer types
/// on sum).
pub(crate) fn sums() -> impl Iterator<Item = Expr> {
    TRIAL_COUNTS.iter().map(|c| {
        col(c.column)
            .cast(DataType::UInt64)
            .sum()
            .alias(sum_name(c))
    })
}

/// Each row's counts, from a frame with [`columns`].
pub(crate) fn per_row(frame: &Frame) -> Result<Vec<Counts>, AnalysisError> {
    let columns = TRIAL_COUNTS
        .iter()
        .map(|c| Ok((c.column, frame.u32s(c.column)?)))
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    Ok((0..frame.height())
        .map(|i| Counts(columns.iter().map(|(name, v)| (*name, v[i])).collect()))
        .collect())
}

/// Each row's counts over `trials` trials, from a frame with [`sums`].
pub(crate) fn per_group(
    frame: &Frame,
    trials: &[u64],
) -> Result<Vec<VariantCounts>, AnalysisError> {
    let columns = TRIAL_COUNTS
        .iter()
        .map(|c| Ok((c, frame.u64s(&sum_name(c))?)))
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    Ok((0..frame.height())
        .map(|i| {
            VariantCounts(
                columns
                    .iter()
                    .map(|(count, sums)| {
                        let mean = match trials.get(i) {
                            Some(&n) if n > 0 => sums[i] as f64 / n as f64,
                            _ => 0.0,
                        };
                        VariantCount::new(count, sums[i], mean)
                    })
                    .collect(),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tack_trace::schema::col;

    #[test]
    fn counts_serialise_flat_by_column() {
        let mut counts = Counts::default();
        counts.set(col::STEPS, 4);
        counts.set(col::RETRIES, 1);
        counts.set(col::STEPS, 5);
        assert_eq!(counts.get(col::STEPS), 5);
        assert_eq!(counts.get("not_a_count"), 0);
        let json = serde_json::to_value(&counts).ok();
        assert_eq!(json, Some(serde_json::json!({"steps": 5, "retries": 1})));
    }

    #[test]
    fn variant_counts_show_means_and_sums_as_their_summary_says() {
        let mut counts = VariantCounts::zero();
        for c in &mut counts.0 {
            c.sum = 6;
            c.mean = 1.5;
        }
        let json = serde_json::to_value(&counts).ok().unwrap_or_default();
        assert_eq!(json["mean_steps"], 1.5);
        assert_eq!(json["retries"], 6);
        assert!(json.get("steps").is_none(), "steps is shown as a mean");
        assert!(json.get("tool_calls").is_none(), "per trial only");
        assert_eq!(counts.sum(col::STEPS), 6);
        assert_eq!(counts.mean(col::RETRIES), 1.5);
    }
}
