use std::process::ExitCode;

/// Why a command failed, which decides its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The command ran and found a problem (e.g. an unsound task).
    Found,
    /// Bad flags or bad input files.
    Usage,
    /// tack itself could not do its job (traces, report, runtime).
    Internal,
}

/// The exit status a failure of `kind` ends with.
pub fn code(kind: Failure) -> u8 {
    match kind {
        Failure::Found => 1,
        Failure::Usage => 2,
        Failure::Internal => 3,
    }
}

impl From<Failure> for ExitCode {
    fn from(kind: Failure) -> ExitCode {
        ExitCode::from(code(kind))
    }
}

#[derive(Debug)]
pub struct CommandError {
    pub kind: Failure,
    pub error: anyhow::Error,
}

pub type CommandResult = Result<ExitCode, CommandError>;

/// An error's message followed by each cause it does not already say:
/// tack's messages usually include their cause's text (and its hint), so
/// printing every `source()` after them, as `{:#}` does, would say it twice.
pub fn message(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// A usage error (exit 2): bad flags or input, said in `message`.
pub fn usage(message: impl Into<String>) -> CommandError {
    CommandError {
        kind: Failure::Usage,
        error: anyhow::anyhow!(message.into()),
    }
}

/// A run that could not be read: a directory that is no run (no manifest),
/// or a variant or task it lacks, is the user's to fix (2); a run whose
/// tables do not read is tack's failure (3), as every reading command says.
pub fn reading(error: tack_analysis::AnalysisError) -> CommandError {
    use tack_analysis::AnalysisError as E;
    let kind = match &error {
        E::Manifest { .. }
        | E::NoTrials { .. }
        | E::TrialNotFound { .. }
        | E::InvalidTrialId { .. } => Failure::Usage,
        _ => Failure::Internal,
    };
    CommandError {
        kind,
        error: error.into(),
    }
}

/// [`reading`] for a comparison: what is not read is the user's to fix.
pub fn comparing(error: tack_analysis::compare::CompareError) -> CommandError {
    match error {
        tack_analysis::compare::CompareError::Read(error) => reading(error),
        error => CommandError {
            kind: Failure::Usage,
            error: error.into(),
        },
    }
}

pub trait Classify<T> {
    fn or_fail(self, kind: Failure) -> Result<T, CommandError>;
}

impl<T, E: Into<anyhow::Error>> Classify<T> for Result<T, E> {
    fn or_fail(self, kind: Failure) -> Result<T, CommandError> {
        self.map_err(|error| CommandError {
            kind,
            error: error.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("could not read the suite: {source}; fix the file")]
    struct Said {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("could not read the suite")]
    struct Unsaid {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_is_said_once() {
        let cause = || std::io::Error::other("no such file");
        let said = anyhow::Error::new(Said { source: cause() });
        assert_eq!(
            message(&said),
            "could not read the suite: no such file; fix the file"
        );
        let unsaid = anyhow::Error::new(Unsaid { source: cause() });
        assert_eq!(message(&unsaid), "could not read the suite: no such file");
        let context = anyhow::Error::new(cause()).context("reading suite.toml");
        assert_eq!(message(&context), "reading suite.toml: no such file");
    }
}
