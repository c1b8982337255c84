//! What a variant's harness and provider settings name, checked when the
//! suite loads: a rules file that is missing, an approver that cannot decide
//! or a limit no trial can run under would otherwise end every trial in
//! `harness_error`, after the run has started.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tack_protocol::{
    ApproverConfig, ApproverPolicy, BuiltinModel, ChaosParams, HarnessConfig, SimParams, tool_names,
};

use super::files;
use crate::{ExternalAgent, ProviderSettings, SuiteError, Variant};

/// Where a variant sits in `suite.toml`, so that every error names the file,
/// the variant and the field.
pub(super) struct VariantAt<'a> {
    pub file: &'a Path,
    pub index: usize,
    pub name: &'a str,
}

impl VariantAt<'_> {
    pub fn invalid(&self, field: &str, message: impl Into<String>) -> SuiteError {
        SuiteError::invalid(self.file, self.place(field), message)
    }

    pub fn params(&self, field: &str, error: tack_protocol::ParamsError) -> SuiteError {
        SuiteError::Params {
            path: self.file.to_path_buf(),
            field: self.place(field),
            error,
        }
    }

    fn place(&self, field: &str) -> String {
        if self.name.is_empty() {
            format!("variants[{}].{field}", self.index)
        } else {
            format!("variants[{}].{field} (variant `{}`)", self.index, self.name)
        }
    }
}

/// A `[variants.sim]`, `[variants.chaos]` or `[variants.provider]` table
/// for a kind of model the variant does not run would be read and never
/// used: `[variants.chaos]` beside `model = "sim"` injects no fault, and
/// whoever forgot `chaos(sim)` would believe it did.
pub(super) fn check_model_tables(at: &VariantAt, variant: &Variant) -> Result<(), SuiteError> {
    let model = &variant.model;
    if variant.chaos != ChaosParams::default() && !model.is_chaos() {
        return Err(at.invalid(
            "chaos",
            format!(
                "fault rates are for a `chaos(...)` model, and `{model}` is not one: write \
                 model = \"chaos({model})\" to inject them, or remove the table"
            ),
        ));
    }
    if variant.sim != SimParams::default() && model.builtin() != Some(BuiltinModel::Sim) {
        return Err(at.invalid(
            "sim",
            format!(
                "these are the simulated agent's parameters, and `{model}` is not `sim`: \
                 remove the table, or set model = \"sim\""
            ),
        ));
    }
    if variant.provider != ProviderSettings::default() && model.provider().is_none() {
        return Err(at.invalid(
            "provider",
            format!(
                "connection settings are for a provider model (`openai:<model>`, \
                 `anthropic:<model>`), and `{model}` is built in: remove the table, or name \
                 a provider model"
            ),
        ));
    }
    Ok(())
}

/// Checks a variant's harness; `root` is the suite directory, which the
/// rules file and a reviewer script are relative to.
pub(super) fn check_harness(
    at: &VariantAt,
    root: &Path,
    harness: &HarnessConfig,
) -> Result<(), SuiteError> {
    check_limits(at, harness)?;
    if let Some(problem) = harness.context.problem() {
        return Err(at.invalid("harness.context", problem));
    }
    check_tools(at, harness)?;
    check_subagents(at, harness)?;
    check_mcp_servers(at, root, harness)?;
    check_permissions(at, root, harness.permissions.as_deref())?;
    check_approver(at, root, &harness.approver)
}

