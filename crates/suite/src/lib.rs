//! Task suites: the TOML format (`suites/README.md`), loading with errors
//! that name the file and field, fresh per-trial workspaces, hidden checks,
//! and `suite check`, which proves every task's checks fail untouched and
//! pass with the reference solution.
//!
//! It must not depend on `tack-agent`, `tack-harness`, `tack-runner` or
//! `tack-trace`: a suite is data and the commands that check it.

mod checks;
mod confine;
mod container;
mod copy;
mod error;
mod format;
mod git_dirs;
mod hash;
mod health;
mod images;
mod load;
mod provision;
mod reward;
mod soundness;
mod summary;
mod tamper;
mod walls;
mod workspace;

pub use checks::{run_check_commands, run_checks};
pub use confine::{CommandSandbox, checks_root, workspaces_root};
pub use copy::copy_tree;
pub use error::SuiteError;
pub use format::{
    Check, DEFAULT_PROTECTED, Environment, ExternalAgent, Healthcheck, Limits, Place,
    ProviderSettings, Requirement, Service, ServiceWait, Suite, Task, Variant, Volume,
};
pub use hash::{TaskHashes, content_hash, json_hash, task_hashes};
pub use images::{
    IMAGE_STAND_INS_AT, ImageOptions, ImageState, ImagesError, ServiceImage, TaskImage,
    image_cache, prepare_images, user_image_map,
};
pub use load::EditError;
pub use load::load_suite;
pub use provision::{
    ProvisionError, ProvisionNote, provision_suite, requirement_name, tool_env_root,
};
pub use soundness::{TaskSoundness, check_suite, check_task};
pub use summary::{SoundnessTally, network_needs, soundness_text, suite_text};
pub use tamper::{Fingerprint, Protected, ProtectedError, TamperWatch};
pub use walls::{TaskWalls, Viewer};
pub use workspace::{TrialWorkspace, apply_solution};
