//! MCP servers' tools for the harness. Each `[[harness.mcp_servers]]` entry
//! is connected when the harness is assembled — a stdio server started
//! inside the trial's sandbox, or a streamable-HTTP endpoint — and its tools
//! are offered as `<server>__<tool>`, with their input schemas, checked by
//! the dispatcher like a built-in tool's. Their annotations become
//! [`ToolHint`](tack_protocol::ToolHint)s for the permission engine.
//!
//! It must not depend on `tack-suite`, `tack-runner` or `tack-trace`: it adds
//! tools to the agent, under the agent's confinement.
//!
//! A server that crashes, hangs or answers garbage costs the call in flight
//! a tool error, never the trial: the connection is dropped (a stdio
//! server's whole process group killed) and made again for the next call.

mod content;
mod launch;
mod mcp_json;
mod server;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;

use tack_agent::Tool;
use tack_protocol::McpServerConfig;
use tack_sandbox::Confinement;

pub use mcp_json::{McpJsonError, read_mcp_json};
pub use server::McpServer;
pub use tool::McpTool;

/// Past this many tools across a harness's servers, tools are offered by
/// name and description only, and a tool's schema is shown on first use:
/// a hundred schemas would fill the context before the task is read.
pub const LAZY_SCHEMAS_OVER: usize = 40;

/// Where a trial's servers run.
#[derive(Debug, Clone)]
pub struct McpSetup {
    /// The trial's workspace: `${WORKSPACE}` in a server's arguments and
    /// environment, and a stdio server's working directory.
    pub workspace: PathBuf,
    /// Where a relative `command` (`./servers/db.py`) is found: the suite.
    pub base_dir: PathBuf,
    /// The trial's variables, under a server's own.
    pub env: Vec<(String, String)>,
    /// How stdio servers are confined: the agent's own sandbox.
    pub confinement: Arc<Confinement>,
}

/// Why a server could not be used. Each names the server and what to do.
/// An underlying error is held in `error`, not as `source()`: the message
/// says it already, and the CLI prints an error's sources after its
/// message, which would say it twice.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(
        "mcp server `{server}`: could not start `{command}`: {error}; check `command` and `args` (the program must be installed and on the trial's PATH, or relative to the suite)"
    )]
    Start {
        server: String,
        command: String,
        error: StartError,
    },
    #[error(
        "mcp server `{server}`: no answer to the MCP handshake within {secs} s; raise `startup_timeout_secs` if it is slow to start"
    )]
    StartupTimeout { server: String, secs: u64 },
    #[error("mcp server `{server}`: the MCP handshake failed: {error}{stderr}")]
    Handshake {
        server: String,
        /// Boxed: rmcp's error holds a whole JSON-RPC message.
        error: Box<rmcp::service::ClientInitializeError>,
        /// What a stdio server printed on stderr, when it said anything.
        stderr: String,
    },
    #[error("mcp server `{server}`: listing its tools failed: {error}")]
    ListTools {
        server: String,
        error: rmcp::ServiceError,
    },
    #[error("mcp server `{server}`: {message}")]
    Config { server: String, message: String },
    #[error(
        "mcp server `{server}`: header `{header}` uses ${{{variable}}}, which is not set in tack's environment; set it, or change the header"
    )]
    UnsetVariable {
        server: String,
        header: String,
        variable: String,
        error: std::env::VarError,
    },
    #[error("mcp server `{server}`: header name `{header}`: {error}")]
    HeaderName {
        server: String,
        header: String,
        error: reqwest::header::InvalidHeaderName,
    },
    #[error("mcp server `{server}`: header `{header}`: {error}")]
    HeaderValue {
        server: String,
        header: String,
        error: reqwest::header::InvalidHeaderValue,
    },
    #[error("mcp server `{server}`: cannot build an HTTP client: {error}")]
    HttpClient {
        server: String,
        error: reqwest::Error,
    },
}

/// Why a stdio server's process did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Sandbox(#[from] tack_sandbox::SandboxError),
    #[error("its pipes were not set up")]
    NoPipes,
}

/// The connected servers of one harness.
#[derive(Debug, Default)]
pub struct McpServers {
    servers: Vec<Arc<McpServer>>,
    tools: Vec<Arc<McpTool>>,
}

impl McpServers {
    /// Connects every server and lists its tools. Any server that cannot be
    /// reached fails the whole harness: a variant that names a server is
    /// not the same variant without it.
    pub async fn connect(
        configs: &[McpServerConfig],
        setup: &McpSetup,
    ) -> Result<McpServers, McpError> {
        let mut servers = Vec::with_capacity(configs.len());
        let mut listed = Vec::new();
        for config in configs {
            let (server, tools) = McpServer::connect(config.clone(), setup.clone()).await?;
            let server = Arc::new(server);
            listed.extend(tools.into_iter().map(|t| (Arc::clone(&server), t)));
            servers.push(server);
        }
        let lazy = listed.len() > LAZY_SCHEMAS_OVER;
        let tools: Vec<Arc<McpTool>> = listed
            .into_iter()
            .map(|(server, listed)| Arc::new(McpTool::new(server, listed, lazy)))
            .collect();
        for (i, tool) in tools.iter().enumerate() {
            if let Some(first) = tools[..i].iter().find(|t| t.name() == tool.name()) {
                return Err(McpError::Config {
                    server: tool.server_name().to_string(),
                    message: format!(
                        "its tool `{}` and `{}` both become `{}` for the model (names keep only letters, digits, `_` and `-`); offer one of them with `tools = [...]`",
                        first.remote_name(),
                        tool.remote_name(),
                        tool.name()
                    ),
                });
            }
        }
        Ok(McpServers { servers, tools })
    }

    /// The tools to offer, server by server, in the order each lists them.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|tool| Arc::clone(tool) as Arc<dyn Tool>)
            .collect()
    }

    /// Ends every stdio server's processes before the checks
    /// ([`McpServer::stop`]).
    pub async fn stop(&self) {
        for server in &self.servers {
            server.stop().await;
        }
    }

    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}
