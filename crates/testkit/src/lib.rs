//! Loopback servers that speak the OpenAI Chat Completions, OpenAI Responses
//! and Anthropic Messages wire formats from a script, so provider code is tested over real
//! HTTP with no key and no network. Each server answers requests in order
//! from its script — replies (JSON or server-sent events, as the request
//! asks), HTTP errors with Retry-After, delays, malformed bodies, streams cut
//! part-way, connection resets — and records every request. A server can
//! instead run a [`ToolLoop`]: it answers every conversation from its own
//! messages, so benchmarks drive many concurrent trials (of tack or of
//! another harness) with it.
//!
//! It depends on no workspace crate: the servers speak the providers' wire
//! formats, not tack's types.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use tack_testkit::{OpenAiServer, ScriptedResponse};
//! let server = OpenAiServer::start(vec![
//!     ScriptedResponse::rate_limited(1),
//!     ScriptedResponse::text("done"),
//! ])
//! .await?;
//! // point a provider at server.base_url() with key tack_testkit::TEST_API_KEY
//! assert_eq!(server.requests().len(), 0);
//! # Ok(()) }
//! ```

mod anthropic_wire;
mod io;
mod openai_wire;
mod request_view;
mod responses_wire;
mod script;
mod server;
mod tool_loop;

use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Deref;
use std::sync::Arc;

pub use script::{Finish, Reply, ScriptedCall, ScriptedResponse, ScriptedUsage};
pub use server::{Dialect, RecordedRequest, STATS_PATH, ServerStats};
pub use tool_loop::ToolLoop;

use server::{Answers, Shared};

/// The key test servers expect unless told otherwise. Not a real key.
pub const TEST_API_KEY: &str = "sk-tack-testkit-0000000000000000";

/// Where a server listens and which key it expects.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// 0 picks a free port.
    pub port: u16,
    pub expected_key: String,
    /// A scripted server also appends every request it records to this
    /// file, one JSON line each, for callers in another process.
    pub record_to: Option<std::path::PathBuf>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            port: 0,
            expected_key: TEST_API_KEY.to_string(),
            record_to: None,
        }
    }
}

/// A running scripted server; it stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _runner: Runner,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("dialect", &self.shared.dialect)
            .field("addr", &self.addr)
            .field("remaining", &self.remaining())
            .finish()
    }
}