fn check_limits(at: &VariantAt, harness: &HarnessConfig) -> Result<(), SuiteError> {
    let counts = [
        (
            "harness.max_steps",
            u64::from(harness.max_steps),
            "it counts model calls, and with 0 no trial gets one",
        ),
        (
            "harness.command_timeout_secs",
            harness.command_timeout_secs,
            "with 0 every bash command times out at once",
        ),
        (
            "harness.output_limit_bytes",
            harness.output_limit_bytes as u64,
            "with 0 the model sees no output at all",
        ),
        (
            "harness.model_attempts",
            u64::from(harness.model_attempts),
            "1 means no retries",
        ),
    ];
    for (field, value, why) in counts {
        if value == 0 {
            return Err(at.invalid(field, format!("must be at least 1, got 0: {why}")));
        }
    }
    let optional = [
        ("harness.max_wall_secs", harness.max_wall_secs),
        ("harness.max_tokens", harness.max_tokens),
    ];
    for (field, value) in optional {
        if value == Some(0) {
            return Err(at.invalid(
                field,
                "must be at least 1, got 0: every trial would stop before its first model call; leave it out for no limit",
            ));
        }
    }
    if let Some(dollars) = harness.max_cost_usd
        && !(dollars.is_finite() && dollars > 0.0)
    {
        return Err(at.invalid(
            "harness.max_cost_usd",
            format!(
                "must be a finite dollar amount above 0, such as 2.0, got {dollars}; leave it out for no cost limit"
            ),
        ));
    }
    Ok(())
}

