//! What the viewer holds between requests: the roots it looks under, its
//! templates, and each run's opened tables (kept while the run's files
//! stay as they were, so a page of a million-trial run does not scan its
//! parts' footers again).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use minijinja::Environment;
use tack_analysis::{RunTables, VariantSummary};
use tack_report::Pages;

use crate::ViewError;
use crate::compare::Compared;
use crate::runs::{self, FoundRun};

/// The viewer's frame around every page: its style sheet linked (no inline
/// style or script is allowed), its navigation.
const BASE: &str = include_str!("../templates/base.html");

const TEMPLATES: [(&str, &str); 6] = [
    ("base.html", BASE),
    ("runs.html", include_str!("../templates/runs.html")),
    ("trials.html", include_str!("../templates/trials.html")),
    ("pick.html", include_str!("../templates/pick.html")),
    ("tasks.html", include_str!("../templates/tasks.html")),
    ("task.html", include_str!("../templates/task.html")),
];

/// The viewer's own rules, after the reports' style sheet.
pub(crate) const STYLE: &str = include_str!("../templates/view.css");

/// How the viewer was started.
#[derive(Debug, Clone)]
pub struct ViewerOptions {
    /// Traces directories, or run directories, to find runs under.
    pub roots: Vec<PathBuf>,
    /// The access token every request must carry (see [`crate::access_token`]).
    pub token: String,
    /// Seconds between reloads of the runs list (it shows running runs'
    /// progress and runs that appear); 0 for never.
    pub refresh_secs: u32,
}

/// The viewer's state, shared by every connection.
#[derive(Debug)]
pub struct Viewer {
    pub(crate) options: ViewerOptions,
    pub(crate) env: Environment<'static>,
    pub(crate) pages: Pages,
    opened: Mutex<HashMap<PathBuf, Opened>>,
    compared: Mutex<Vec<KeptComparison>>,
}

/// A comparison (its two sides as the URL names them), kept while both
/// runs' tables are the ones it was computed from.
#[derive(Debug)]
struct KeptComparison {
    sides: (String, String),
    tables: [Arc<RunTables>; 2],
    compared: Arc<Compared>,
}

/// Comparisons kept at most; the oldest goes first.
const KEPT_COMPARISONS: usize = 16;

/// A run's tables as opened, while its files are as they were then.
#[derive(Debug, Clone)]
struct Opened {
    stamp: Stamp,
    tables: Arc<RunTables>,
    summaries: Option<Arc<Vec<VariantSummary>>>,
}

/// What changes when a run's recorded trials do: its manifest, and the
/// parts in its trials directory (a part is renamed in when written).
type Stamp = (Option<SystemTime>, Option<SystemTime>, usize);

impl Viewer {
    pub fn new(options: ViewerOptions) -> Result<Viewer, ViewError> {
        let env =
            tack_report::html_environment(&TEMPLATES).map_err(|source| ViewError::Render {
                what: "the viewer's templates",
                source,
            })?;
        let pages = Pages::with_base(BASE).map_err(|source| ViewError::Render {
            what: "the report's templates",
            source,
        })?;
        Ok(Viewer {
            options,
            env,
            pages,
            opened: Mutex::new(HashMap::new()),
            compared: Mutex::new(Vec::new()),
        })
    }

    /// Every run under the roots, newest first, found afresh.
    pub(crate) fn runs(&self) -> Vec<FoundRun> {
        runs::find(&self.options.roots)
    }

    /// The run with id `id`.
    pub(crate) fn run(&self, id: &str) -> Result<FoundRun, ViewError> {
        self.runs()
            .into_iter()
            .find(|run| run.manifest.run_id == id)
            .ok_or_else(|| ViewError::NoSuchRun {
                run: id.to_string(),
                roots: self.roots_text(),
            })
    }

    pub(crate) fn roots_text(&self) -> String {
        let roots: Vec<String> = self
            .options
            .roots
            .iter()
            .map(|root| root.display().to_string())
            .collect();
        roots.join(", ")
    }

    /// `dir`'s tables, opened again only when its files changed.
    pub(crate) fn tables(&self, dir: &Path) -> Result<Arc<RunTables>, ViewError> {
        let stamp = stamp(dir);
        if let Some(opened) = self.cached(dir).filter(|o| o.stamp == stamp) {
            return Ok(opened.tables);
        }
        let tables = RunTables::open(dir).map_err(|source| ViewError::Analysis {
            dir: dir.to_path_buf(),
            source,
        })?;
        let tables = Arc::new(tables);
        self.remember(
            dir,
            Opened {
                stamp,
                tables: tables.clone(),
                summaries: None,
            },
        );
        Ok(tables)
    }

    /// `dir`'s variant summaries (success rates, cost); `None` while it
    /// has no recorded trial.
    pub(crate) fn summaries(&self, dir: &Path) -> Result<Arc<Vec<VariantSummary>>, ViewError> {
        let tables = self.tables(dir)?;
        if let Some(summaries) = self.cached(dir).and_then(|o| o.summaries) {
            return Ok(summaries);
        }
        let summaries =
            tack_analysis::summarize_trials(&tables).map_err(|source| ViewError::Analysis {
                dir: dir.to_path_buf(),
                source,
            })?;
        let summaries = Arc::new(summaries);
        if let Ok(mut opened) = self.opened.lock()
            && let Some(entry) = opened.get_mut(dir)
            && Arc::ptr_eq(&entry.tables, &tables)
        {
            entry.summaries = Some(summaries.clone());
        }
        Ok(summaries)
    }

    /// The comparison of `sides` if it was made from these `tables`.
    pub(crate) fn kept_comparison(
        &self,
        sides: &(String, String),
        tables: &[Arc<RunTables>; 2],
    ) -> Option<Arc<Compared>> {
        let kept = self.compared.lock().ok()?;
        kept.iter()
            .find(|k| {
                &k.sides == sides && k.tables.iter().zip(tables).all(|(a, b)| Arc::ptr_eq(a, b))
            })
            .map(|k| k.compared.clone())
    }

    pub(crate) fn keep_comparison(
        &self,
        sides: (String, String),
        tables: [Arc<RunTables>; 2],
        compared: Arc<Compared>,
    ) {
        if let Ok(mut kept) = self.compared.lock() {
            kept.retain(|k| k.sides != sides);
            if kept.len() >= KEPT_COMPARISONS {
                kept.remove(0);
            }
            kept.push(KeptComparison {
                sides,
                tables,
                compared,
            });
        }
    }

    fn cached(&self, dir: &Path) -> Option<Opened> {
        self.opened.lock().ok()?.get(dir).cloned()
    }

    fn remember(&self, dir: &Path, opened: Opened) {
        if let Ok(mut map) = self.opened.lock() {
            map.insert(dir.to_path_buf(), opened);
        }
    }
}

fn stamp(dir: &Path) -> Stamp {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let trials = dir.join(tack_trace::schema::TRIALS_DIR);
    let parts = std::fs::read_dir(&trials).map_or(0, |entries| entries.count());
    (
        modified(&dir.join("manifest.json")),
        modified(&trials),
        parts,
    )
}
