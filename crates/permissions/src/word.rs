//! The static value of a shell word: what bash would pass to the program
//! after quote removal, when that can be known without running anything.

use tree_sitter::Node;

/// One word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The value after quote removal, or the source text when not `known`.
    pub text: String,
    /// False when the value depends on the environment or on running
    /// something: `$VAR`, `$(…)`, `$((…))`.
    pub known: bool,
    /// True when bash may still expand the value into other words: an
    /// unquoted `*`, `?`, `[` or `{`. Harmless as an argument (`rm *.o` is
    /// still judged as `rm`), but a program name like `/bin/r?` or
    /// `{rm,-rf,/}` could be anything.
    pub pattern: bool,
}

impl Word {
    /// A word that came from plain text (a split string, a tool argument).
    pub fn literal(text: &str) -> Word {
        Word {
            text: text.to_string(),
            known: true,
            pattern: false,
        }
    }

    /// Usable as a program name: fully known and not expanded further.
    pub fn is_plain(&self) -> bool {
        self.known && !self.pattern && !self.text.is_empty()
    }
}

/// Evaluates a word-like node (`word`, `string`, `concatenation`, …).
pub(crate) fn evaluate(node: Node<'_>, source: &str) -> Word {
    let raw = text_of(node, source);
    let unknown = || Word {
        text: raw.to_string(),
        known: false,
        pattern: false,
    };
    match node.kind() {
        "word" => Word {
            text: unescape_unquoted(raw),
            known: true,
            pattern: has_unquoted_pattern(raw),
        },
        "number" if node.named_child_count() == 0 => Word::literal(raw),
        "raw_string" => Word::literal(strip(raw, "'", "'")),
        "string" => double_quoted(node, source).unwrap_or_else(unknown),
        "ansi_c_string" => {
            ansi_c(strip(raw, "$'", "'")).map_or_else(unknown, |t| Word::literal(&t))
        }
        "translated_string" => match node.named_child(0) {
            Some(inner) => evaluate(inner, source),
            None => unknown(),
        },
        "command_name" => match node.named_child(0) {
            Some(inner) if node.named_child_count() == 1 => evaluate(inner, source),
            _ => unknown(),
        },
        "concatenation" => concatenation(node, source),
        // Expansions, substitutions, brace ranges: only known at run time.
        _ => unknown(),
    }
}

pub(crate) fn text_of<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.byte_range()).unwrap_or("")
}

fn strip<'a>(raw: &'a str, open: &str, close: &str) -> &'a str {
    let inner = raw.strip_prefix(open).unwrap_or(raw);
    inner.strip_suffix(close).unwrap_or(inner)
}

fn concatenation(node: Node<'_>, source: &str) -> Word {
    let mut cursor = node.walk();
    let mut word = Word {
        text: String::new(),
        known: true,
        pattern: false,
    };
    let mut parts = Vec::new();
    for child in node.named_children(&mut cursor) {
        let part = evaluate(child, source);
        word.known &= part.known;
        word.pattern |= part.pattern;
        parts.push(part.text);
    }
    if word.known {
        word.text = parts.concat();
    } else {
        word.text = text_of(node, source).to_string();
    }
    word
}

/// `"…"`: literal pieces with `\"`, `\\`, `\$`, `` \` `` unescaped; any
/// expansion inside makes the whole word unknown.
fn double_quoted(node: Node<'_>, source: &str) -> Option<Word> {
    let mut cursor = node.walk();
    let mut text = String::new();
    // Text between the named children (not covered by `string_content`) is
    // literal too, except the quotes themselves.
    let start = node.start_byte() + 1;
    let end = node.end_byte().saturating_sub(1).max(start);
    let mut at = start;
    for child in node.named_children(&mut cursor) {
        if child.kind() != "string_content" {
            return None;
        }
        text.push_str(source.get(at..child.start_byte()).unwrap_or(""));
        text.push_str(&unescape_double_quoted(text_of(child, source)));
        at = child.end_byte();
    }
    text.push_str(source.get(at..end).unwrap_or(""));
    Some(Word::literal(&text))
}

fn unescape_unquoted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            },
            _ => out.push(c),
        }
    }
    out
}

fn unescape_double_quoted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('"' | '\\' | '$' | '`') => {
                    out.extend(chars.next());
                    continue;
                }
                Some('\n') => {
                    chars.next();
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

fn has_unquoted_pattern(raw: &str) -> bool {
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '*' | '?' | '[' | '{' => return true,
            _ => {}
        }
    }
    false
}

/// `$'…'`: C escapes. `None` for escapes this does not decode, so that an
/// obfuscated program name is treated as unknown rather than guessed.
fn ansi_c(inner: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next()?;
        let simple = match escaped {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(escaped),
            _ => None,
        };
        if let Some(decoded) = simple {
            out.push(decoded);
            continue;
        }
        let (radix, max) = match escaped {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 2),
            _ => return None,
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(escaped);
        }
        while digits.len() < max + usize::from(radix == 8) {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => digits.extend(chars.next()),
                _ => break,
            }
        }
        let code = u32::from_str_radix(&digits, radix).ok()?;
        out.push(char::from_u32(code)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_decodes_hex_octal_and_simple_escapes() {
        assert_eq!(ansi_c(r"\x72\155").as_deref(), Some("rm"));
        assert_eq!(ansi_c(r"a\tb\\").as_deref(), Some("a\tb\\"));
        assert_eq!(ansi_c(r"\q"), None);
    }

    #[test]
    fn unquoted_escapes_and_patterns() {
        assert_eq!(unescape_unquoted(r"\rm"), "rm");
        assert_eq!(unescape_unquoted(r"\;"), ";");
        assert!(has_unquoted_pattern("/bin/r?"));
        assert!(!has_unquoted_pattern(r"a\*"));
    }

    #[test]
    fn double_quoted_escapes() {
        assert_eq!(unescape_double_quoted(r#"a\"b\n"#), "a\"b\\n");
    }
}
