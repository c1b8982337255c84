//! MCP servers a variant's harness connects to: their tools are offered to
//! the model as `<server>__<tool>`, beside the built-in ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What separates a server's name from its tool's in the name the model
/// sees: `filesystem__read_text_file`.
pub const MCP_TOOL_SEPARATOR: &str = "__";

/// One `[[variants.harness.mcp_servers]]` entry: a program speaking MCP on
/// its stdin and stdout (started per trial, inside the trial's sandbox), or
/// a streamable-HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Letters, digits, `-` and `_`; prefixes the server's tool names.
    pub name: String,
    /// The program of a stdio server, found in the trial's `PATH` or
    /// relative to the suite directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments; `${WORKSPACE}` stands for the trial's workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables for a stdio server, on top of the trial's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent to an HTTP server. `${NAME}` in a value is read from
    /// tack's environment, so tokens stay out of suite files and traces.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Seconds to start (or restart) the server and list its tools.
    #[serde(default = "default_startup_timeout")]
    pub startup_timeout_secs: u64,
    /// Seconds one tool call may take before it fails and the server is
    /// restarted for the next call.
    #[serde(default = "default_call_timeout")]
    pub call_timeout_secs: u64,
    /// Only these of the server's tools are offered (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

fn default_startup_timeout() -> u64 {
    30
}

fn default_call_timeout() -> u64 {
    60
}

/// How the harness reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTransport<'a> {
    Stdio { command: &'a str },
    Http { url: &'a str },
}

impl McpServerConfig {
    /// A stdio server with defaults for everything else.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> McpServerConfig {
        McpServerConfig {
            name: name.to_string(),
            command: Some(command.to_string()),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            startup_timeout_secs: default_startup_timeout(),
            call_timeout_secs: default_call_timeout(),
            tools: None,
        }
    }

    /// A streamable-HTTP server with defaults for everything else.
    pub fn http(name: &str, url: &str) -> McpServerConfig {
        McpServerConfig {
            command: None,
            url: Some(url.to_string()),
            ..McpServerConfig::stdio(name, "", &[])
        }
    }

    /// The transport, once [`McpServerConfig::problem`] found none.
    pub fn transport(&self) -> Option<McpTransport<'_>> {
        match (&self.command, &self.url) {
            (Some(command), None) => Some(McpTransport::Stdio { command }),
            (None, Some(url)) => Some(McpTransport::Http { url }),
            _ => None,
        }
    }

    /// What is wrong with this entry, in words for the suite's author.
    pub fn problem(&self) -> Option<String> {
        let name_ok = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !self.name.contains(MCP_TOOL_SEPARATOR);
        if !name_ok {
            return Some(format!(
                "name `{}` must be letters, digits, `-` or `_` (without `__`), as it prefixes the tool names the model sees",
                self.name
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Some(
                    "has both `command` and `url`: give `command` for a stdio server or `url` for a streamable-HTTP one"
                        .to_string(),
                );
            }
            (None, None) => {
                return Some(
                    "needs `command` (a stdio server, e.g. command = \"mcp-server-filesystem\", args = [\"${WORKSPACE}\"]) or `url` (streamable HTTP)"
                        .to_string(),
                );
            }
            (Some(command), None) if command.trim().is_empty() => {
                return Some("`command` is empty".to_string());
            }
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                return Some(format!("url `{url}` must start with http:// or https://"));
            }
            (None, Some(_)) if !self.args.is_empty() || !self.env.is_empty() => {
                return Some(
                    "`args` and `env` are for stdio servers; an HTTP server takes `headers`"
                        .to_string(),
                );
            }
            (Some(_), None) if !self.headers.is_empty() => {
                return Some(
                    "`headers` are for HTTP servers; a stdio server takes `env`".to_string(),
                );
            }
            _ => {}
        }
        if self.startup_timeout_secs == 0 || self.call_timeout_secs == 0 {
            return Some(
                "startup_timeout_secs and call_timeout_secs must be at least 1".to_string(),
            );
        }
        None
    }
}

/// The longest tool name the providers accept (OpenAI's limit).
pub const MAX_TOOL_NAME: usize = 64;

/// The model-facing name of a server's tool: `<server>__<tool>`, in the
/// characters the providers accept (`[A-Za-z0-9_-]`, others become `_`),
/// and at most [`MAX_TOOL_NAME`] long: a longer one keeps its start and
/// ends in a hash of the whole, so it stays distinct. A tool named
/// `files/read.v2` would otherwise fail every model call with a 400.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    let whole = format!("{server}{MCP_TOOL_SEPARATOR}{tool}");
    let safe: String = whole
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.len() <= MAX_TOOL_NAME {
        return safe;
    }
    // FNV-1a: stable across runs and platforms, no dependency for 8 hex digits.
    let hash = whole.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{}_{hash:08x}", &safe[..MAX_TOOL_NAME - 9])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_names_one_transport() {
        let stdio = McpServerConfig::stdio("fs", "npx", &["server", "${WORKSPACE}"]);
        assert_eq!(stdio.problem(), None);
        assert_eq!(
            stdio.transport(),
            Some(McpTransport::Stdio { command: "npx" })
        );
        let http = McpServerConfig::http("remote", "http://127.0.0.1:3001/mcp");
        assert_eq!(http.problem(), None);
        let both = McpServerConfig {
            url: Some("http://x".into()),
            ..stdio.clone()
        };
        assert!(both.problem().unwrap_or_default().contains("both"));
        let bad_name = McpServerConfig::stdio("a__b", "npx", &[]);
        assert!(bad_name.problem().unwrap_or_default().contains("a__b"));
        let ftp = McpServerConfig::http("x", "ftp://host");
        assert!(ftp.problem().unwrap_or_default().contains("http://"));
    }

    #[test]
    fn reads_from_toml_shaped_json_with_defaults() {
        let entry: McpServerConfig = serde_json::from_value(serde_json::json!({
            "name": "everything", "command": "mcp-server-everything"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(entry.call_timeout_secs, 60);
        assert_eq!(entry.startup_timeout_secs, 30);
        assert_eq!(mcp_tool_name(&entry.name, "echo"), "everything__echo");
    }

    #[test]
    fn tool_names_fit_what_the_providers_accept() {
        assert_eq!(mcp_tool_name("fs", "read.v2/file"), "fs__read_v2_file");
        let long = "x".repeat(80);
        let a = mcp_tool_name("srv", &format!("{long}a"));
        let b = mcp_tool_name("srv", &format!("{long}b"));
        assert_eq!(a.len(), MAX_TOOL_NAME);
        assert_ne!(a, b, "long names stay distinct");
        assert!(a.starts_with("srv__xxx"));
        assert_eq!(a, mcp_tool_name("srv", &format!("{long}a")), "and stable");
    }
}
