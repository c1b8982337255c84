//! The file tools see the workspace exactly as the sandbox lets `bash` see
//! it: paths are resolved beneath the workspace by the kernel (`openat2`
//! with `RESOLVE_BENEATH`), `.git` and the other read-only paths cannot be
//! written, hidden paths cannot be read, and hard links are not written
//! through. A refusal is a sandbox denial the model can read.

use tack_protocol::{ToolAccess, ToolErrorKind};
use tack_sandbox::{FileAccessError, WorkspaceFiles};

use super::{ToolContext, ToolError};

/// The call's view of the workspace, under the trial's confinement.
pub(crate) fn workspace_files(ctx: &ToolContext) -> Result<WorkspaceFiles, ToolError> {
    WorkspaceFiles::held(&ctx.held_workspace, &ctx.workspace, &ctx.confinement).map_err(file_error)
}

/// What a tool that searches under an optional `path` (default: the
/// workspace) reads, for the permission engine.
pub(crate) fn searched_dir_access(arguments: &serde_json::Value) -> Vec<ToolAccess> {
    let path = super::string_argument(arguments, "path").unwrap_or(".");
    vec![ToolAccess::Read(path.to_string())]
}

/// The workspace's files and the directory a search starts at: `path`, or
/// the workspace itself.
pub(crate) fn search_root(
    ctx: &ToolContext,
    path: Option<&str>,
) -> Result<(WorkspaceFiles, std::path::PathBuf), ToolError> {
    let files = workspace_files(ctx)?;
    let target = files
        .resolve_for_read(path.unwrap_or("."))
        .map_err(file_error)?;
    Ok((files, target))
}

/// A refusal becomes a `sandbox_denied` error, anything else a failure.
pub(crate) fn file_error(error: FileAccessError) -> ToolError {
    let kind = if error.is_denied() {
        ToolErrorKind::SandboxDenied
    } else {
        ToolErrorKind::ExecutionFailed
    };
    ToolError::new(kind, error.to_string())
}
