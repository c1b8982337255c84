//! What `tests/test.sh` and `solution/solve.sh` need when they run: tools
//! they install or fetch, pinned Python packages they run with, commands
//! that need root, and how test.sh reports the reward.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::HarborError;
use super::dockerfile::Instruction;
use super::install::{self, Install, NotAList};
use super::shell;

/// A shell script of the task and what scanning it found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Script {
    pub path: PathBuf,
    pub text: String,
    /// Programs the script runs, shell builtins left out.
    pub programs: BTreeSet<String>,
    pub needs: ScriptNeeds,
    /// Commands that only work as root (`chown`, `su`, `useradd`, ...).
    pub root_commands: Vec<Instruction>,
    /// Commands that leave a process running after they return (see
    /// [`starts_daemon`]).
    pub daemons: Vec<Instruction>,
}

/// What a script installs or fetches while it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScriptNeeds {
    /// `apt-get install` at run time.
    pub debian_packages: Vec<String>,
    /// `pip install` at run time.
    pub python_packages: Vec<String>,
    /// The `astral.sh` uv installer fetched with curl or wget.
    pub uv_installer: Option<String>,
    pub uv_runs: Vec<UvRun>,
    /// Runs `pytest` (or `python -m pytest`) from the environment as is.
    pub pytest: bool,
    /// Other URLs fetched with curl or wget.
    pub downloads: Vec<String>,
    /// Installs that name no plain package list (`pip install -r ...`).
    pub other_installs: Vec<Instruction>,
}

/// A `uvx`, `uv tool run` or `uv run` invocation: a tool run in an
/// environment uv makes from pinned packages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UvRun {
    pub line: usize,
    /// `--with` requirement specifiers.
    pub with: Vec<String>,
    /// `-p` / `--python`.
    pub python: Option<String>,
    /// `--from`: the package providing the tool, when not named after it.
    pub from: Option<String>,
    /// The tool and its arguments.
    pub command: Vec<String>,
}

/// How test.sh reports the reward to Harbor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RewardKind {
    /// `/logs/verifier/reward.txt` with one number. Harbor reads it first,
    /// so a script that also writes reward.json counts as this.
    Text,
    /// `/logs/verifier/reward.json` with named rewards; `keys` are the ones
    /// written literally in the script, empty when computed elsewhere.
    Json { keys: Vec<String> },
    /// Neither file: only the exit status says pass or fail.
    ExitCode,
}

const ROOT_PROGRAMS: &[&str] = &[
    "chown", "chgrp", "su", "sudo", "runuser", "useradd", "adduser", "userdel", "groupadd",
    "addgroup", "usermod", "chroot", "setcap", "mount",
];

const BUILTINS: &[&str] = &[
    "echo", "printf", "source", ".", "set", "unset", "export", "exit", "return", "cd", "[", "[[",
    "test", "true", "false", "fi", "done", "esac", "local", "read", "shift", "eval", "trap",
    "wait", ":", "{", "}", "then", "else", "do",
];

/// Keywords that may precede a command on the same line.
const PREFIXES: &[&str] = &[
    "if", "then", "else", "elif", "do", "while", "until", "!", "time", "exec",
];

pub(super) fn load(task_dir: &Path, path: &Path) -> Result<Script, HarborError> {
    let text = super::read_text(task_dir, path)?;
    Ok(scan(path, text))
}

fn scan(path: &Path, text: String) -> Script {
    let mut script = Script {
        path: path.to_path_buf(),
        programs: BTreeSet::new(),
        needs: ScriptNeeds::default(),
        root_commands: Vec::new(),
        daemons: Vec::new(),
        text: String::new(),
    };
    for line in shell::logical_lines(&text) {
        for command in shell::split_commands(&line.text) {
            let mut words = shell::command_words(&command);
            let keywords = words
                .iter()
                .take_while(|w| PREFIXES.contains(&w.as_str()))
                .count();
            words.drain(..keywords);
            let Some(program) = words.first() else {
                continue;
            };
            if !BUILTINS.contains(&program.as_str()) {
                script.programs.insert(program.clone());
            }
            if ROOT_PROGRAMS.contains(&program.as_str()) {
                script.root_commands.push(Instruction {
                    line: line.number,
                    text: command.clone(),
                });
            }
            if starts_daemon(&words) {
                script.daemons.push(Instruction {
                    line: line.number,
                    text: command.clone(),
                });
            }
            note_needs(&mut script.needs, line.number, &command, &words);
        }
    }
    script.text = text;
    script
}

/// Whether a command leaves a process running after it returns: a service
/// started (`service nginx start`, `systemctl start`, `/etc/init.d/ssh
/// restart`), a program detached (`nohup`, `setsid`, `start-stop-daemon`),
/// or one sent to the background with `&`.
fn starts_daemon(words: &[String]) -> bool {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let starts = |verb: &&str| matches!(*verb, "start" | "restart");
    match words.as_slice() {
        ["service", _, verb, ..] => starts(verb),
        ["systemctl", rest @ ..] => rest.iter().any(starts) || rest.contains(&"--now"),
        [init, verb, ..] if init.starts_with("/etc/init.d/") => starts(verb),
        ["nohup" | "setsid" | "start-stop-daemon" | "daemonize", ..] => true,
        _ => words.contains(&"&"),
    }
}

