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

/// The markers of a refused file access (`EACCES`): what Landlock's path
/// rules answer, and what a file's own permissions answer too.
const ACCESS_MARKERS: &[&str] = &["permission denied", "eacces"];

/// What of a command's walls can refuse an operation, and so which of the
/// errors it printed can be theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walls {
    /// None: unconfined, every error is the system's own.
    None,
    /// Seccomp, read-only mounts and no network, but no path rules: an
    /// image's root is granted whole (and an engine's container has its own
    /// users), so a "Permission denied" there is a file's own permissions,
    /// as it would be in Docker.
    NoPathRules,
    /// Landlock's path (or TCP port) rules too: a host task under
    /// `strict`, or any task whose network is narrowed to ports.
    PathRules,
}

impl Walls {
    /// The walls of `confinement`.
    pub fn of(confinement: &crate::Confinement) -> Walls {
        // Landlock's TCP port rules answer EACCES too.
        let port_rules = confinement.tcp_connect.is_some();
        if confinement.container.is_some() || (confinement.image.is_some() && !port_rules) {
            Walls::NoPathRules
        } else if confinement.is_confined() {
            Walls::PathRules
        } else {
            Walls::None
        }
    }
}

/// The lines of `stdout` then `stderr` that report an operation `walls`
/// could have refused, trimmed, deduplicated in first-seen order, at most
/// [`MAX_DENIALS`]. The errors are told by their words alone: a tool's own
/// "Permission denied" under path rules is counted too.
pub fn extract_denials(stdout: &str, stderr: &str, walls: Walls) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    if walls == Walls::None {
        return found;
    }
    for line in stdout.lines().chain(stderr.lines()) {
        if found.len() >= MAX_DENIALS {
            break;
        }
        let line = line.trim();
        if line.is_empty() || !is_denial(line, walls) {
            continue;
        }
        let line = cut(line);
        if !found.contains(&line) {
            found.push(line);
        }
    }
    found
}

fn is_denial(line: &str, walls: Walls) -> bool {
    let lower = line.to_ascii_lowercase();
    let markers = MARKERS
        .iter()
        .filter(|m| walls == Walls::PathRules || !ACCESS_MARKERS.contains(m));
    markers.into_iter().any(|marker| {
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
        let found = extract_denials(stdout, stderr, Walls::PathRules);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0].starts_with("PermissionError"));
        assert!(found[1].contains("/etc/x"));
    }

    #[test]
    fn errno_names_match_as_words_only() {
        assert_eq!(
            extract_denials(
                "socket: EPERM\nconnect -> ENETUNREACH\nkeepermission\n",
                "",
                Walls::PathRules
            ),
            vec!["socket: EPERM", "connect -> ENETUNREACH"]
        );
    }

    #[test]
    fn deduplicates_and_caps() {
        let many: String = (0..100)
            .map(|i| format!("rm: cannot remove 'f{i}': Permission denied\n"))
            .collect();
        let same = "x: Permission denied\n".repeat(5);
        assert_eq!(
            extract_denials(&same, &same, Walls::PathRules),
            vec!["x: Permission denied"]
        );
        assert_eq!(
            extract_denials("", &many, Walls::PathRules).len(),
            MAX_DENIALS
        );
    }

    #[test]
    fn cuts_long_lines() {
        let long = format!("{} Permission denied", "a".repeat(1000));
        let found = extract_denials(&long, "", Walls::PathRules);
        assert_eq!(found[0].chars().count(), MAX_LINE_CHARS + 1);
    }

    #[test]
    fn without_path_rules_a_files_own_permissions_are_not_the_sandboxs() {
        let stderr = "sed: couldn't open temporary file /app/sedW3Gbzr: Permission denied\n\
                      mount: /mnt: Operation not permitted\n";
        assert_eq!(
            extract_denials("", stderr, Walls::NoPathRules),
            vec!["mount: /mnt: Operation not permitted"]
        );
        assert!(extract_denials("", stderr, Walls::None).is_empty());
    }

    #[test]
    fn quiet_output_has_no_denials() {
        assert!(
            extract_denials("all tests passed\n", "warning: unused\n", Walls::PathRules).is_empty()
        );
    }
}
