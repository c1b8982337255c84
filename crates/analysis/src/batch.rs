//! Columns of an Arrow record batch read as plain vectors, as [`Frame`]
//! reads a Polars frame: for rows tack-trace found without Polars (a few
//! trials' spans, located by the page index rather than decoded whole).
//!
//! A column a file does not have reads as nulls when it may be null (files
//! written before it was added), and is an error when it may not.
//!
//! [`Frame`]: crate::frame::Frame

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::AnalysisError;

/// A batch read from one file of a table, for error messages.
pub(crate) struct BatchColumns<'a> {
    batch: &'a RecordBatch,
    path: &'a Path,
    table: &'static str,
}

impl<'a> BatchColumns<'a> {
    pub(crate) fn new(batch: &'a RecordBatch, path: &'a Path, table: &'static str) -> Self {
        BatchColumns { batch, path, table }
    }

    pub(crate) fn height(&self) -> usize {
        self.batch.num_rows()
    }

    fn error(&self, column: &str, problem: impl std::fmt::Display) -> AnalysisError {
        AnalysisError::Column {
            dir: self.path.to_path_buf(),
            table: self.table,
            column: column.to_string(),
            problem: problem.to_string(),
        }
    }

    fn column(&self, name: &str) -> Option<&'a ArrayRef> {
        self.batch.column_by_name(name)
    }

    /// Integers of any width and sign, widened; absent: every row null.
    fn integers(&self, name: &str) -> Result<Vec<Option<i128>>, AnalysisError> {
        let Some(array) = self.column(name) else {
            return Ok(vec![None; self.height()]);
        };
        integers_of(array).ok_or_else(|| {
            self.error(
                name,
                format!("is {}, not a whole number", array.data_type()),
            )
        })
    }

    fn narrowed<T: TryFrom<i128>>(&self, name: &str) -> Result<Vec<Option<T>>, AnalysisError> {
        self.integers(name)?
            .into_iter()
            .map(|v| {
                v.map(T::try_from)
                    .transpose()
                    .map_err(|_| self.error(name, "holds a value out of range"))
            })
            .collect()
    }

    pub(crate) fn opt_u64s(&self, name: &str) -> Result<Vec<Option<u64>>, AnalysisError> {
        self.narrowed(name)
    }

    pub(crate) fn opt_u32s(&self, name: &str) -> Result<Vec<Option<u32>>, AnalysisError> {
        self.narrowed(name)
    }

    pub(crate) fn opt_i64s(&self, name: &str) -> Result<Vec<Option<i64>>, AnalysisError> {
        self.narrowed(name)
    }

    pub(crate) fn opt_f64s(&self, name: &str) -> Result<Vec<Option<f64>>, AnalysisError> {
        let Some(array) = self.column(name) else {
            return Ok(vec![None; self.height()]);
        };
        if let Some(values) = array.as_primitive_opt::<Float64Type>() {
            return Ok(values.iter().collect());
        }
        if let Some(values) = array.as_primitive_opt::<Float32Type>() {
            return Ok(values.iter().map(|v| v.map(f64::from)).collect());
        }
        if array.data_type() == &DataType::Null {
            return Ok(vec![None; array.len()]);
        }
        Ok(self
            .integers(name)?
            .into_iter()
            .map(|v| v.map(|v| v as f64))
            .collect())
    }

    pub(crate) fn opt_bools(&self, name: &str) -> Result<Vec<Option<bool>>, AnalysisError> {
        let Some(array) = self.column(name) else {
            return Ok(vec![None; self.height()]);
        };
        if array.data_type() == &DataType::Null {
            return Ok(vec![None; array.len()]);
        }
        let values = array
            .as_boolean_opt()
            .ok_or_else(|| self.error(name, format!("is {}, not true/false", array.data_type())))?;
        Ok(values.iter().collect())
    }

    pub(crate) fn opt_strs(&self, name: &str) -> Result<Vec<Option<String>>, AnalysisError> {
        let Some(array) = self.column(name) else {
            return Ok(vec![None; self.height()]);
        };
        texts_of(array)
            .ok_or_else(|| self.error(name, format!("is {}, not text", array.data_type())))
    }

    /// A column of lists of text (a model call's message ids).
    pub(crate) fn opt_str_lists(
        &self,
        name: &str,
    ) -> Result<Vec<Option<Vec<String>>>, AnalysisError> {
        let Some(array) = self.column(name) else {
            return Ok(vec![None; self.height()]);
        };
        let not_lists = || self.error(name, format!("is {}, not lists of text", array.data_type()));
        if array.data_type() == &DataType::Null {
            return Ok(vec![None; array.len()]);
        }
        let lists = array.as_list_opt::<i32>().ok_or_else(not_lists)?;
        let mut out = Vec::with_capacity(lists.len());
        for list in lists.iter() {
            out.push(match list {
                None => None,
                Some(items) => Some(
                    texts_of(&items)
                        .ok_or_else(not_lists)?
                        .into_iter()
                        .map(Option::unwrap_or_default)
                        .collect(),
                ),
            });
        }
        Ok(out)
    }

    pub(crate) fn strs(&self, name: &str) -> Result<Vec<String>, AnalysisError> {
        self.required(name, self.opt_strs(name)?)
    }

    pub(crate) fn u64s(&self, name: &str) -> Result<Vec<u64>, AnalysisError> {
        self.required(name, self.opt_u64s(name)?)
    }

    pub(crate) fn u32s(&self, name: &str) -> Result<Vec<u32>, AnalysisError> {
        self.required(name, self.opt_u32s(name)?)
    }

    pub(crate) fn i64s(&self, name: &str) -> Result<Vec<i64>, AnalysisError> {
        self.required(name, self.opt_i64s(name)?)
    }

    fn required<T>(&self, name: &str, values: Vec<Option<T>>) -> Result<Vec<T>, AnalysisError> {
        if self.column(name).is_none() {
            return Err(self.error(name, "is missing"));
        }
        values
            .into_iter()
            .collect::<Option<Vec<T>>>()
            .ok_or_else(|| self.error(name, "has nulls where the schema allows none"))
    }
}