fn note_needs(needs: &mut ScriptNeeds, line: usize, command: &str, words: &[String]) {
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    match install::parse(words) {
        Ok(Some(Install::Debian(packages))) => needs.debian_packages.extend(packages),
        Ok(Some(Install::Python(packages))) => needs.python_packages.extend(packages),
        Err(NotAList(_)) => needs.other_installs.push(Instruction {
            line,
            text: command.to_string(),
        }),
        Ok(None) => {}
    }
    match args.as_slice() {
        ["curl" | "wget", rest @ ..] => {
            for url in rest.iter().filter(|w| w.contains("://")) {
                if url.contains("astral.sh/uv") {
                    needs.uv_installer = Some((*url).to_string());
                } else {
                    needs.downloads.push((*url).to_string());
                }
            }
        }
        ["uvx", rest @ ..] | ["uv", "tool", "run", rest @ ..] | ["uv", "run", rest @ ..] => {
            needs.uv_runs.push(uv_run(line, rest));
        }
        ["pytest", ..] | ["python" | "python3", "-m", "pytest", ..] => needs.pytest = true,
        _ => {}
    }
}

fn uv_run(line: usize, args: &[&str]) -> UvRun {
    let mut run = UvRun {
        line,
        with: Vec::new(),
        python: None,
        from: None,
        command: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if arg.starts_with("--") => (flag, Some((*value).to_string())),
            _ => (*arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next().map(|v| (*v).to_string()))
        };
        match flag {
            "--with" => run.with.extend(value()),
            "-p" | "--python" => run.python = value(),
            "--from" => run.from = value(),
            // Options with a value that says where packages come from.
            "--with-requirements" | "--index" | "--index-url" | "--extra-index-url" => {
                value();
            }
            _ if flag.starts_with('-') => {}
            _ => {
                run.command.push((*arg).to_string());
                run.command.extend(args.by_ref().map(|a| (*a).to_string()));
            }
        }
    }
    run
}

/// How `test` reports the reward, from the lines that name the files.
pub(super) fn reward_kind(test: &Script) -> RewardKind {
    let lines = shell::logical_lines(&test.text);
    let mentions = |line: &shell::LogicalLine, file: &str| {
        line.text.contains(file) || line.heredoc.iter().any(|h| h.contains(file))
    };
    if lines.iter().any(|l| mentions(l, "reward.txt")) {
        return RewardKind::Text;
    }
    let mut keys = Vec::new();
    for line in lines.iter().filter(|l| mentions(l, "reward.json")) {
        let body =
            std::iter::once(line.text.as_str()).chain(line.heredoc.iter().map(String::as_str));
        for key in body.flat_map(quoted_keys) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    if lines.iter().any(|l| mentions(l, "reward.json")) {
        RewardKind::Json { keys }
    } else {
        RewardKind::ExitCode
    }
}

/// Quoted strings followed by `:`, the keys of a JSON or Python dict
/// written inline.
fn quoted_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    // Inside a double-quoted shell string the JSON's quotes are escaped.
    let text = text.replace("\\\"", "\"");
    let mut rest = text.as_str();
    while let Some(start) = rest.find(['\'', '"']) {
        let quote = &rest[start..start + 1];
        let after = &rest[start + 1..];
        let candidate = after
            .find(quote)
            .map(|end| (&after[..end], &after[end + 1..]));
        match candidate {
            Some((name, following))
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                    && following.trim_start().starts_with(':') =>
            {
                keys.push(name.to_string());
                rest = following;
            }
            // Not a key: the quote may open a string holding the dict, so
            // look inside it.
            _ => rest = after,
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvx_options_and_command() {
        let args = [
            "-p",
            "3.13",
            "--with",
            "pytest==8.4.1",
            "--with=rich",
            "pytest",
            "-rA",
            "-p",
            "x",
        ];
        let run = uv_run(3, &args);
        assert_eq!(run.python.as_deref(), Some("3.13"));
        assert_eq!(run.with, ["pytest==8.4.1", "rich"]);
        assert_eq!(run.command, ["pytest", "-rA", "-p", "x"]);
    }

    #[test]
    fn commands_that_leave_a_process_running() {
        let daemons = |script: &str| -> Vec<usize> {
            scan(Path::new("solve.sh"), script.to_string())
                .daemons
                .iter()
                .map(|d| d.line)
                .collect()
        };
        let script = "service ssh start || echo failed\n\
                      service nginx status\n\
                      systemctl enable --now nginx\n\
                      /etc/init.d/cron restart\n\
                      nohup python3 serve.py > log 2>&1\n\
                      python3 -m http.server 8080 &\n\
                      make 2>&1 | tee log\n\
                      cd /app && ./run.sh && echo done\n";
        assert_eq!(daemons(script), [1, 3, 4, 5, 6]);
    }

    #[test]
    fn keys_of_inline_dicts() {
        assert_eq!(
            quoted_keys(r#"echo '{"a": 1, "b_c": 0}' > x; f("x:y")"#),
            ["a", "b_c"]
        );
    }
}
