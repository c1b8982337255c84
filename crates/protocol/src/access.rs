//! What a tool call will do to the machine, as the tool itself declares it
//! from its (already validated) arguments. The permission engine judges these
//! declarations instead of knowing which argument of which tool is a path or
//! a command, so a new tool (an MCP tool, a subagent) needs no change there.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "target", rename_all = "snake_case")]
pub enum ToolAccess {
    /// Reads this path (relative to the workspace, or absolute).
    Read(String),
    /// Creates or changes this path.
    Write(String),
    /// Runs this shell script, as `bash -c` would.
    Execute(String),
    /// What a tool of another program (an MCP server) says of itself. Only
    /// hints: a `tool = …` rule overrides them.
    Hinted(ToolHint),
}

/// An MCP tool's annotations, as far as permissions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolHint {
    /// `readOnlyHint`: the tool changes nothing.
    ReadOnly,
    /// `destructiveHint` (or no annotations: the MCP default): it may
    /// delete or overwrite.
    Destructive,
    /// Changes things, but only adds (`destructiveHint: false`).
    Additive,
}

/// The built-in tools' names: the one place each is spelled. The tools
/// declare themselves with these, the built-in models call them, and the
/// default harness configuration offers the [`DEFAULT`] ones.
pub mod tool_names {
    pub const BASH: &str = "bash";
    pub const READ_FILE: &str = "read_file";
    pub const WRITE_FILE: &str = "write_file";
    pub const STR_REPLACE: &str = "str_replace";
    pub const LIST_FILES: &str = "list_files";
    pub const GREP: &str = "grep";
    pub const WRITE_TODOS: &str = "write_todos";
    pub const TASK: &str = "task";
    pub const READ_SKILL: &str = "read_skill";

    /// What a subagent may use unless the variant says otherwise: tools
    /// that only read.
    pub const READ_ONLY: [&str; 3] = [READ_FILE, LIST_FILES, GREP];

    /// The tools a harness offers unless a variant names its own, in order.
    pub const DEFAULT: [&str; 6] = [BASH, READ_FILE, WRITE_FILE, STR_REPLACE, LIST_FILES, GREP];

    /// Every built-in tool: the default ones, then those offered only when
    /// a variant names them (a plan the agent keeps, `write_todos`;
    /// subagents, `task`) or, for `read_skill`, when there are skills.
    pub const BUILTIN: [&str; 9] = [
        BASH,
        READ_FILE,
        WRITE_FILE,
        STR_REPLACE,
        LIST_FILES,
        GREP,
        WRITE_TODOS,
        TASK,
        READ_SKILL,
    ];
}
