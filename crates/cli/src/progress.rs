//! How a run's progress is shown while it runs: a bar on a terminal, a line
//! per trial in a log, nothing under `--json` (whose stdout is the result).

use std::io::IsTerminal;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use tack_protocol::count;
use tack_runner::Progress;

use crate::out::errln;

/// A progress bar on a terminal; one line per trial otherwise (CI logs);
/// nothing with --json.
pub(crate) struct ProgressReporter {
    bar: Option<ProgressBar>,
    lines: bool,
}

pub(crate) fn progress_reporter(json: bool) -> ProgressReporter {
    let terminal = std::io::stderr().is_terminal();
    let bar = (!json && terminal).then(|| {
        let bar = ProgressBar::new(0);
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar
    });
    ProgressReporter {
        bar,
        lines: !json && !terminal,
    }
}

impl ProgressReporter {
    pub(crate) fn callback(&self) -> tack_runner::ProgressFn {
        let bar = self.bar.clone();
        let lines = self.lines;
        Arc::new(move |event| match event {
            Progress::Started {
                run_id,
                total,
                run_dir,
            } => {
                if let Some(bar) = &bar {
                    bar.set_length(total as u64);
                    bar.set_message(run_id);
                } else if lines && total > 0 {
                    errln!(
                        "running {}; traces in {}",
                        count(total, "trial"),
                        run_dir.display()
                    );
                }
            }
            Progress::TrialFinished {
                summary,
                done,
                total,
            } => {
                if let Some(bar) = &bar {
                    bar.set_position(done as u64);
                    bar.set_message(format!("{} {}", summary.trial_id, summary.outcome));
                } else if lines {
                    errln!(
                        "[{done}/{total}] {} {} ({})",
                        summary.trial_id,
                        summary.outcome,
                        count(summary.totals.steps, "step")
                    );
                }
                if let Some(path) = &summary.kept_workspace {
                    let line =
                        format!("kept workspace of {}: {}", summary.trial_id, path.display());
                    match &bar {
                        Some(bar) => bar.println(tack_protocol::printable(&line)),
                        None if lines => errln!("{line}"),
                        None => {}
                    }
                }
            }
            // Installing a task's tools can take minutes: always said, even
            // under --json (on stderr).
            // A build log's tail is the task's text: shown, not obeyed,
            // on the bar as by errln.
            Progress::Preparing { message } => match &bar {
                Some(bar) => bar.println(tack_protocol::printable(&message)),
                None => errln!("{message}"),
            },
        })
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
