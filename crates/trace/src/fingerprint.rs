//! What a run's results depend on besides the harness: the content of each
//! task, the machine and toolchains it ran on, the tack build, and the
//! models that actually answered. Recorded in the manifest so that two runs
//! can be checked for drift ([`crate::drift`]) before their results are
//! paired.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use arrow_array::{Array, RecordBatch, StringArray};
use serde::{Deserialize, Serialize};

use crate::schema::{SPANS_DIR, TRIALS_DIR, col, kind};
use crate::{Columns, TraceError, read_table_files};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFingerprint {
    /// By task id, every task the run selected.
    pub tasks: BTreeMap<String, TaskFingerprint>,
    pub environment: EnvironmentFingerprint,
    /// By variant name, every variant the run selected.
    pub variants: BTreeMap<String, VariantFingerprint>,
}

impl RunFingerprint {
    /// Records, for each variant, the models [`answered_models`] found.
    pub fn record_models_answered(&mut self, answered: &BTreeMap<String, BTreeSet<String>>) {
        for (variant, fingerprint) in &mut self.variants {
            fingerprint.models_answered = answered
                .get(variant)
                .map(|models| models.iter().cloned().collect())
                .unwrap_or_default();
        }
    }
}

/// sha256 hashes of what defines a task, part by part.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFingerprint {
    /// `task.toml` as bytes: instruction, environment, limits, checks, solution.
    pub task_toml: String,
    /// The `[solution]` table of `task.toml` as parsed (canonical JSON).
    pub solution: String,
    /// Every file of `fixture/`, path and content.
    pub fixture: String,
    /// Every file of `checks/`; `None` when the task has none.
    #[serde(default)]
    pub checks: Option<String>,
    /// The whole task directory, files beside the ones above included.
    pub directory: String,
    /// The id of the task's container image (`sha256:…`), for a task that
    /// runs in one: the same Dockerfile can build another image (a base
    /// image moved on, a package updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The ids of the images of the task's services, by service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentFingerprint {
    /// The kernel's name (`uname -s`): `Linux`.
    pub os: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// `PRETTY_NAME` of `/etc/os-release`, when there is one.
    #[serde(default)]
    pub distribution: Option<String>,
    /// The commit tack was built from, `-dirty` when the tree had changes,
    /// `unknown` when built outside a git checkout.
    pub tack_commit: String,
    /// Each `[suite] fingerprint` command and its trimmed output, as run in
    /// the `strict` sandbox. A command that failed records why
    /// (`exit 127: …`, `error: …`) instead.
    #[serde(default)]
    pub toolchains: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantFingerprint {
    /// sha256 of the variant's configuration as canonical JSON, without its
    /// name and description: equal hashes mean identically configured
    /// variants, whatever they are called.
    pub config_hash: String,
    /// The distinct `gen_ai_response_model` values of the variant's model
    /// calls, sorted; filled when the run ends.
    #[serde(default)]
    pub models_answered: Vec<String>,
}

/// The distinct models that answered each variant's model calls in a run's
/// finished trials (spans joined to trials by trial id). Variants whose
/// calls all failed before an answer are absent.
pub fn answered_models(run_dir: &Path) -> Result<BTreeMap<String, BTreeSet<String>>, TraceError> {
    let mut variant_of: BTreeMap<String, String> = BTreeMap::new();
    for (path, batch) in read_table_files(
        run_dir,
        TRIALS_DIR,
        Columns::Only(&[col::TRIAL_ID, col::VARIANT]),
    )? {
        let trials = text(&path, &batch, col::TRIAL_ID)?;
        let variants = text(&path, &batch, col::VARIANT)?;
        for i in 0..batch.num_rows() {
            variant_of.insert(trials.value(i).to_string(), variants.value(i).to_string());
        }
    }
    let mut answered: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let columns = [col::TRIAL_ID, col::KIND, col::RESPONSE_MODEL];
    for (path, batch) in read_table_files(run_dir, SPANS_DIR, Columns::Only(&columns))? {
        let trials = text(&path, &batch, col::TRIAL_ID)?;
        let kinds = text(&path, &batch, col::KIND)?;
        let models = text(&path, &batch, col::RESPONSE_MODEL)?;
        for i in 0..batch.num_rows() {
            if kinds.value(i) != kind::MODEL_CALL || models.is_null(i) || models.value(i).is_empty()
            {
                continue;
            }
            if let Some(variant) = variant_of.get(trials.value(i)) {
                answered
                    .entry(variant.clone())
                    .or_default()
                    .insert(models.value(i).to_string());
            }
        }
    }
    Ok(answered)
}

fn text<'b>(
    path: &Path,
    batch: &'b RecordBatch,
    name: &str,
) -> Result<&'b StringArray, TraceError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| TraceError::Format {
            path: path.to_path_buf(),
            message: format!("column {name} is missing or not text"),
        })
}
