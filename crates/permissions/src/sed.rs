//! Whether a sed script does more than print: GNU sed's `e` command and the
//! `e` flag of `s` run shell commands, `w`/`W` and the `w` flag write files.
//! `sed -n '1,20p' f` is how agents read files, so plain sed stays allowed
//! and only scripts using these ask.

use crate::effects::{Args, Effect, all};
use crate::rules::Access;
use crate::word::Word;

/// `sed [-i] SCRIPT FILE…`: files are written with `-i`, read otherwise.
/// The script is the first operand unless given with `-e`/`-f`.
pub(crate) fn effects(args: &[Word]) -> Vec<Effect> {
    let parsed = Args::split(
        args,
        &["-e", "--expression", "-f", "--file", "-l", "--line-length"],
    );
    let in_place = parsed
        .flags
        .iter()
        .chain(parsed.options.iter().map(|(n, _)| n))
        .any(|flag| {
            flag.starts_with("--in-place")
                || (!flag.starts_with("--")
                    && flag[1..]
                        .chars()
                        .take_while(char::is_ascii_alphabetic)
                        .any(|c| c == 'i'))
        });
    let given = parsed
        .value(&["-e", "--expression", "-f", "--file"])
        .is_some();
    let files = parsed.operands.get(usize::from(!given)..).unwrap_or(&[]);
    let mut effects = all(
        if in_place {
            Access::Write
        } else {
            Access::Read
        },
        files,
    );
    // GNU sed can run commands (`e`, `s///e`) and write files (`w`): a
    // script that might is as opaque as any program.
    let mut scripts: Vec<&Word> = parsed
        .options
        .iter()
        .filter(|(name, _)| matches!(*name, "-e" | "--expression" | "-f" | "--file"))
        .map(|(_, word)| *word)
        .collect();
    if !given {
        scripts.extend(parsed.operands.first());
    }
    let opaque = scripts.iter().any(|script| {
        let text = script
            .text
            .strip_prefix("--expression=")
            .unwrap_or(&script.text);
        !script.known || script.text.starts_with("--file") || runs_or_writes(text)
    }) || parsed
        .options
        .iter()
        .any(|(name, _)| matches!(*name, "-f" | "--file"));
    if opaque {
        effects.push(Effect::Opaque(
            "the sed script can run commands or write files (e, w, -f script)".into(),
        ));
    }
    effects
}

/// True when `script` may run a command or write a file — or when it uses
/// something this scanner does not know, which is treated the same way.
pub(crate) fn runs_or_writes(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        if matches!(chars[at], ';' | '\n' | ' ' | '\t' | '{' | '}' | '!') {
            at += 1;
            continue;
        }
        at = skip_address(&chars, at);
        // `$!N`: negation between the address and the command.
        while matches!(chars.get(at), Some('!' | ' ')) {
            at += 1;
        }
        let Some(&command) = chars.get(at) else { break };
        at += 1;
        match command {
            'e' | 'w' | 'W' => return true,
            's' => match substitution_flags(&chars, at) {
                Some((flags, end)) if !flags.contains(['e', 'w']) => at = end,
                _ => return true,
            },
            'y' => match skip_sections(&chars, at, 2) {
                Some(end) => at = end,
                None => return true,
            },
            // Text, file names (`r` only reads), labels and comments run to
            // the end of the line; `b`/`t`/`T`/`:` labels also end at `;`.
            'a' | 'i' | 'c' | 'r' | 'R' | '#' => at = end_of_line(&chars, at),
            'b' | 't' | 'T' | ':' => {
                while at < chars.len() && !matches!(chars[at], ';' | '\n') {
                    at += 1;
                }
            }
            '=' | 'd' | 'D' | 'F' | 'g' | 'G' | 'h' | 'H' | 'l' | 'L' | 'n' | 'N' | 'p' | 'P'
            | 'q' | 'Q' | 'x' | 'z' | 'v' => {
                while chars.get(at).is_some_and(char::is_ascii_digit) {
                    at += 1;
                }
            }
            _ => return true,
        }
    }
    false
}

/// Skips `12`, `$`, `/re/I`, `\%re%`, `first~step`, `addr,+N`.
fn skip_address(chars: &[char], mut at: usize) -> usize {
    loop {
        match chars.get(at) {
            Some(c) if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | ' ') => at += 1,
            Some('/') => at = skip_delimited(chars, at + 1, '/').unwrap_or(chars.len()),
            Some('\\') => match chars.get(at + 1) {
                Some(&delimiter) => {
                    at = skip_delimited(chars, at + 2, delimiter).unwrap_or(chars.len())
                }
                None => return chars.len(),
            },
            Some('I' | 'M')
                if at > 0 && chars.get(at - 1).is_some_and(|c| !c.is_alphanumeric()) =>
            {
                at += 1
            }
            _ => return at,
        }
    }
}

/// The index after the closing `delimiter`, honouring backslash escapes.
fn skip_delimited(chars: &[char], mut at: usize, delimiter: char) -> Option<usize> {
    while let Some(&c) = chars.get(at) {
        if c == '\\' {
            at += 2;
        } else if c == delimiter {
            return Some(at + 1);
        } else {
            at += 1;
        }
    }
    None
}

/// After `y` or `s`: the delimiter, then `count` delimited sections.
fn skip_sections(chars: &[char], at: usize, count: usize) -> Option<usize> {
    let delimiter = *chars.get(at)?;
    let mut end = at + 1;
    for _ in 0..count {
        end = skip_delimited(chars, end, delimiter)?;
    }
    Some(end)
}

/// The flags of `s/re/replacement/flags` and where they end.
fn substitution_flags(chars: &[char], at: usize) -> Option<(String, usize)> {
    let mut end = skip_sections(chars, at, 2)?;
    let mut flags = String::new();
    while let Some(&c) = chars.get(end) {
        if matches!(c, ';' | '\n' | '}' | ' ') {
            break;
        }
        flags.push(c);
        end += 1;
    }
    Some((flags, end))
}

fn end_of_line(chars: &[char], mut at: usize) -> usize {
    while at < chars.len() && chars[at] != '\n' {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::runs_or_writes;

    #[test]
    fn printing_scripts_are_plain() {
        for script in [
            "1,20p",
            "s/a/b/g",
            "s|/usr|/opt|2",
            "/start/,/end/d",
            "$!N;P;D",
            "y/abc/xyz/",
            "10q",
            r"s/\//x/",
        ] {
            assert!(!runs_or_writes(script), "{script}");
        }
    }

    #[test]
    fn running_or_writing_scripts_are_not() {
        for script in [
            "s/.*/curl x/e",
            "w /etc/x",
            "1e rm x",
            "s/a/b/w out",
            "/x/W f",
            "s/a/b",
            "k",
        ] {
            assert!(runs_or_writes(script), "{script}");
        }
    }
}
