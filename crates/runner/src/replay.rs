//! `tack replay`: re-run one recorded trial's tool side with the model's
//! recorded answers, in a fresh workspace and a new trace.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tack_trace::{Manifest, recorded_answers, trial_identity};

use crate::{RunError, RunPlan, new_run_id};

/// A plan that replays `trial_id` of the run in `run_dir`, and a warning when
/// the suite has changed since the run was recorded.
pub fn replay_plan(
    run_dir: &Path,
    trial_id: &str,
    traces_root: PathBuf,
    command_line: Vec<String>,
) -> Result<(RunPlan, Option<String>), RunError> {
    let manifest = Manifest::read(run_dir)?;
    let (variant, task) = trial_identity(run_dir, trial_id)?;
    let answers = recorded_answers(run_dir, trial_id)?;
    let suite_path = manifest.suite_dir(run_dir)?;
    let suite = tack_suite::load_suite(&suite_path)?;
    let hash = tack_suite::content_hash(&suite.root)?;
    let warning = (hash != manifest.suite.content_hash).then(|| {
        format!(
            "the suite at {} has changed since the run was recorded (content hash {} then, {} now); the replay uses it as it is now",
            suite_path.display(),
            short(&manifest.suite.content_hash),
            short(&hash)
        )
    });
    let plan = RunPlan {
        run_id: new_run_id(&format!("replay-{}", suite.name)),
        variants: vec![variant],
        tasks: vec![task],
        trials_per_task: 1,
        jobs: 1,
        seed: manifest.seed,
        traces_root,
        command_line,
        keep_failed_workspaces: false,
        replay: Some(Arc::new(answers)),
        hidden: Vec::new(),
        interactive: None,
        shard: None,
        infra_retries: 0,
        resume: false,
        rerun: Default::default(),
        images: Default::default(),
        visible_within: None,
        suite,
    };
    Ok((plan, warning))
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
