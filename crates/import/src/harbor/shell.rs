//! Just enough shell syntax to read Dockerfile `RUN` steps and test
//! scripts: continuation lines, heredocs, command lists and quoted words.
//! Not a shell parser; constructs it does not model (subshells, functions)
//! come out as commands whose first word the callers do not recognise.

/// A command line after joining `\` continuations.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LogicalLine {
    /// 1-based number of the line it starts on.
    pub number: usize,
    pub text: String,
    /// The body of a heredoc the line opens, which is data, not commands.
    pub heredoc: Vec<String>,
}

/// Splits a script into logical lines, dropping blank and comment lines.
pub(super) fn logical_lines(text: &str) -> Vec<LogicalLine> {
    let mut lines = Vec::new();
    let mut raw = text.lines().enumerate();
    while let Some((index, first)) = raw.next() {
        if is_blank_or_comment(first) {
            continue;
        }
        let mut joined = String::new();
        let mut current = first;
        loop {
            match current.trim_end().strip_suffix('\\') {
                Some(head) => {
                    joined.push_str(head);
                    joined.push(' ');
                }
                None => {
                    joined.push_str(current);
                    break;
                }
            }
            // Docker drops comment lines inside a continued instruction; a
            // shell would end the command there, which no real task relies on.
            match raw.find(|(_, line)| !line.trim_start().starts_with('#')) {
                // The indentation of a continued line only lines it up.
                Some((_, next)) => current = next.trim_start(),
                None => break,
            }
        }
        // A quoted string may span lines (`python3 -c "..."`); it belongs to
        // the command that opened it.
        while open_quote(&joined) {
            match raw.next() {
                Some((_, next)) => {
                    joined.push('\n');
                    joined.push_str(next);
                }
                None => break,
            }
        }
        let mut heredoc = Vec::new();
        if let Some(marker) = heredoc_marker(&joined) {
            for (_, line) in raw.by_ref() {
                if line.trim() == marker {
                    break;
                }
                heredoc.push(line.to_string());
            }
        }
        lines.push(LogicalLine {
            number: index + 1,
            text: joined.trim().to_string(),
            heredoc,
        });
    }
    lines
}

/// Whether `text` ends inside a quoted string. An unquoted `#` starts a
/// comment, whose apostrophes open nothing.
fn open_quote(text: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match quote {
            Some('"') if c == '\\' => {
                chars.next();
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\\' => {
                chars.next();
            }
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return false,
            None => {}
        }
        previous = c;
    }
    quote.is_some()
}

pub(super) fn is_blank_or_comment(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// The terminator of a heredoc opened on `line` (`<<EOF`, `<<-'EOF'`).
fn heredoc_marker(line: &str) -> Option<String> {
    let start = line.find("<<")?;
    let rest = line[start + 2..].trim_start_matches('-').trim_start();
    if rest.starts_with('<') {
        // `<<<` is a here-string, with no body on the following lines.
        return None;
    }
    let marker: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!marker.is_empty()).then_some(marker)
}

/// Splits a command list on unquoted `&&`, `||`, `;` and `|`, so each part
/// is one simple command.
pub(super) fn split_commands(line: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => {
                quote = None;
                current.push(c);
            }
            (Some(_), '\\') | (None, '\\') => {
                current.push(c);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            (Some(_), _) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (None, ';' | '|') => {
                push_part(&mut parts, &mut current);
                if c == '|' && chars.peek() == Some(&'|') {
                    chars.next();
                }
            }
            (None, '&') if chars.peek() == Some(&'&') => {
                chars.next();
                push_part(&mut parts, &mut current);
            }
            (None, _) => current.push(c),
        }
    }
    push_part(&mut parts, &mut current);
    parts
}

fn push_part(parts: &mut Vec<String>, current: &mut String) {
    let part = current.trim();
    if !part.is_empty() {
        parts.push(part.to_string());
    }
    current.clear();
}

/// The words of one simple command, quotes removed.
pub(super) fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
                in_word = true;
            }
            (Some(_), _) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, _) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(current);
    }
    words
}

/// The words of a command without leading `VAR=value` assignments, which
/// set the environment of the command rather than name it.
pub(super) fn command_words(command: &str) -> Vec<String> {
    let mut words = words(command);
    let assignments = words.iter().take_while(|w| is_assignment(w)).count();
    words.drain(..assignments);
    words
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Whether `command` redirects or substitutes outside quotes, which means
/// it writes or computes something beyond what its words name.
pub(super) fn redirects_or_substitutes(command: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for c in command.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some('\'') => {}
            Some(_) if c == '`' || (previous == '$' && c == '(') => return true,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if matches!(c, '>' | '<' | '`') || (previous == '$' && c == '(') => return true,
            None => {}
        }
        previous = c;
    }
    false
}
