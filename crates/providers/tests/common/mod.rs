//! Helpers shared by the provider tests: a model of either provider, in
//! either mode, pointed at a scripted loopback server.

#![allow(dead_code)] // each test binary uses part of this

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tack_agent::{AgentRun, Dispatcher, ToolContext, run_agent};
use tack_model::{Model, ModelError, ModelRequest, ModelResponse};
use tack_protocol::{HarnessConfig, Message, ToolSpec, VecSink};
use tack_providers::{ApiKey, Provider, ProviderConfig, build_model};
use tack_testkit::{Dialect, MockServer, ScriptedResponse, TEST_API_KEY};

/// A provider and a mode: every behaviour is checked for all four.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub provider: Provider,
    pub stream: bool,
}

pub const CASES: [Case; 4] = [
    Case {
        provider: Provider::OpenAi,
        stream: false,
    },
    Case {
        provider: Provider::OpenAi,
        stream: true,
    },
    Case {
        provider: Provider::Anthropic,
        stream: false,
    },
    Case {
        provider: Provider::Anthropic,
        stream: true,
    },
];

impl Case {
    pub fn dialect(self) -> Dialect {
        match self.provider {
            Provider::OpenAi => Dialect::OpenAi,
            Provider::Anthropic => Dialect::Anthropic,
        }
    }

    pub async fn server(self, script: Vec<ScriptedResponse>) -> MockServer {
        MockServer::start(self.dialect(), script).await.unwrap()
    }

    pub fn config(self, server: &MockServer) -> ProviderConfig {
        let mut config = ProviderConfig::new(self.provider, "test-model");
        config.base_url = Some(server.base_url());
        config.api_key = Some(ApiKey::new(TEST_API_KEY));
        config.stream = self.stream;
        config.timeout = Duration::from_secs(20);
        config
    }

    pub fn model(self, server: &MockServer) -> Box<dyn Model> {
        let config = self.config(server);
        build_model(&config, config.api_key.clone()).unwrap()
    }

    /// Starts a server with `script` and makes one call.
    pub async fn call_once(
        self,
        script: Vec<ScriptedResponse>,
    ) -> (Result<ModelResponse, ModelError>, MockServer) {
        let server = self.server(script).await;
        let mut model = self.model(&server);
        let result = call(model.as_mut()).await;
        (result, server)
    }
}

pub fn conversation() -> Vec<Message> {
    vec![
        Message::system("You are terse."),
        Message::user("List the files."),
    ]
}

pub fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "bash".to_string(),
        description: "Run a command".to_string(),
        parameters: json!({
            "type": "object",
            "properties": { "command": { "type": "string" } },
            "required": ["command"],
        }),
    }]
}

pub async fn call(model: &mut dyn Model) -> Result<ModelResponse, ModelError> {
    let messages = conversation();
    let tools = tools();
    model
        .complete(ModelRequest {
            messages: &messages,
            tools: &tools,
        })
        .await
}

/// Runs the harness loop once with `model` on the files in `workspace`,
/// unconfined (these tests are about the providers), recording every event.
pub async fn run_loop(
    harness: &HarnessConfig,
    model: &mut dyn Model,
    workspace: &Path,
    instruction: &str,
) -> (AgentRun, VecSink) {
    let ctx = ToolContext {
        workspace: workspace.to_path_buf(),
        env: vec![],
        command_timeout: Duration::from_secs(10),
        output_limit: 8192,
        confinement: std::sync::Arc::new(tack_sandbox::Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    };
    let dispatcher = Dispatcher::builtin(&harness.tools, ctx).unwrap();
    let mut sink = VecSink::default();
    let run = run_agent(harness, model, &dispatcher, instruction, &mut sink).await;
    (run, sink)
}
