//! A run named on the command line: found by path or by id under a traces
//! directory, and made whole before its tables are read.

use std::path::{Path, PathBuf};

use crate::exit::{Classify, CommandError, Failure};
use crate::out::errln;

/// RUN as a path holding a manifest, else as a run id under `traces`.
pub(crate) fn resolve_run(run: &str, traces: &Path) -> Result<PathBuf, CommandError> {
    tack_trace::find_run(run, traces).or_fail(Failure::Usage)
}

/// `traces/<id>` as given, `<id>` under the traces directory, or a run's
/// URL (or `<id>` under a traces URL), fetched into the cache.
pub(crate) async fn resolve(run: &Path, traces: &Path) -> Result<PathBuf, CommandError> {
    use tack_store::Location;
    let run = match crate::store_arg::location(run)? {
        Location::Remote(url) => return crate::store_arg::fetch(&url).await,
        Location::Local(run) => run,
    };
    if run.join("manifest.json").is_file() {
        return Ok(run);
    }
    let id = run.to_str().filter(|id| !id.contains('/'));
    match (crate::store_arg::location(traces)?, id) {
        (Location::Remote(prefix), Some(id)) => crate::store_arg::fetch(&prefix.join(id)).await,
        // As every command that takes a run: found, or the runs there listed.
        (Location::Local(traces), _) => resolve_run(&run.to_string_lossy(), &traces),
        (Location::Remote(prefix), None) => Err(crate::exit::usage(format!(
            "{} is not a run: expected traces/<run-id>/ with a manifest.json, or a run id \
             under {prefix}",
            run.display()
        ))),
    }
}

/// Before a run's tables are read (report, query, show, compare, gate):
/// the trials a killed run finished but had not yet stored are stored from
/// their journals, and a run still going is said to be, so that neither
/// kind is left out unsaid.
pub(crate) fn recover_run(run: &Path) -> Result<(), CommandError> {
    let writer = tack_trace::run_writer(run);
    if writer.is_live() {
        errln!(
            "note: {} is still in progress ({writer}); what follows covers the trials it has stored so far",
            run.display()
        );
        return Ok(());
    }
    let recovered = tack_trace::recover_journals(run).or_fail(Failure::Internal)?;
    if recovered > 0 {
        errln!(
            "recovered {} of {} from their journals",
            tack_protocol::count(recovered, "interrupted trial"),
            run.display()
        );
    }
    Ok(())
}