fn integers_of(array: &ArrayRef) -> Option<Vec<Option<i128>>> {
    fn widen<T: arrow_array::types::ArrowPrimitiveType>(
        array: &ArrayRef,
    ) -> Option<Vec<Option<i128>>>
    where
        T::Native: Into<i128>,
    {
        let values = array.as_primitive_opt::<T>()?;
        Some(values.iter().map(|v| v.map(Into::into)).collect())
    }
    match array.data_type() {
        DataType::Null => Some(vec![None; array.len()]),
        DataType::Int8 => widen::<Int8Type>(array),
        DataType::Int16 => widen::<Int16Type>(array),
        DataType::Int32 => widen::<Int32Type>(array),
        DataType::Int64 => widen::<Int64Type>(array),
        DataType::UInt8 => widen::<UInt8Type>(array),
        DataType::UInt16 => widen::<UInt16Type>(array),
        DataType::UInt32 => widen::<UInt32Type>(array),
        DataType::UInt64 => widen::<UInt64Type>(array),
        _ => None,
    }
}

fn texts_of(array: &ArrayRef) -> Option<Vec<Option<String>>> {
    let owned = |v: Option<&str>| v.map(str::to_owned);
    match array.data_type() {
        DataType::Null => Some(vec![None; array.len()]),
        DataType::Utf8 => Some(array.as_string::<i32>().iter().map(owned).collect()),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().iter().map(owned).collect()),
        DataType::Utf8View => Some(array.as_string_view().iter().map(owned).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StringArray, UInt32Array};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "n",
                Arc::new(UInt32Array::from(vec![Some(1), None])) as ArrayRef,
            ),
            (
                "code",
                Arc::new(Int32Array::from(vec![Some(-1), Some(7)])) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![Some("a"), None])) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    #[test]
    fn columns_read_widened_and_absent_ones_read_as_nulls() {
        let batch = batch();
        let columns = BatchColumns::new(&batch, Path::new("spans/part.parquet"), "spans");
        assert_eq!(columns.opt_u64s("n").unwrap(), vec![Some(1), None]);
        assert_eq!(columns.opt_i64s("code").unwrap(), vec![Some(-1), Some(7)]);
        assert_eq!(
            columns.opt_strs("s").unwrap(),
            vec![Some("a".to_string()), None]
        );
        assert_eq!(columns.opt_strs("added_later").unwrap(), vec![None, None]);
        assert_eq!(columns.opt_str_lists("ids").unwrap(), vec![None, None]);
    }

    #[test]
    fn a_missing_or_null_required_column_and_a_wrong_type_are_errors_naming_it() {
        let batch = batch();
        let columns = BatchColumns::new(&batch, Path::new("spans/part.parquet"), "spans");
        let message = |e: AnalysisError| e.to_string();
        assert!(message(columns.u64s("n").unwrap_err()).contains("`n`"));
        assert!(message(columns.strs("kind").unwrap_err()).contains("is missing"));
        assert!(message(columns.opt_u32s("code").unwrap_err()).contains("out of range"));
        assert!(message(columns.opt_strs("n").unwrap_err()).contains("not text"));
    }
}
