//! Denied operations that surfaced in a command's output, so a report (and
//! the agent) can see what the sandbox stopped rather than guess from an
//! exit code.

/// At most this many distinct denial lines are kept per command.
pub const MAX_DENIALS: usize = 20;
/// Longer lines are cut to this many characters.
const MAX_LINE_CHARS: usize = 300;

/// What tools print when the kernel says no: errno names and their
/// `strerror` texts (compared case-insensitively, as tools vary).
const MARKERS: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "network is unreachable",
    "invalid cross-device link",
    "eperm",
    "eacces",
    "erofs",
    "enetunreach",
];

/// The lines of `stdout` then `stderr` that report a denied operation,
/// trimmed, deduplicated in first-seen order, at most [`MAX_DENIALS`].
pub fn extract_denials(stdout: &str, stderr: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in stdout.lines().chain(stderr.lines()) {
        if found.len() >= MAX_DENIALS {
            break;
        }
        let line = line.trim();
        if line.is_empty() || !is_denial(line) {
            continue;
        }
        let line = cut(line);
        if !found.contains(&line) {
            found.push(line);
        }
    }
    found
}

fn is_denial(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    MARKERS.iter().any(|marker| {
        if marker.starts_with('e') && !marker.contains(' ') {
            contains_word(&lower, marker)
        } else {
            lower.contains(marker)
        }
    })
}

/// Errno names only count as whole words: "eperm" must not match "keeperm".
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn cut(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_string();
    }
    let mut kept: String = line.chars().take(MAX_LINE_CHARS).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_usual_denials_in_both_streams() {
        let stderr = "touch: cannot touch '/etc/x': Permission denied\n\
                      mkdir: cannot create directory '.git/x': Read-only file system\n\
                      unshare: unshare failed: Operation not permitted\n\
                      curl: (7) Couldn't connect to server\n";
        let stdout = "ok\nPermissionError: [Errno 13] Permission denied: '/root/x'\n";
        let found = extract_denials(stdout, stderr);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0].starts_with("PermissionError"));
        assert!(found[1].contains("/etc/x"));
    }

    #[test]
    fn errno_names_match_as_words_only() {
        assert_eq!(
            extract_denials("socket: EPERM\nconnect -> ENETUNREACH\nkeepermission\n", ""),
            vec!["socket: EPERM", "connect -> ENETUNREACH"]
        );
    }

    #[test]
    fn deduplicates_and_caps() {
        let many: String = (0..100)
            .map(|i| format!("rm: cannot remove 'f{i}': Permission denied\n"))
            .collect();
        let same = "x: Permission denied\n".repeat(5);
        assert_eq!(extract_denials(&same, &same), vec!["x: Permission denied"]);
        assert_eq!(extract_denials("", &many).len(), MAX_DENIALS);
    }

    #[test]
    fn cuts_long_lines() {
        let long = format!("{} Permission denied", "a".repeat(1000));
        let found = extract_denials(&long, "");
        assert_eq!(found[0].chars().count(), MAX_LINE_CHARS + 1);
    }

    #[test]
    fn quiet_output_has_no_denials() {
        assert!(extract_denials("all tests passed\n", "warning: unused\n").is_empty());
    }
}
