//! Text an agent or a task produced, made safe to print on a terminal.
//! Such text is untrusted: an escape sequence in a tool's output, a file
//! name or a build log could clear the screen, retitle the window, hide a
//! line behind a carriage return, or print a forged "all checks passed".
//! Every terminal rendering of recorded or task content goes through
//! [`printable`]; JSON and CSV carry the bytes as they were.

use std::borrow::Cow;

/// `text` with every control character but newline and tab shown instead
/// of obeyed: C0 controls and DEL in caret notation (`ESC` is `^[`, a bare
/// carriage return `^M`; `\r\n` is a newline), C1 controls and the
/// characters that reorder text (bidirectional overrides, which can make a
/// line read differently from its bytes) as `<U+XXXX>`.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_showing) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            c if !needs_showing(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c => out.push_str(&format!("<U+{:04X}>", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// `text` as [`printable`] shows it, on one line: a newline is shown as
/// `^J` too. For a line of a file a program reads back line by line (a
/// comment of a generated task.toml, a quarantine list), where a line
/// break in the text would start a line of the text's choosing.
pub fn printable_line(text: &str) -> String {
    printable(text).replace('\n', "^J")
}

fn needs_showing(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true,
        // Bidirectional embeddings, overrides and isolates.
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{printable, printable_line};

    #[test]
    fn a_printable_line_holds_no_line_break() {
        assert_eq!(printable_line("a\nb\r\nc\x1b"), "a^Jb^Jc^[");
    }

    #[test]
    fn escapes_are_shown_not_obeyed() {
        assert_eq!(
            printable("a\x1b]0;pwned\x07b\x1b[2Jc"),
            "a^[]0;pwned^Gb^[[2Jc"
        );
        assert_eq!(printable("ok\r\x1b[Kfake: passed"), "ok^M^[[Kfake: passed");
        assert_eq!(
            printable("\u{9b}31m \u{202E}txt.exe"),
            "<U+009B>31m <U+202E>txt.exe"
        );
        assert_eq!(printable("del\x7f"), "del^?");
    }

    #[test]
    fn plain_text_lines_and_tabs_pass_unchanged() {
        let text = "line one\r\n\tline two: naïve ✓\n";
        assert_eq!(printable(text), "line one\n\tline two: naïve ✓\n");
        assert!(matches!(printable("plain"), std::borrow::Cow::Borrowed(_)));
    }
}
