//! Inspect AI logs (`.eval` archives and `.json` logs) as tack runs.
//!
//! One log (one task evaluated on one model) becomes one run under
//! `OUT/<run-id>/`: the variant is named after the model, each dataset
//! sample is a task, each epoch a trial index. The run id is derived from
//! the log (its creation time, task and eval id), so importing a log twice
//! finds the first import instead of making a copy.

mod archive;
mod sample;
mod score;
mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tack_protocol::{Event, Usage};
use tack_trace::{Manifest, RunStatus, RunWriter, SuiteInfo, VariantInfo};

use crate::ImportError;
pub use archive::{LogError, LogFile};
pub use sample::{
    ConvertedSample, SampleError, TrialContext, convert as convert_sample, safe_name,
};
pub use score::passes;
use values::str_field;

/// What importing one log did.
#[derive(Debug, Clone, Serialize)]
pub struct LogImport {
    pub log: PathBuf,
    /// `None` when no sample could be converted (no run was written).
    pub run_dir: Option<PathBuf>,
    pub run_id: String,
    pub task: String,
    pub model: String,
    pub variant: String,
    pub trials: Vec<ImportedTrial>,
    pub skipped: Vec<SkippedSample>,
    /// Inspect event kinds with no tack counterpart, by kind, over all samples.
    pub ignored_events: BTreeMap<String, u64>,
    /// The log's `status`: `success` when Inspect finished the eval; else
    /// (`started`, `cancelled`, `error`) the run is marked interrupted.
    pub log_status: String,
    /// The log holds no sample at all (written with `--no-log-samples`, or
    /// before any sample finished): there is nothing to import.
    pub no_samples: bool,
}

/// One sample epoch that became a trial.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedTrial {
    pub trial_id: String,
    pub sample_id: String,
    pub epoch: u32,
    /// A `TrialOutcome::as_str()` value.
    pub outcome: String,
    pub model_calls: u32,
    pub tool_calls: u32,
    pub usage: Usage,
    /// Inspect's own count for the sample; it differs from `usage` when
    /// model calls were made where the import does not look (inside a tool
    /// event's nested events).
    pub inspect_usage: Usage,
}

/// A sample that did not become a trial, and why.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedSample {
    /// The archive entry or JSON path of the sample.
    pub sample: String,
    pub reason: String,
}

/// Imports one log into a new run under `out`. `command_line` is recorded
/// in the manifest, as for runs tack makes.
pub fn import_log(
    path: &Path,
    out: &Path,
    command_line: &[String],
) -> Result<LogImport, ImportError> {
    let mut log = LogFile::open(path)?;
    let eval = log.header.get("eval").cloned().unwrap_or(Value::Null);
    let task = str_field(&eval, "task").unwrap_or_default().to_string();
    let model = str_field(&eval, "model").unwrap_or_default().to_string();
    let run_id = run_id(&eval);
    let run_dir = out.join(&run_id);
    if run_dir.exists() {
        return Err(ImportError::AlreadyImported {
            log: path.to_path_buf(),
            run_dir,
        });
    }
    let context = TrialContext {
        run_id: run_id.clone(),
        variant: safe_name(&model.replace('/', "-")),
        model: model.clone(),
    };
    let log_status = str_field(&log.header, "status")
        .unwrap_or("unknown")
        .to_string();
    let mut import = LogImport {
        log_status,
        no_samples: log.sample_count() == 0,
        log: path.to_path_buf(),
        run_dir: None,
        run_id,
        task,
        model,
        variant: context.variant.clone(),
        trials: Vec::new(),
        skipped: Vec::new(),
        ignored_events: BTreeMap::new(),
    };
    let mut converted = Vec::new();
    for index in 0..log.sample_count() {
        let (name, sample) = log.sample(index);
        match sample.and_then(|sample| convert_sample(sample, &context)) {
            Ok(trial) => {
                import.trials.push(imported(&trial));
                for (kind, count) in &trial.ignored_events {
                    *import.ignored_events.entry(kind.clone()).or_default() += count;
                }
                converted.push(trial.events);
            }
            Err(reason) => import.skipped.push(SkippedSample {
                sample: name,
                reason: reason.to_string(),
            }),
        }
    }
    if converted.is_empty() {
        return Ok(import);
    }
    let mut manifest = manifest(&log, &import, command_line);
    let trace = |source| ImportError::Trace {
        log: path.to_path_buf(),
        source,
    };
    let writer = RunWriter::create(out, &manifest).map_err(trace)?;
    for events in converted {
        writer.record_trial(events).map_err(trace)?;
    }
    // A log Inspect did not finish holds the samples done so far.
    manifest.status = match import.log_status.as_str() {
        "success" => RunStatus::Finished,
        _ => RunStatus::Interrupted,
    };
    writer.close(&manifest).map_err(trace)?;
    import.run_dir = Some(writer.dir().to_path_buf());
    Ok(import)
}

