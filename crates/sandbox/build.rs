//! The sandbox crate's build id: a hash of its sources and version. tack
//! uses a `tack-sandbox-init` found beside it only when that binary reports
//! the same id (a stale one from an earlier build would not understand the
//! init's arguments); see `session::init_program`.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut sources = Vec::new();
    files(Path::new("src"), &mut sources);
    sources.sort();
    let mut hasher = DefaultHasher::new();
    std::env::var("CARGO_PKG_VERSION")
        .unwrap_or_default()
        .hash(&mut hasher);
    for path in sources {
        path.hash(&mut hasher);
        std::fs::read(&path).unwrap_or_default().hash(&mut hasher);
    }
    println!(
        "cargo:rustc-env=TACK_SANDBOX_BUILD={:016x}",
        hasher.finish()
    );
}
