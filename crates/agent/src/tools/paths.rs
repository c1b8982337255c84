//! The file tools see the workspace exactly as the sandbox lets `bash` see
//! it: paths are resolved beneath the workspace by the kernel (`openat2`
//! with `RESOLVE_BENEATH`), `.git` and the other read-only paths cannot be
//! written, hidden paths cannot be read, and hard links are not written
//! through. A refusal is a sandbox denial the model can read.

use tack_protocol::ToolErrorKind;
use tack_sandbox::{FileAccessError, WorkspaceFiles};

use super::{ToolContext, ToolError};

/// The call's view of the workspace, under the trial's confinement.
pub(crate) fn workspace_files(ctx: &ToolContext) -> Result<WorkspaceFiles, ToolError> {
    WorkspaceFiles::new(&ctx.workspace, &ctx.confinement).map_err(file_error)
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
