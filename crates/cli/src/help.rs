//! Help texts as a terminal of any width shows them. clap wraps each line
//! longer than the terminal on its own, so prose written at one width came
//! out ragged at another, and an example cut in two could be pasted as two
//! commands. Here a paragraph's lines are joined before clap sees them,
//! and clap wraps the whole paragraph to the terminal; indented lines
//! (examples, tables) are kept as written, at most 80 columns, so a
//! terminal of 80 or more shows them whole.

use clap::{CommandFactory, FromArgMatches};

/// The command line parsed as `T`, with its help texts reflowed; exits
/// (2, with clap's message) on bad arguments, as `T::parse` does.
pub fn parse<T: CommandFactory + FromArgMatches>() -> T {
    let matches = reflowed(T::command())
        .try_get_matches()
        .unwrap_or_else(|error| exit(error));
    T::from_arg_matches(&matches).unwrap_or_else(|error| exit(error))
}

/// Whether the command line asks for JSON: every command's `--json` is a
/// flag of its own, so before `--` the word is that flag.
pub fn json_asked() -> bool {
    std::env::args_os()
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json")
}

/// Exits as clap does on a bad command line (its message on stderr, 2);
/// under `--json` a script also gets the object every command's failure
/// prints on stdout, `{"error", "exit_code"}`. `--help` and `--version`
/// print what they print.
fn exit(error: clap::Error) -> ! {
    if error.use_stderr() && json_asked() {
        let text = error.to_string();
        let first = text.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        let object = serde_json::json!({ "error": message, "exit_code": error.exit_code() });
        println!("{object}");
    }
    error.exit()
}

/// `command` and every subcommand with its help texts reflowed.
fn reflowed(mut command: clap::Command) -> clap::Command {
    if let Some(text) = command.get_long_about().map(ToString::to_string) {
        command = command.long_about(reflow(&text));
    }
    if let Some(text) = command.get_after_help().map(ToString::to_string) {
        command = command.after_help(reflow(&text));
    }
    if let Some(text) = command.get_after_long_help().map(ToString::to_string) {
        command = command.after_long_help(reflow(&text));
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, reflowed);
    }
    command
}

/// Consecutive lines that start at the margin are one paragraph, joined
/// with spaces; blank and indented lines stay as they are.
fn reflow(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_paragraph = false;
    for line in text.lines() {
        let prose = !line.is_empty() && !line.starts_with(char::is_whitespace);
        if prose && in_paragraph {
            out.push(' ');
        } else if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        in_paragraph = prose;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paragraph_is_one_line_and_examples_stay() {
        let text = "Fails when the rate drops\nby more than --max-drop.\n\n\
                    Examples:\n  tack gate a b\n  tack gate a b --json\nExit codes: 0 passed,\n1 regression.";
        assert_eq!(
            reflow(text),
            "Fails when the rate drops by more than --max-drop.\n\n\
             Examples:\n  tack gate a b\n  tack gate a b --json\nExit codes: 0 passed, 1 regression."
        );
    }

    /// Indented lines of `command`'s help texts longer than 80 columns,
    /// with the command's path, for it and every subcommand.
    fn long_lines(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        let texts = [
            command.get_long_about(),
            command.get_after_help(),
            command.get_after_long_help(),
        ];
        for text in texts.into_iter().flatten() {
            for line in text.to_string().lines() {
                if line.starts_with(char::is_whitespace) && line.chars().count() > 80 {
                    out.push(format!("{path}: {line}"));
                }
            }
        }
        for sub in command.get_subcommands() {
            long_lines(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_example_and_table_line_fits_eighty_columns() {
        let mut long = Vec::new();
        long_lines(&reflowed(crate::Cli::command()), "tack", &mut long);
        assert!(
            long.is_empty(),
            "{} indented help lines over 80 columns:\n{}",
            long.len(),
            long.join("\n")
        );
    }
}
