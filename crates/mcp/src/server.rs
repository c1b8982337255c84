//! One server's connection: made when the harness is assembled, and again
//! after the server died, hung or broke the protocol.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, Tool as ListedTool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{Peer, ServiceExt};
use tack_agent::ToolError;
use tack_protocol::{McpServerConfig, McpTransport, ToolErrorKind};
use tokio::sync::Mutex;

use crate::launch::{self, StderrTail, StdioProcess};
use crate::{McpError, McpSetup};

/// A connected server, or one to reconnect on its next call.
pub struct McpServer {
    config: McpServerConfig,
    setup: McpSetup,
    live: Mutex<Option<Live>>,
    /// Connections made after the first, but those after [`McpServer::stop`].
    restarts: AtomicU32,
    /// Stopped on purpose: the next connection is no restart.
    stopped: AtomicBool,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.config.name)
            .field("restarts", &self.restarts())
            .finish_non_exhaustive()
    }
}

struct Live {
    client: RunningService<RoleClient, ClientConfig>,
    /// A stdio server's process (killed with its group when dropped).
    process: Option<tack_sandbox::Service>,
    stderr: StderrTail,
    /// Which connection this is, so that a failed call drops only the one
    /// it was made on, not a fresh one another call already made.
    generation: u32,
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("tack", env!("CARGO_PKG_VERSION")),
    )
}

impl McpServer {
    /// Connects and lists the tools to offer.
    pub(crate) async fn connect(
        config: McpServerConfig,
        setup: McpSetup,
    ) -> Result<(McpServer, Vec<ListedTool>), McpError> {
        let live = start(&config, &setup, 0).await?;
        let listed = tokio::time::timeout(
            Duration::from_secs(config.startup_timeout_secs),
            live.client.peer().list_all_tools(),
        )
        .await
        .map_err(|_| McpError::StartupTimeout {
            server: config.name.clone(),
            secs: config.startup_timeout_secs,
        })?
        .map_err(|error| McpError::ListTools {
            server: config.name.clone(),
            error,
        })?;
        let offered = match &config.tools {
            None => listed,
            Some(wanted) => {
                if let Some(missing) = wanted
                    .iter()
                    .find(|w| !listed.iter().any(|t| t.name == **w))
                {
                    return Err(McpError::Config {
                        server: config.name.clone(),
                        message: format!(
                            "`tools` names `{missing}`, which the server does not have; it has: {}",
                            listed
                                .iter()
                                .map(|t| t.name.as_ref())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                }
                listed
                    .into_iter()
                    .filter(|t| wanted.iter().any(|w| *w == t.name))
                    .collect()
            }
        };
        let server = McpServer {
            config,
            setup,
            live: Mutex::new(Some(live)),
            restarts: AtomicU32::new(0),
            stopped: AtomicBool::new(false),
        };
        Ok((server, offered))
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// How often the server was reconnected after a failure.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// The process id of a running stdio server.
    pub async fn process_id(&self) -> Option<u32> {
        self.live
            .lock()
            .await
            .as_ref()
            .and_then(|live| live.process.as_ref())
            .and_then(tack_sandbox::Service::id)
    }

    /// Ends a stdio server's process (its whole group, and what it
    /// started), waiting until it is gone, and forgets the connection: the
    /// checks run with none of the agent's processes. A call after that (in
    /// a round of feedback) starts it again, which is no restart. A server
    /// reached over HTTP is not the trial's: left as it is.
    pub async fn stop(&self) {
        let mut live = self.live.lock().await;
        let Some(process) = live.as_mut().and_then(|live| live.process.as_mut()) else {
            return;
        };
        // Dead either way: an error only says it had already been reaped.
        let _ = process.kill().await;
        *live = None;
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Calls one tool. A server that fails under the call is dropped and
    /// connected again on the next one; the error says so, for the model.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, ToolError> {
        let (peer, generation) = self.peer().await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let limit = Duration::from_secs(self.config.call_timeout_secs);
        let name = &self.config.name;
        match tokio::time::timeout(limit, peer.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            // The server answered with a JSON-RPC error: it works, the call
            // did not.
            Ok(Err(ServiceError::McpError(error))) => Err(ToolError::failed(format!(
                "the MCP server `{name}` refused the call: {}",
                error.message
            ))),
            Ok(Err(error)) => {
                let said = self.drop_connection(generation).await;
                Err(ToolError::failed(format!(
                    "the MCP server `{name}` failed during the call ({error}){said}. It is restarted for your next call; try again, or another way."
                )))
            }
            Err(_) => {
                self.drop_connection(generation).await;
                Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!(
                        "the MCP server `{name}` did not answer within {} s, so the call was abandoned and the server is restarted for your next call.",
                        limit.as_secs()
                    ),
                ))
            }
        }
    }

    /// The live connection's peer, connecting first if there is none or the
    /// last one closed (the server exited between calls).
    async fn peer(&self) -> Result<(Peer<RoleClient>, u32), ToolError> {
        let mut live = self.live.lock().await;
        if let Some(current) = live.as_ref()
            && !current.client.is_closed()
        {
            return Ok((current.client.peer().clone(), current.generation));
        }
        let generation = live.as_ref().map_or(0, |l| l.generation) + 1;
        // Kill what is left of the old one before starting another.
        *live = None;
        if !self.stopped.swap(false, Ordering::Relaxed) {
            self.restarts.fetch_add(1, Ordering::Relaxed);
        }
        let started = start(&self.config, &self.setup, generation)
            .await
            .map_err(|error| {
                ToolError::failed(format!(
                    "{error}. The server is tried again on your next call to one of its tools."
                ))
            })?;
        let peer = started.client.peer().clone();
        *live = Some(started);
        Ok((peer, generation))
    }

    /// Drops connection `generation` if it is still the live one; returns
    /// what a stdio server last printed, to explain the failure.
    async fn drop_connection(&self, generation: u32) -> String {
        let mut live = self.live.lock().await;
        match live.as_ref() {
            Some(current) if current.generation == generation => {
                let said = current.stderr.explain();
                *live = None;
                said
            }
            _ => String::new(),
        }
    }
}

/// Starts (or reaches) the server and makes the MCP handshake, within the
/// startup timeout.
async fn start(
    config: &McpServerConfig,
    setup: &McpSetup,
    generation: u32,
) -> Result<Live, McpError> {
    let limit = Duration::from_secs(config.startup_timeout_secs);
    let timed_out = || McpError::StartupTimeout {
        server: config.name.clone(),
        secs: config.startup_timeout_secs,
    };
    let handshake = |error, stderr: &StderrTail| McpError::Handshake {
        server: config.name.clone(),
        error: Box::new(error),
        stderr: stderr.explain(),
    };
    match config.transport() {
        Some(McpTransport::Stdio { command }) => {
            let StdioProcess {
                stdout,
                stdin,
                service,
                stderr,
            } = launch::stdio(config, command, setup)?;
            let client = tokio::time::timeout(limit, client_config().serve((stdout, stdin)))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| handshake(e, &stderr))?;
            Ok(Live {
                client,
                process: Some(service),
                stderr,
                generation,
            })
        }
        Some(McpTransport::Http { url }) => {
            let transport = launch::http(config, url)?;
            let client = tokio::time::timeout(limit, client_config().serve(transport))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| handshake(e, &StderrTail::default()))?;
            Ok(Live {
                client,
                process: None,
                stderr: StderrTail::default(),
                generation,
            })
        }
        None => Err(McpError::Config {
            server: config.name.clone(),
            message: config
                .problem()
                .unwrap_or_else(|| "needs `command` or `url`".to_string()),
        }),
    }
}