enum Runner {
    /// On the caller's runtime.
    Task(tokio::task::JoinHandle<()>),
    /// On a thread of its own, for callers that block.
    Thread {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl Drop for Runner {
    fn drop(&mut self) {
        match self {
            Runner::Task(task) => task.abort(),
            Runner::Thread { stop, thread } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

impl MockServer {
    /// Starts on the current tokio runtime, on a free port of 127.0.0.1.
    pub async fn start(
        dialect: Dialect,
        script: Vec<ScriptedResponse>,
    ) -> std::io::Result<MockServer> {
        MockServer::start_with(dialect, script, ServerOptions::default()).await
    }

    pub async fn start_with(
        dialect: Dialect,
        script: Vec<ScriptedResponse>,
        options: ServerOptions,
    ) -> std::io::Result<MockServer> {
        let shared = Arc::new(Shared::new(dialect, Shared::script(script), &options));
        let listener = server::bind(loopback(options.port)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(server::serve(listener, shared.clone()));
        Ok(MockServer {
            addr,
            shared,
            _runner: Runner::Task(task),
        })
    }

    /// Starts on a thread with its own runtime: for synchronous tests, and
    /// for tests that block while a `tack` subprocess talks to the server.
    pub fn start_background(
        dialect: Dialect,
        script: Vec<ScriptedResponse>,
        options: ServerOptions,
    ) -> std::io::Result<MockServer> {
        MockServer::background(dialect, Shared::script(script), options)
    }

    /// Starts a [`ToolLoop`] server on a thread of its own. It keeps
    /// connections alive and, unlike a scripted server, records no
    /// requests (a benchmark's thousands would fill memory): see
    /// [`MockServer::stats`].
    pub fn start_tool_loop(
        dialect: Dialect,
        tool_loop: ToolLoop,
        options: ServerOptions,
    ) -> std::io::Result<MockServer> {
        MockServer::background(dialect, Answers::Loop(tool_loop), options)
    }

    fn background(
        dialect: Dialect,
        answers: Answers,
        options: ServerOptions,
    ) -> std::io::Result<MockServer> {
        let shared = Arc::new(Shared::new(dialect, answers, &options));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tack-testkit-server".to_string())
            .spawn(move || run_thread(serving, options.port, ready_tx, stop_rx))?;
        let addr = ready_rx
            .recv()
            .map_err(|_| std::io::Error::other("the server thread stopped before it started"))??;
        Ok(MockServer {
            addr,
            shared,
            _runner: Runner::Thread {
                stop: Some(stop_tx),
                thread: Some(thread),
            },
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.shared.dialect
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What a provider's `base_url` should be: `http://127.0.0.1:<port>/v1`
    /// for OpenAI (requests go to `{base_url}/chat/completions`),
    /// `http://127.0.0.1:<port>` for Anthropic (`{base_url}/v1/messages`).
    pub fn base_url(&self) -> String {
        match self.shared.dialect {
            Dialect::OpenAi => format!("http://{}/v1", self.addr),
            Dialect::Anthropic => format!("http://{}", self.addr),
        }
    }

    /// Requests so far and the server's own time (also served as JSON at
    /// `GET` [`STATS_PATH`]).
    pub fn stats(&self) -> ServerStats {
        self.shared.stats()
    }

    /// Every request so far, in arrival order (none for a tool loop).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests()
    }

    /// Script entries not yet answered.
    pub fn remaining(&self) -> usize {
        self.shared.remaining()
    }

    /// Adds an answer at the end of the script.
    pub fn push(&self, response: ScriptedResponse) {
        self.shared.push(response);
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

type Ready = std::sync::mpsc::Sender<std::io::Result<SocketAddr>>;

fn run_thread(
    shared: Arc<Shared>,
    port: u16,
    ready: Ready,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match server::bind(loopback(port)).await {
            Ok(listener) => listener,
            Err(error) => {
                let _ = ready.send(Err(error));
                return;
            }
        };
        let _ = ready.send(listener.local_addr());
        tokio::select! {
            _ = server::serve(listener, shared) => {}
            _ = stop => {}
        }
    });
}

macro_rules! dialect_server {
    ($name:ident, $dialect:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name(MockServer);

        impl $name {
            /// Starts on the current tokio runtime, on a free loopback port.
            pub async fn start(script: Vec<ScriptedResponse>) -> std::io::Result<$name> {
                MockServer::start($dialect, script).await.map($name)
            }

            /// Starts on a thread of its own (see [`MockServer::start_background`]).
            pub fn start_background(script: Vec<ScriptedResponse>) -> std::io::Result<$name> {
                MockServer::start_background($dialect, script, ServerOptions::default()).map($name)
            }

            pub fn into_inner(self) -> MockServer {
                self.0
            }
        }

        impl Deref for $name {
            type Target = MockServer;

            fn deref(&self) -> &MockServer {
                &self.0
            }
        }
    };
}

dialect_server!(
    OpenAiServer,
    Dialect::OpenAi,
    "A scripted OpenAI server: Chat Completions and Responses."
);
dialect_server!(
    AnthropicServer,
    Dialect::Anthropic,
    "A scripted Anthropic Messages server."
);

/// The `.bin` directory of the MCP reference servers (`.ci/run` installs
/// `@modelcontextprotocol/server-everything` and `server-filesystem` from
/// npm and sets `TACK_MCP_SERVERS`), or `None` for a test to skip, having
/// said why. With `TACK_REQUIRE_MCP=1` a missing directory panics instead,
/// so that CI cannot pass by skipping.
pub fn mcp_reference_servers() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("TACK_MCP_SERVERS").map(std::path::PathBuf::from);
    let found = dir.filter(|d| d.join("mcp-server-everything").exists());
    if found.is_none() {
        let why = "TACK_MCP_SERVERS does not name a directory with mcp-server-everything (`.ci/run` installs the reference servers)";
        assert!(
            std::env::var("TACK_REQUIRE_MCP").as_deref() != Ok("1"),
            "TACK_REQUIRE_MCP=1, but {why}"
        );
        eprintln!("skipped: {why}");
    }
    found
}