/// A subagent's tools are built-in ones, other than `task`.
fn check_subagents(at: &VariantAt, harness: &HarnessConfig) -> Result<(), SuiteError> {
    let subagents = &harness.subagents;
    if let Some(problem) = subagents.problem() {
        return Err(at.invalid("harness.subagents", problem));
    }
    for (i, tool) in subagents.tools.iter().enumerate() {
        if !tool_names::BUILTIN.contains(&tool.as_str()) {
            return Err(at.invalid(
                &format!("harness.subagents.tools[{i}]"),
                format!(
                    "`{tool}` is not a tool: the tools are {}",
                    tool_names::BUILTIN.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Each MCP server names one transport and a name of its own; a stdio
/// server given by path exists beside the suite.
fn check_mcp_servers(
    at: &VariantAt,
    root: &Path,
    harness: &HarnessConfig,
) -> Result<(), SuiteError> {
    for (i, server) in harness.mcp_servers.iter().enumerate() {
        let field = format!("harness.mcp_servers[{i}]");
        if let Some(problem) = server.problem() {
            return Err(at.invalid(&field, problem));
        }
        if harness.mcp_servers[..i]
            .iter()
            .any(|s| s.name == server.name)
        {
            return Err(at.invalid(
                &format!("{field}.name"),
                format!(
                    "`{}` names two servers; give each its own name",
                    server.name
                ),
            ));
        }
        if let Some(command) = &server.command
            && command.contains('/')
            && Path::new(command).is_relative()
            && !root.join(command).is_file()
        {
            return Err(at.invalid(
                &format!("{field}.command"),
                format!(
                    "`{command}` is not a file in the suite directory {}; give a path relative to it, or a program on PATH",
                    root.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Every tool a variant offers must be one the harness has, named once.
fn check_tools(at: &VariantAt, harness: &HarnessConfig) -> Result<(), SuiteError> {
    if harness.tools.is_empty() {
        return Err(at.invalid(
            "harness.tools",
            "offers no tools: list at least one, e.g. [\"bash\"]",
        ));
    }
    for (i, tool) in harness.tools.iter().enumerate() {
        if tool.trim().is_empty() {
            return Err(at.invalid(
                &format!("harness.tools[{i}]"),
                "is empty: name a tool, e.g. \"bash\"",
            ));
        }
        if !tool_names::BUILTIN.contains(&tool.as_str()) {
            return Err(at.invalid(
                &format!("harness.tools[{i}]"),
                format!(
                    "`{tool}` is not a tool: the tools are {}",
                    tool_names::BUILTIN.join(", ")
                ),
            ));
        }
        if harness.tools[..i].contains(tool) {
            return Err(at.invalid(
                &format!("harness.tools[{i}]"),
                format!("`{tool}` is listed twice: list each tool once"),
            ));
        }
    }
    // A tool that needs approval but is not offered is most likely a typo,
    // and a typo here would silently let that tool run unreviewed.
    for (i, tool) in harness.requires_approval.iter().enumerate() {
        if !harness.tools.contains(tool) {
            return Err(at.invalid(
                &format!("harness.requires_approval[{i}]"),
                format!(
                    "`{tool}` is not among the variant's tools ({}): name one of them",
                    harness.tools.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn check_permissions(
    at: &VariantAt,
    root: &Path,
    permissions: Option<&str>,
) -> Result<(), SuiteError> {
    const FIELD: &str = "harness.permissions";
    let source = match permissions {
        None | Some("default") => return Ok(()),
        Some(source) => source,
    };
    if source.trim().is_empty() {
        return Err(at.invalid(
            FIELD,
            "is empty: name a rules file (relative to the suite directory) or \"default\" for the built-in profile, or leave it out to allow every call",
        ));
    }
    let path = root.join(source);
    let text = files::read_text(&path).map_err(|e| {
        at.invalid(
            FIELD,
            format!(
                "the rules file `{source}` cannot be used: {e}; name an existing rules file (relative to the suite directory), or \"default\" for the built-in profile"
            ),
        )
    })?;
    let shown = path.display().to_string();
    tack_permissions::Rules::from_toml(&text, &shown)
        .map(|_| ())
        .map_err(|e| {
            at.invalid(
                FIELD,
                format!(
                    "the rules file `{source}` is not valid: {e}; fix it (`tack permissions check --rules {shown} -- <command>` tries it)"
                ),
            )
        })
}

fn check_approver(
    at: &VariantAt,
    root: &Path,
    approver: &ApproverConfig,
) -> Result<(), SuiteError> {
    let policy = approver.policy;
    if policy == ApproverPolicy::Rules {
        for (i, pattern) in approver.approve.iter().enumerate() {
            if let Err(e) = globset::Glob::new(pattern) {
                return Err(at.invalid(
                    &format!("harness.approver.approve[{i}]"),
                    format!(
                        "`{pattern}` is not a valid glob: {e}; `*` matches anything, `?` one character, `[…]` a set; escape a literal `[` as `[[]`"
                    ),
                ));
            }
        }
    } else if !approver.approve.is_empty() {
        return Err(at.invalid(
            "harness.approver.approve",
            format!(
                "is only read with policy = \"rules\", and this approver's policy is \"{}\": set the policy to \"rules\" or remove `approve`",
                policy.as_str()
            ),
        ));
    }
    match (policy, approver.script.as_deref()) {
        (ApproverPolicy::Script, None) => Err(at.invalid(
            "harness.approver.script",
            "is missing: policy \"script\" needs the reviewer command, e.g. script = \"python3 review.py\" (it gets the request as JSON on stdin; exit 0 approves)",
        )),
        (ApproverPolicy::Script, Some(script)) => check_reviewer(at, root, script),
        (_, Some(_)) => Err(at.invalid(
            "harness.approver.script",
            format!(
                "is only read with policy = \"script\", and this approver's policy is \"{}\": set the policy to \"script\" or remove `script`",
                policy.as_str()
            ),
        )),
        (_, None) => Ok(()),
    }
}

/// Words a reviewer command may start with that are the shell's own, or
/// that make its program known only when the shell runs it.
const SHELL_WORDS: [&str; 16] = [
    "!", "[", "test", "echo", "printf", "exec", "command", "env", "true", "false", "if", "cd", ":",
    "read", "eval", "export",
];

/// Script extensions: an argument ending in one names the reviewer's code.
const SCRIPT_EXTENSIONS: [&str; 9] = ["py", "sh", "bash", "js", "mjs", "rb", "pl", "ts", "lua"];

/// A reviewer that cannot start denies every call silently, so check what
/// can be checked without running it: the program exists (a path is taken
/// from the suite directory, where the reviewer runs; a bare name from
/// PATH) and a script file it is given exists. What only the shell can
/// resolve (quotes, variables, compound commands) is left alone.
fn check_reviewer(at: &VariantAt, root: &Path, script: &str) -> Result<(), SuiteError> {
    const FIELD: &str = "harness.approver.script";
    let mut words = script.split_whitespace().skip_while(|w| is_assignment(w));
    let Some(program) = words.next() else {
        return Err(at.invalid(
            FIELD,
            "is empty: name the reviewer command, e.g. \"python3 review.py\"",
        ));
    };
    if !is_plain(program) || SHELL_WORDS.contains(&program) {
        return Ok(());
    }
    if program.contains('/') {
        let path = root.join(program.trim_start_matches("./"));
        if !is_executable(&path) {
            let problem = if path.is_file() {
                "is not executable: `chmod +x` it, or run it through its interpreter (\"sh review.sh\")"
            } else {
                "does not exist"
            };
            return Err(at.invalid(
                FIELD,
                format!(
                    "the reviewer `{program}` ({}, taken from the suite directory, where the reviewer runs) {problem}",
                    path.display()
                ),
            ));
        }
    } else if !on_path(program) {
        return Err(at.invalid(
            FIELD,
            format!(
                "the reviewer program `{program}` is not on PATH: install it, or name it by its path relative to the suite directory"
            ),
        ));
    }
    let script_file = words
        .filter(|w| !w.starts_with('-'))
        .take_while(|w| is_plain(w))
        .next()
        .filter(|w| {
            Path::new(w)
                .extension()
                .is_some_and(|ext| SCRIPT_EXTENSIONS.contains(&ext.to_string_lossy().as_ref()))
        });
    if let Some(file) = script_file
        && !root.join(file).is_file()
    {
        return Err(at.invalid(
            FIELD,
            format!(
                "the reviewer's script `{file}` does not exist in the suite directory ({}), where the reviewer runs",
                root.display()
            ),
        ));
    }
    Ok(())
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A word the shell takes literally: no quotes, expansions or operators.
fn is_plain(word: &str) -> bool {
    !word.contains([
        '"', '\'', '$', '`', '\\', '(', ')', '{', '}', '|', '&', ';', '<', '>', '*', '?', '~',
    ])
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(program)))
    })
}

/// Provider settings are read only for provider models, but a zero budget
/// or an empty variable name is a mistake whichever model the variant uses.
pub(super) fn check_provider(
    at: &VariantAt,
    provider: &ProviderSettings,
) -> Result<(), SuiteError> {
    let counts = [
        ("provider.max_tokens", provider.max_tokens.map(u64::from)),
        (
            "provider.requests_per_minute",
            provider.requests_per_minute.map(u64::from),
        ),
        ("provider.tokens_per_minute", provider.tokens_per_minute),
        (
            "provider.max_concurrency",
            provider.max_concurrency.map(u64::from),
        ),
    ];
    for (field, value) in counts {
        if value == Some(0) {
            return Err(at.invalid(
                field,
                "must be at least 1, got 0: no call could ever be made; leave it out for the default",
            ));
        }
    }
    let texts = [
        ("provider.base_url", &provider.base_url),
        ("provider.api_key_env", &provider.api_key_env),
    ];
    for (field, value) in texts {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(at.invalid(
                field,
                "is empty: give a value or leave it out for the default",
            ));
        }
    }
    Ok(())
}

/// An external agent needs a command, and a provider model: its calls go
/// through a proxy to that provider (tack's built-in models run only
/// inside tack's own loop). Its chaos wrapper would never be called.
pub(super) fn check_agent(
    at: &VariantAt,
    variant: &Variant,
    agent: &ExternalAgent,
) -> Result<(), SuiteError> {
    if agent.command.trim().is_empty() {
        return Err(at.invalid(
            "agent.command",
            "is empty: give the command that runs the agent, e.g. \"mini -m $TACK_MODEL -t \\\"$TACK_INSTRUCTION\\\" --yolo\"",
        ));
    }
    if variant.model.provider().is_none() || variant.model.builtin().is_some() {
        return Err(at.invalid(
            "model",
            format!(
                "`{}` with [variants.agent]: an external agent needs a provider model (`openai:<model>` or `anthropic:<model>`, with `provider.base_url` for another endpoint), whose calls its proxy records; the built-in models only run inside tack's own loop",
                variant.model
            ),
        ));
    }
    if variant.model.to_string().starts_with("chaos(") {
        return Err(at.invalid(
            "model",
            "chaos(...) injects faults into tack's own model calls; an external agent makes its own calls, so give the plain model",
        ));
    }
    Ok(())
}
