//! Which tasks two runs may be paired on. A task whose definition changed
//! between the runs, or that one side did not run, must not be left out
//! without saying so: a verdict over the tasks both ran would otherwise
//! pass a candidate that skipped most of the suite. A variant's
//! configuration matters only when the same variant is on both sides (two
//! differently named variants differ on purpose).

use std::collections::BTreeMap;

use tack_trace::{Manifest, drift};

/// The changed tasks and those one side did not run, when leaving them out
/// was not allowed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the runs did not run the same tasks, so these cannot be paired:\n{}\nRe-run both sides on \
     the same suite and tasks, or pass --allow-drift to compare the tasks both ran alike.",
    .tasks.iter().map(|(task, what)| format!("  task `{task}`: {what}")).collect::<Vec<_>>().join("\n")
)]
pub struct DriftError {
    /// Each task and what differs: what changed in it, or the side that
    /// alone ran it.
    pub tasks: Vec<(String, String)>,
}

/// What differs between two runs, for a comparison of `base_variant`
/// against `candidate_variant`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    /// Tasks left out of the pairing, with what differs in each.
    pub excluded: BTreeMap<String, String>,
    /// Every difference that matters (tasks, environment, the variant), as
    /// sentences for people.
    pub drift: Vec<String>,
}

/// How the two runs' tasks pair. Changed tasks, and tasks one side did not
/// run, are an error unless `allow_drift`, when they are left out (and
/// listed in `excluded`).
pub fn pairing(
    base: &Manifest,
    candidate: &Manifest,
    (base_variant, candidate_variant): (&str, &str),
    allow_drift: bool,
) -> Result<Pairing, DriftError> {
    let mut drift = drift(base, candidate);
    drift
        .variants
        .retain(|name, _| base_variant == candidate_variant && name == base_variant);
    let differing: Vec<(String, String)> = drift
        .tasks
        .iter()
        .map(|(task, what)| (task.clone(), what.to_string()))
        .collect();
    if !differing.is_empty() && !allow_drift {
        return Err(DriftError { tasks: differing });
    }
    Ok(Pairing {
        excluded: differing.into_iter().collect(),
        drift: drift.describe(),
    })
}
