use std::path::{Path, PathBuf};

/// Variants that wrap another error hold it in `error`, not as `source()`:
/// the message says it already, and the CLI prints an error's sources after
/// its message, which would say it twice (as it does for `Io`).
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("no task named `{name}` in suite `{suite}`; its tasks are: {known}")]
    UnknownTask {
        name: String,
        suite: String,
        known: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A problem in a suite or task file, naming the field and what to do.
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// toml's message spans lines, with the offending line shown; boxed,
    /// being large. serde's words are put in the suite's ([`plain_words`]).
    #[error("{path}: {}", plain_words(.error.to_string().trim_end()))]
    Parse {
        path: PathBuf,
        error: Box<toml::de::Error>,
    },
    /// `[solution]` could not be turned into the data its hash is over.
    #[error("{path}: solution: cannot be read as data: {error}")]
    SolutionData {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// A file or directory of the suite that is missing, unreadable or of
    /// the wrong kind, with what to do about it.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("task `{task}`: setup command `{command}` failed (exit {exit}): {output}")]
    Setup {
        task: String,
        command: String,
        exit: String,
        output: String,
    },
    #[error("task `{task}`: {message}")]
    Environment { task: String, message: String },
    /// A variant's `sim` or `chaos` parameters.
    #[error("{path}: {field}: {error}")]
    Params {
        path: PathBuf,
        field: String,
        error: tack_protocol::ParamsError,
    },
    #[error("{path}: protected: {error}")]
    Protected {
        path: PathBuf,
        error: crate::ProtectedError,
    },
    /// A solution edit that does not apply to the fixture.
    #[error("{path}: {field}: {error}")]
    Edit {
        path: PathBuf,
        field: String,
        error: crate::EditError,
    },
    /// A command of the task (setup, solution) could not run at all.
    #[error("task `{task}`: {error}")]
    Sandbox {
        task: String,
        error: tack_sandbox::SandboxError,
    },
    /// `task` is the workspace the check ran in.
    #[error("task `{task}`: check `{check}` could not run: {error}")]
    Check {
        task: String,
        check: String,
        error: tack_sandbox::SandboxError,
    },
    /// A solution edit that does not apply to a trial's workspace.
    #[error("task `{task}`: {error}")]
    Solution {
        task: String,
        error: crate::EditError,
    },
}

impl SuiteError {
    pub fn io(path: &Path, source: std::io::Error) -> SuiteError {
        SuiteError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn file(path: &Path, message: impl Into<String>) -> SuiteError {
        SuiteError::File {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    pub fn edit(path: &Path, field: String, error: crate::EditError) -> SuiteError {
        SuiteError::Edit {
            path: path.to_path_buf(),
            field,
            error,
        }
    }

    /// A check of the task in `workspace` that could not run.
    pub fn check<'a>(
        workspace: &'a Path,
        check: &'a str,
    ) -> impl FnOnce(tack_sandbox::SandboxError) -> SuiteError + 'a {
        move |error| SuiteError::Check {
            task: workspace.display().to_string(),
            check: check.to_string(),
            error,
        }
    }

    pub fn invalid(
        path: &Path,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> SuiteError {
        SuiteError::Invalid {
            path: path.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// serde's words for a bad value, in a suite author's: an enum's cases are
/// values (a suite's *variants* are something else), and an integer type
/// is a whole number.
fn plain_words(message: &str) -> String {
    let mut text = message.replace("unknown variant `", "unknown value `");
    for (rust, plain) in [
        // Unsigned: -1 is a whole number, and the message must not say
        // it was expected.
        ("expected u8", "expected a non-negative whole number"),
        ("expected u16", "expected a non-negative whole number"),
        ("expected u32", "expected a non-negative whole number"),
        ("expected u64", "expected a non-negative whole number"),
        ("expected usize", "expected a non-negative whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
    ] {
        text = text.replace(rust, plain);
    }
    text
}

#[cfg(test)]
mod plain_words_tests {
    use super::plain_words;

    #[test]
    fn serde_words_become_the_suites() {
        assert_eq!(
            plain_words("unknown variant `stdout`, expected `full` or `stdout_only`"),
            "unknown value `stdout`, expected `full` or `stdout_only`"
        );
        assert_eq!(
            plain_words("invalid type: string \"3\", expected u32"),
            "invalid type: string \"3\", expected a non-negative whole number"
        );
        assert_eq!(
            plain_words("invalid value: integer `-1`, expected u32"),
            "invalid value: integer `-1`, expected a non-negative whole number"
        );
        assert_eq!(
            plain_words("expected u64 or"),
            "expected a non-negative whole number or"
        );
    }
}
