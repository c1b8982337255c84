//! Turns whatever the model asked for into a tool result it can read. Broken
//! JSON, unknown tools, arguments that do not fit, calls cut off by the output
//! limit, tools that fail or panic: each becomes an error result with a kind,
//! and the run goes on.
//!
//! Arguments pass two checks: the tool's JSON Schema (every problem at once,
//! by field pointer), then the tool's typed parse, which stays as the second
//! line of defence for what a schema cannot say.

use std::sync::Arc;
use std::time::Duration;

use tack_protocol::{ToolAccess, ToolCall, ToolErrorKind, ToolSpec};

use crate::tools::{
    ArgumentSchema, InvalidToolSchema, Tool, ToolContext, ToolError, ToolOutput, builtin_tool,
};

pub struct Dispatcher {
    tools: Vec<Registered>,
    ctx: Arc<ToolContext>,
}

/// A tool with its spec and compiled schema, both made once: `spec()` builds
/// JSON on every call, and compiling a schema costs far more than checking.
struct Registered {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    schema: ArgumentSchema,
    /// The schema, when the offered spec leaves it out (shown on a call
    /// that does not fit it).
    withheld: Option<serde_json::Value>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("tools", &self.names())
            .field("ctx", &self.ctx)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown tool `{name}` in the harness configuration; the built-in tools are: {available}")]
pub struct UnknownToolName {
    pub name: String,
    pub available: String,
}

/// Why a dispatcher could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DispatcherError {
    #[error(transparent)]
    UnknownTool(#[from] UnknownToolName),
    #[error(transparent)]
    InvalidSchema(#[from] InvalidToolSchema),
}

impl Dispatcher {
    /// A dispatcher offering the named built-in tools.
    pub fn builtin(names: &[String], ctx: ToolContext) -> Result<Dispatcher, DispatcherError> {
        Dispatcher::with_extra(names, Vec::new(), ctx)
    }

    /// The named built-in tools, then `extra` ones (an MCP server's).
    pub fn with_extra(
        names: &[String],
        extra: Vec<Arc<dyn Tool>>,
        ctx: ToolContext,
    ) -> Result<Dispatcher, DispatcherError> {
        let mut tools = names
            .iter()
            .map(|name| {
                builtin_tool(name).ok_or_else(|| UnknownToolName {
                    name: name.clone(),
                    available: crate::tools::BUILTIN_TOOLS.join(", "),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        tools.extend(extra);
        Ok(Dispatcher::new(tools, ctx)?)
    }

    /// A dispatcher offering `tools`. Fails if a tool's parameter schema is
    /// not a valid JSON Schema: that is a bug in the tool, and refusing it
    /// here surfaces it when a run is planned, before any trial starts,
    /// instead of silently dropping the schema check for that tool.
    pub fn new(
        tools: Vec<Arc<dyn Tool>>,
        ctx: ToolContext,
    ) -> Result<Dispatcher, InvalidToolSchema> {
        let tools = tools
            .into_iter()
            .map(|tool| {
                let spec = tool.spec();
                let withheld = tool.full_parameters();
                let schema = match &withheld {
                    Some(parameters) => ArgumentSchema::compile(&ToolSpec {
                        parameters: parameters.clone(),
                        ..spec.clone()
                    })?,
                    None => ArgumentSchema::compile(&spec)?,
                };
                Ok(Registered {
                    tool,
                    spec,
                    schema,
                    withheld,
                })
            })
            .collect::<Result<Vec<_>, InvalidToolSchema>>()?;
        Ok(Dispatcher {
            tools,
            ctx: Arc::new(ctx),
        })
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|entry| entry.spec.clone()).collect()
    }

    /// Where long results are offloaded, when the strategy offloads.
    pub fn results_dir(&self) -> Option<&std::path::Path> {
        self.ctx.results_dir.as_deref()
    }

    /// The MCP server a tool belongs to, if it is an MCP tool.
    pub fn server_of(&self, tool: &str) -> Option<&str> {
        self.tools
            .iter()
            .find(|entry| entry.spec.name == tool)
            .and_then(|entry| entry.tool.server())
    }

    fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .map(|entry| entry.spec.name.as_str())
            .collect()
    }

    /// Runs one call: [`Dispatcher::prepare`] then [`Dispatcher::run`].
    pub async fn dispatch(&self, call: &ToolCall, cut_off: bool) -> Result<ToolOutput, ToolError> {
        self.run(self.prepare(call, cut_off)?).await
    }

    /// Checks a call before anything is judged or run: the tool exists, the
    /// arguments are a JSON object that fits its schema. `cut_off` is true
    /// when the model's output limit ended the turn: its calls may be
    /// incomplete, so none of them is run. What comes back says what the
    /// call will read, write or execute, for the permission gate.
    pub fn prepare(&self, call: &ToolCall, cut_off: bool) -> Result<PreparedCall, ToolError> {
        if cut_off {
            return Err(ToolError::new(
                ToolErrorKind::TruncatedCall,
                format!(
                    "your answer was cut off by the output limit, so this `{}` call may be incomplete and was not run. Re-issue it with complete arguments, in a shorter answer if needed.",
                    call.name
                ),
            ));
        }
        let Some(entry) = self.tools.iter().find(|t| t.spec.name == call.name) else {
            return Err(ToolError::new(
                ToolErrorKind::UnknownTool,
                format!(
                    "there is no tool named `{}`. Available tools: {}.",
                    call.name,
                    self.names().join(", ")
                ),
            ));
        };
        let arguments = parse_json(&call.name, &call.arguments)?;
        entry
            .schema
            .check(&call.name, &arguments)
            .map_err(|mut error| {
                if let Some(schema) = &entry.withheld {
                    error.message = format!(
                        "{} The tool's parameters, as a JSON Schema: {schema}",
                        error.message
                    );
                }
                error
            })?;
        Ok(PreparedCall {
            access: entry.tool.access(&arguments),
            tool: Arc::clone(&entry.tool),
            name: call.name.clone(),
            arguments,
            within: None,
        })
    }

    /// Runs a prepared call. A tool that panics is reported, not fatal.
    pub async fn run(&self, call: PreparedCall) -> Result<ToolOutput, ToolError> {
        let PreparedCall {
            tool,
            name,
            arguments,
            within,
            ..
        } = call;
        // A command may not outlast the run's wall-clock limit.
        let ctx = match within {
            Some(left) if left < self.ctx.command_timeout => Arc::new(ToolContext {
                command_timeout: left,
                ..(*self.ctx).clone()
            }),
            _ => Arc::clone(&self.ctx),
        };
        // A separate task, so that a panicking tool is caught and reported
        // instead of taking the trial down.
        let running = tokio::spawn(async move { tool.run(arguments, &ctx).await });
        match running.await {
            Ok(result) => result,
            Err(join) if join.is_panic() => Err(ToolError::new(
                ToolErrorKind::Panicked,
                format!(
                    "the `{name}` tool crashed ({}); this is a harness bug, not your fault. Try another way.",
                    panic_message(join.into_panic())
                ),
            )),
            Err(join) => Err(ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!("the `{name}` tool was cancelled: {join}"),
            )),
        }
    }
}

/// A call whose tool and arguments are known good, with what it will
/// touch.
pub struct PreparedCall {
    tool: Arc<dyn Tool>,
    name: String,
    arguments: serde_json::Value,
    /// What the call reads, writes or executes, as the tool declares it.
    pub access: Vec<ToolAccess>,
    /// The time left to the run, which a command's timeout may not exceed.
    within: Option<Duration>,
}

impl PreparedCall {
    /// The call's arguments, checked against the tool's schema.
    pub fn arguments(&self) -> &serde_json::Value {
        &self.arguments
    }

    /// The call, its command bounded by `left` (the run's wall-clock time
    /// left, at least a second), when there is a bound.
    pub fn within(mut self, left: Option<Duration>) -> PreparedCall {
        self.within = left.map(|left| left.max(Duration::from_secs(1)));
        self
    }
}

impl std::fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCall")
            .field("name", &self.name)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

fn parse_json(tool: &str, arguments: &str) -> Result<serde_json::Value, ToolError> {
    // Some models send no arguments at all for tools without required fields.
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        ToolError::new(
            ToolErrorKind::InvalidJson,
            format!(
                "the arguments for `{tool}` are not valid JSON ({e}). Send one JSON object that matches the tool's schema."
            ),
        )
    })?;
    if !value.is_object() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "the arguments for `{tool}` must be a JSON object, not {}. Send an object with the fields of the tool's schema.",
                json_kind(&value)
            ),
        ));
    }
    Ok(value)
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "no message".to_string()
    }
}
