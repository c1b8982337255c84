//! Reading an Inspect AI log from disk: a `.eval` zip archive (Inspect's
//! default since 0.3.46) or a `.json` log (one JSON document). Samples are
//! read one at a time from archives, so a log of thousands of samples never
//! sits in memory whole.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;
use zip::result::ZipError;

use super::SampleError;
use crate::ImportError;

/// Bytes one entry of an `.eval` archive may inflate to: a sample of a
/// long agent run is tens of MiB. Parsed whole, JSON takes up to some
/// twenty times its text in memory (an array of small numbers), so this
/// bounds an import's memory near two gigabytes, not by the archive's few
/// kilobytes.
const ENTRY_LIMIT: u64 = 128 * 1024 * 1024;

/// An opened log: its header (`eval`, `plan`, `results`, `stats`) and a way
/// to its samples.
pub struct LogFile {
    pub path: PathBuf,
    pub header: Value,
    samples: Samples,
}

enum Samples {
    /// The archive and its sample entries (`samples/<id>_epoch_<n>.json`).
    Eval {
        archive: Box<zip::ZipArchive<BufReader<File>>>,
        names: Vec<String>,
    },
    Json(Vec<Value>),
}

impl std::fmt::Debug for LogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogFile")
            .field("path", &self.path)
            .field("samples", &self.sample_count())
            .finish()
    }
}

/// Why a file is not an Inspect AI log this import can read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("not a zip archive: {0}")]
    NotAnArchive(#[source] ZipError),
    #[error("an entry's name: {0}")]
    EntryName(#[source] ZipError),
    #[error("the archive has neither header.json nor _journal/start.json")]
    NoHeader,
    #[error("neither a zip archive nor JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error(
        "it has no `eval` object with `task` and `model`; pass a log Inspect wrote \
         (`inspect eval … --log-dir`, files ending in .eval or .json)"
    )]
    NoEval,
    #[error("{name}: {source}")]
    Entry { name: String, source: ZipError },
    #[error("{name}: {source}")]
    ReadEntry {
        name: String,
        source: std::io::Error,
    },
    #[error(
        "{name} inflates to more than {limit_mib} MiB, more than Inspect writes for one entry; \
         the archive may be crafted to exhaust memory"
    )]
    EntryTooLarge { name: String, limit_mib: u64 },
    #[error("{name} is not JSON: {source}")]
    EntryNotJson {
        name: String,
        source: serde_json::Error,
    },
}

fn not_a_log(path: &Path, source: LogError) -> ImportError {
    ImportError::NotALog {
        path: path.to_path_buf(),
        source,
    }
}

impl LogFile {
    /// Opens a log by its content, not its name: a zip archive is read as
    /// `.eval`, anything else as a JSON log.
    pub fn open(path: &Path) -> Result<LogFile, ImportError> {
        let io = |source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(io)?;
        let mut magic = [0u8; 4];
        let read = file.read(&mut magic).map_err(io)?;
        drop(file);
        if read == 4 && magic == *b"PK\x03\x04" {
            LogFile::open_eval(path)
        } else {
            LogFile::open_json(path)
        }
    }