fn imported(trial: &ConvertedSample) -> ImportedTrial {
    let mut summary = ImportedTrial {
        trial_id: String::new(),
        sample_id: trial.sample_id.clone(),
        epoch: trial.epoch,
        outcome: String::new(),
        model_calls: 0,
        tool_calls: 0,
        usage: Usage::default(),
        inspect_usage: trial.inspect_usage,
    };
    for event in &trial.events {
        match event {
            Event::TrialStarted(started) => summary.trial_id = started.trial_id.clone(),
            Event::ModelCall(_) => summary.model_calls += 1,
            Event::ToolCall(_) => summary.tool_calls += 1,
            Event::TrialFinished(finished) => {
                summary.outcome = finished.outcome.as_str().to_string();
                summary.usage = finished.totals.usage;
            }
            _ => {}
        }
    }
    summary
}

/// `<created>-inspect-<task>-<eval id>`: sorts with tack's own run ids
/// (which start with the time) and is the same on every import of a log.
fn run_id(eval: &Value) -> String {
    let created: String = str_field(eval, "created")
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .take(14)
        .collect();
    let stamp = match created.len() {
        14 => format!("{}-{}", &created[..8], &created[8..]),
        _ => "undated".to_string(),
    };
    let id = ["eval_id", "task_id", "run_id"]
        .iter()
        .find_map(|field| str_field(eval, field))
        .unwrap_or("log");
    let short: String = id.chars().take(8).collect();
    let task = str_field(eval, "task").unwrap_or("task");
    safe_name(&format!("{stamp}-inspect-{task}-{short}"))
}

fn manifest(log: &LogFile, import: &LogImport, command_line: &[String]) -> Manifest {
    let header = &log.header;
    let eval = header.get("eval").unwrap_or(&Value::Null);
    let mut tasks: Vec<String> = Vec::new();
    let mut epochs = 1;
    for trial in &import.trials {
        let task = safe_name(&trial.sample_id);
        if !tasks.contains(&task) {
            tasks.push(task);
        }
        epochs = epochs.max(trial.epoch);
    }
    let stats = header.get("stats").unwrap_or(&Value::Null);
    let started_at = str_field(stats, "started_at")
        .or_else(|| str_field(eval, "created"))
        .unwrap_or_default();
    let manifest = Manifest::start(
        import.run_id.clone(),
        SuiteInfo {
            name: import.task.clone(),
            path: log.path.display().to_string(),
            content_hash: String::new(),
        },
        vec![VariantInfo {
            name: import.variant.clone(),
            model: import.model.clone(),
            // mockllm answers from a script, like tack's built-in models.
            simulated: import.model.starts_with("mockllm/"),
            description: format!(
                "Inspect AI task {} on {}, imported from {}",
                import.task,
                import.model,
                log.path.display()
            ),
            config: serde_json::json!({
                "inspect": {
                    "log": log.path.display().to_string(),
                    "status": header.get("status"),
                    "eval": eval,
                    "plan": header.get("plan"),
                    "results": header.get("results"),
                }
            }),
        }],
        tasks,
    );
    Manifest {
        trials_per_task: epochs,
        command_line: command_line.to_vec(),
        started_at: started_at.to_string(),
        finished_at: str_field(stats, "completed_at").map(str::to_string),
        ..manifest
    }
}

#[cfg(test)]
mod tests;
