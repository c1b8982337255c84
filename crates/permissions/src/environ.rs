//! Environment variables that change what a command runs.

/// What setting an environment variable can make the programs of a
/// command do: `GIT_EXTERNAL_DIFF=x git diff` runs `x` behind an allowed
/// `git diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variable {
    Plain,
    /// The value is a command some program runs: judge it as one
    /// (`GIT_PAGER=cat` is as harmless as `cat`).
    Command,
    /// The value changes which code gets loaded or run: ask.
    Loader,
}

pub(crate) fn variable(name: &str) -> Variable {
    // `BASH_CMDS[ls]=x` is an assignment to `BASH_CMDS`.
    let name = name.split_once('[').map_or(name, |(base, _)| base);
    const COMMANDS: [&str; 14] = [
        "PAGER",
        "MANPAGER",
        "GIT_PAGER",
        "EDITOR",
        "VISUAL",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_EXTERNAL_DIFF",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "GIT_PROXY_COMMAND",
        "PROMPT_COMMAND",
    ];
    const LOADERS: [&str; 17] = [
        "PATH",
        // Bash's alias table and command hash: an entry makes a command
        // name run something else (`BASH_CMDS[ls]=./evil`).
        "BASH_ALIASES",
        "BASH_CMDS",
        "BASH_ENV",
        "ENV",
        "LESSOPEN",
        "LESSCLOSE",
        "PERL5OPT",
        "PERL5LIB",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "RUSTC_WRAPPER",
        "SHELLOPTS",
        "BASHOPTS",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
    ];
    const LOADER_PREFIXES: [&str; 4] = ["LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG"];
    if COMMANDS.contains(&name) {
        Variable::Command
    } else if LOADERS.contains(&name) || LOADER_PREFIXES.iter().any(|p| name.starts_with(p)) {
        Variable::Loader
    } else {
        Variable::Plain
    }
}
