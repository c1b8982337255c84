//! Package installs tack can reproduce from a list of names: Debian
//! packages through apt and Python packages through pip or uv.

use serde::Serialize;

/// What one simple command installs, if it is a package install.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "packages", rename_all = "snake_case")]
pub enum Install {
    /// `apt-get install` / `apt install`: package names, `=version` pins kept.
    Debian(Vec<String>),
    /// `pip`, `pip3`, `python -m pip` or `uv pip install`: requirement
    /// specifiers as written (`pytest==8.4.1`).
    Python(Vec<String>),
}

/// Why a command that looked like an install cannot be reproduced from
/// a package list.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct NotAList(pub String);

/// `Ok(None)` when `words` is not an install command at all.
pub(super) fn parse(words: &[String]) -> Result<Option<Install>, NotAList> {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["apt-get" | "apt", rest @ ..] => apt(rest),
        ["pip" | "pip3", "install", rest @ ..]
        | ["python" | "python3", "-m", "pip", "install", rest @ ..]
        | ["uv", "pip", "install", rest @ ..] => pip(rest).map(Some),
        _ => Ok(None),
    }
}

/// `apt-get update`, `apt-get clean` and removing apt's lists only change
/// caches, so a step made of them and installs reproduces exactly.
pub(super) fn is_housekeeping(words: &[String]) -> bool {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["apt-get" | "apt", verb, ..] => matches!(*verb, "update" | "clean" | "autoclean"),
        ["rm", args @ ..] => {
            let targets: Vec<&&str> = args.iter().filter(|a| !a.starts_with('-')).collect();
            !targets.is_empty() && targets.iter().all(|t| is_cache_path(t))
        }
        ["true" | ":"] => true,
        _ => false,
    }
}

fn is_cache_path(path: &str) -> bool {
    [
        "/var/lib/apt/lists",
        "/var/cache/apt",
        "/root/.cache",
        "/tmp/",
    ]
    .iter()
    .any(|cache| path.starts_with(cache))
}

fn apt(rest: &[&str]) -> Result<Option<Install>, NotAList> {
    let Some(verb_at) = rest.iter().position(|w| !w.starts_with('-')) else {
        return Ok(None);
    };
    if rest[verb_at] != "install" {
        return Ok(None);
    }
    let mut packages = Vec::new();
    for word in rest.iter().filter(|w| **w != "install") {
        if word.starts_with('-') {
            // -y, -q, --no-install-recommends and the like change how apt
            // asks and what it suggests, not which packages are named.
            continue;
        }
        if word.contains('/') || word.ends_with(".deb") {
            return Err(NotAList(format!("installs a local package file {word}")));
        }
        packages.push((*word).to_string());
    }
    Ok(Some(Install::Debian(packages)))
}

/// pip options that only change caching, output or where the environment
/// is, not what gets installed.
const PIP_IGNORED: &[&str] = &[
    "--no-cache-dir",
    "--break-system-packages",
    "--system",
    "--user",
    "-q",
    "--quiet",
    "-U",
    "--upgrade",
    "--disable-pip-version-check",
    "--no-warn-script-location",
    "--prefer-binary",
    "--progress-bar=off",
    "--root-user-action=ignore",
];

fn pip(rest: &[&str]) -> Result<Install, NotAList> {
    let mut packages = Vec::new();
    for word in rest {
        if PIP_IGNORED.contains(word) {
            continue;
        }
        if word.starts_with('-') {
            return Err(NotAList(format!(
                "pip option {word} (a requirements file, index or source tack does not read)"
            )));
        }
        if word.contains('/') || word.starts_with('.') || word.contains("://") {
            return Err(NotAList(format!("installs from a path or URL {word}")));
        }
        packages.push((*word).to_string());
    }
    Ok(Install::Python(packages))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn apt_and_pip_lists() {
        assert_eq!(
            parse(&words(
                "apt-get install -y --no-install-recommends gcc make"
            )),
            Ok(Some(Install::Debian(vec!["gcc".into(), "make".into()])))
        );
        assert_eq!(
            parse(&words(
                "python3 -m pip install --no-cache-dir pytest==8.4.1"
            )),
            Ok(Some(Install::Python(vec!["pytest==8.4.1".into()])))
        );
        assert_eq!(parse(&words("apt-get update")), Ok(None));
        assert!(parse(&words("pip install -r requirements.txt")).is_err());
        assert!(parse(&words("pip install -e .")).is_err());
        assert!(is_housekeeping(&words("rm -rf /var/lib/apt/lists/*")));
        assert!(!is_housekeeping(&words("rm -rf /opt/data")));
    }
}