    fn open_eval(path: &Path) -> Result<LogFile, ImportError> {
        let file = File::open(path).map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file))
            .map_err(|e| not_a_log(path, LogError::NotAnArchive(e)))?;
        let mut names = Vec::new();
        for name in archive.file_names() {
            let name = name.map_err(|e| not_a_log(path, LogError::EntryName(e)))?;
            if name.starts_with("samples/") && name.ends_with(".json") {
                names.push(name.into_owned());
            }
        }
        // `header.json` is written when the eval ends; an eval that crashed
        // or is still running has only the journal's start record.
        let entry =
            |archive: &mut _, name| read_entry(archive, name).map_err(|e| not_a_log(path, e));
        let header = match entry(&mut archive, "header.json")? {
            Some(header) => header,
            None => entry(&mut archive, "_journal/start.json")?
                .ok_or_else(|| not_a_log(path, LogError::NoHeader))?,
        };
        check_header(path, &header)?;
        Ok(LogFile {
            path: path.to_path_buf(),
            header,
            samples: Samples::Eval {
                archive: Box::new(archive),
                names,
            },
        })
    }

    fn open_json(path: &Path) -> Result<LogFile, ImportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut header: Value =
            serde_json::from_str(&text).map_err(|e| not_a_log(path, LogError::NotJson(e)))?;
        check_header(path, &header)?;
        let samples = match header.get_mut("samples").map(Value::take) {
            Some(Value::Array(samples)) => samples,
            _ => Vec::new(),
        };
        Ok(LogFile {
            path: path.to_path_buf(),
            header,
            samples: Samples::Json(samples),
        })
    }

    pub fn sample_count(&self) -> usize {
        match &self.samples {
            Samples::Eval { names, .. } => names.len(),
            Samples::Json(samples) => samples.len(),
        }
    }

    /// The `index`th sample, and where it came from (for messages). An
    /// entry that cannot be read is an error for that sample only.
    pub fn sample(&mut self, index: usize) -> (String, Result<Value, SampleError>) {
        match &mut self.samples {
            Samples::Eval { archive, names } => {
                let Some(name) = names.get(index).cloned() else {
                    return (format!("sample {index}"), Err(SampleError::Missing));
                };
                let result = match read_entry(archive, &name) {
                    Ok(Some(entry)) => Ok(entry),
                    Ok(None) => Err(SampleError::Vanished),
                    Err(error) => Err(SampleError::Entry(error)),
                };
                (name, result)
            }
            Samples::Json(samples) => {
                let where_ = format!("samples[{index}]");
                match samples.get_mut(index) {
                    Some(sample) => (where_, Ok(sample.take())),
                    None => (where_, Err(SampleError::Missing)),
                }
            }
        }
    }
}

/// A log has an `eval` object naming its task and model; without them it is
/// some other JSON file.
fn check_header(path: &Path, header: &Value) -> Result<(), ImportError> {
    let eval = header.get("eval");
    let has = |field| {
        eval.and_then(|e| e.get(field))
            .is_some_and(Value::is_string)
    };
    if has("task") && has("model") {
        Ok(())
    } else {
        Err(not_a_log(path, LogError::NoEval))
    }
}

fn read_entry(
    archive: &mut zip::ZipArchive<BufReader<File>>,
    name: &str,
) -> Result<Option<Value>, LogError> {
    read_entry_within(archive, name, ENTRY_LIMIT)
}

fn read_entry_within(
    archive: &mut zip::ZipArchive<BufReader<File>>,
    name: &str,
    limit: u64,
) -> Result<Option<Value>, LogError> {
    let entry = match archive.by_name(name) {
        Ok(entry) => entry,
        Err(ZipError::FileNotFound) => return Ok(None),
        Err(source) => {
            return Err(LogError::Entry {
                name: name.to_string(),
                source,
            });
        }
    };
    // The archive came from elsewhere: a few MiB can inflate to gigabytes.
    let mut text = String::new();
    entry
        .take(limit + 1)
        .read_to_string(&mut text)
        .map_err(|source| LogError::ReadEntry {
            name: name.to_string(),
            source,
        })?;
    if text.len() as u64 > limit {
        return Err(LogError::EntryTooLarge {
            name: name.to_string(),
            limit_mib: limit / (1024 * 1024),
        });
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| LogError::EntryNotJson {
            name: name.to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Write;

    /// A small archive whose entry inflates past the limit is refused by
    /// name, without reading it whole.
    #[test]
    fn an_entry_that_inflates_past_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.eval");
        let mut writer = zip::ZipWriter::new(File::create(&path).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        writer.start_file("header.json", options).unwrap();
        let padding = vec![b' '; 3 * 1024 * 1024];
        writer.write_all(&padding).unwrap();
        writer.write_all(b"{}").unwrap();
        writer.finish().unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < 64 * 1024);
        let mut archive = zip::ZipArchive::new(BufReader::new(File::open(&path).unwrap())).unwrap();
        let refused = read_entry_within(&mut archive, "header.json", 1024 * 1024).unwrap_err();
        assert!(
            refused.to_string().contains("inflates to more than 1 MiB"),
            "{refused}"
        );
        let read = read_entry_within(&mut archive, "header.json", 8 * 1024 * 1024).unwrap();
        assert_eq!(read, Some(serde_json::json!({})));
    }
}
