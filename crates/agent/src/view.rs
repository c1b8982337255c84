//! What the model is shown of a tool result, per the harness's result view.

use tack_protocol::ResultView;
use tack_sandbox::CommandOutput;

use crate::tools::{ToolError, ToolOutput};

/// The text of the tool message the model reads next.
pub fn render(view: ResultView, result: &Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(error) => format!("Error ({}): {}", error.kind, error.message),
        Ok(ToolOutput::Text { text, .. }) => text.clone(),
        Ok(ToolOutput::Command(output)) => match view {
            ResultView::Full => render_full(output),
            ResultView::StdoutOnly => render_stdout(output),
        },
    }
}

fn render_full(output: &CommandOutput) -> String {
    let mut text = match (output.exit_code, output.signal) {
        (Some(code), _) => format!("exit code: {code}\n"),
        (None, Some(signal)) => format!("exit code: none (killed by signal {signal})\n"),
        (None, None) => "exit code: none\n".to_string(),
    };
    if output.timed_out {
        text.push_str(&format!(
            "[the command timed out after {:.1}s and was killed]\n",
            output.duration.as_secs_f64()
        ));
    }
    push_stream(&mut text, "stdout", &output.stdout, output.stdout_truncated);
    push_stream(&mut text, "stderr", &output.stderr, output.stderr_truncated);
    text
}

fn push_stream(text: &mut String, name: &str, content: &str, truncated: bool) {
    text.push_str(&format!("<{name}>\n{content}"));
    if !content.is_empty() && !content.ends_with('\n') {
        text.push('\n');
    }
    if truncated {
        text.push_str(&format!(
            "[{name} truncated: only the first {} bytes are shown]\n",
            content.len()
        ));
    }
    text.push_str(&format!("</{name}>\n"));
}

fn render_stdout(output: &CommandOutput) -> String {
    let mut text = if output.stdout.is_empty() {
        "(no output)".to_string()
    } else {
        output.stdout.clone()
    };
    if output.stdout_truncated {
        text.push_str("\n[output truncated]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn failing() -> CommandOutput {
        CommandOutput {
            exit_code: Some(1),
            signal: None,
            stdout: String::new(),
            stderr: "FAILED (failures=1)\n".to_string(),
            stdout_truncated: false,
            stderr_truncated: false,
            timed_out: false,
            duration: Duration::from_millis(5),
            profile: tack_sandbox::SandboxProfile::Off,
            denials: Vec::new(),
        }
    }

    #[test]
    fn full_view_shows_exit_code_and_both_streams() {
        let text = render(ResultView::Full, &Ok(ToolOutput::Command(failing())));
        assert_eq!(
            text,
            "exit code: 1\n<stdout>\n</stdout>\n<stderr>\nFAILED (failures=1)\n</stderr>\n"
        );
    }

    #[test]
    fn stdout_view_hides_the_failure() {
        let text = render(ResultView::StdoutOnly, &Ok(ToolOutput::Command(failing())));
        assert_eq!(text, "(no output)");
    }
}
