//! `[suite] fingerprint`: the commands whose output a run records as the
//! versions of the toolchains the suite depends on.

use std::path::Path;

use crate::SuiteError;

/// Each command is the key its output is recorded under in the run's
/// manifest, so it must say something and appear once.
pub(super) fn check_fingerprint(file: &Path, commands: &[String]) -> Result<(), SuiteError> {
    for (i, command) in commands.iter().enumerate() {
        let field = format!("suite.fingerprint[{i}]");
        if command.trim().is_empty() {
            return Err(SuiteError::invalid(
                file,
                field,
                "is empty: give a command that prints a toolchain's version (`python3 --version`), or remove the entry",
            ));
        }
        if commands[..i].iter().any(|c| c.trim() == command.trim()) {
            return Err(SuiteError::invalid(
                file,
                field,
                format!("`{command}` is listed twice: keep one"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(commands: &[&str]) -> Result<(), String> {
        let commands: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
        check_fingerprint(Path::new("suite.toml"), &commands).map_err(|e| e.to_string())
    }

    #[test]
    fn commands_must_be_given_once_and_not_empty() {
        assert!(check(&[]).is_ok());
        assert!(check(&["python3 --version", "bash --version | head -1"]).is_ok());
        let empty = check(&["python3 --version", "  "]).unwrap_err();
        assert!(
            empty.contains("suite.toml: suite.fingerprint[1]: is empty"),
            "{empty}"
        );
        let twice = check(&["uname -r", "uname -r "]).unwrap_err();
        assert!(
            twice.contains("suite.fingerprint[1]") && twice.contains("listed twice"),
            "{twice}"
        );
    }
}
