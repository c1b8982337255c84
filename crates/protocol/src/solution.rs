use serde::{Deserialize, Serialize};

/// A text replacement in one file: `old` must occur exactly once in `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub path: String,
    pub old: String,
    pub new: String,
}

/// How a task is solved: edits, a shell script run in the workspace, or both
/// (edits first). The oracle model applies it through the harness's tools; the
/// simulated agent uses it as the fix it finds when it is skilful enough, and
/// `decoys` as the plausible wrong fixes it makes otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Solution {
    #[serde(default)]
    pub edits: Vec<Edit>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub decoys: Vec<Edit>,
    /// An absolute path (`/solution`) where the script sees the task's
    /// `solution/` directory, read-only: while it runs, and to the oracle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_at: Option<String>,
}
