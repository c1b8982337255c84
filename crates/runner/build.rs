//! Records the commit tack is built from as `TACK_GIT_COMMIT`, for the
//! run manifest: `<12-hex>` or `<12-hex>-dirty`, `unknown` outside a git
//! checkout (a crates.io tarball, a vendored copy inside another repository).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    // A copy of this crate inside some other repository would otherwise
    // report that repository's commit: the crate's own files must be tracked.
    let tracked = git(&["ls-files", "--error-unmatch", "Cargo.toml"]).is_some();
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if tracked && !commit.is_empty() => {
            let dirty = git(&["status", "--porcelain"]).is_none_or(|status| !status.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=TACK_GIT_COMMIT={commit}");
    // HEAD moves on checkout, the branch's ref on commit, the index on
    // staging. Edits to tracked files touch none of these, so `-dirty` can
    // be stale until one of them changes; rebuilding on every edit would
    // cost more than the flag is worth.
    for path in ["HEAD", "index", "packed-refs"] {
        rerun_if_changed(git(&["rev-parse", "--git-path", path]));
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        rerun_if_changed(git(&["rev-parse", "--git-path", &reference]));
    }
}

fn rerun_if_changed(path: Option<String>) {
    let Some(path) = path else { return };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
