//! `--mcp-config FILE` for `tack exec` and `tack chat`: MCP servers in the
//! `.mcp.json` format other agents read (Claude Code, Cursor), read by
//! tack-mcp.

use std::path::PathBuf;

use clap::Args;
use tack_mcp::McpJsonError;
use tack_protocol::McpServerConfig;

use crate::exit::{CommandError, usage};

#[derive(Debug, Clone, Args)]
pub struct McpFlags {
    /// MCP servers whose tools the agent gets as <server>__<tool>: a `.mcp.json` file
    /// ({"mcpServers": {"fs": {"command": "mcp-server-filesystem", "args": ["${WORKSPACE}"]},
    /// "remote": {"type": "http", "url": "https://…/mcp"}}}). Stdio servers run inside the
    /// sandbox. Repeat for several files.
    #[arg(long = "mcp-config", value_name = "FILE")]
    mcp_config: Vec<PathBuf>,
}

impl McpFlags {
    /// Whether any file was given.
    pub fn given(&self) -> bool {
        !self.mcp_config.is_empty()
    }

    /// Every server of every file, checked as a suite's would be.
    pub fn servers(&self) -> Result<Vec<McpServerConfig>, CommandError> {
        tack_mcp::read_mcp_json(&self.mcp_config).map_err(|error| match error {
            McpJsonError::NamedTwice { .. } => usage(error.to_string()),
            other => usage(format!("--mcp-config {other}")),
        })
    }
}
