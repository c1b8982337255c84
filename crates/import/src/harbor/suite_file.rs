//! The suite file `tack import harbor` writes beside the tasks it imports,
//! when the suite has none.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::HarborTask;
use super::toml_text::{in_comment, quote};
use super::write::{WriteError, io, task_id};

/// The image an image task starts from (its Dockerfile's last `FROM`, or
/// its prebuilt image), without a pinned digest: what `[images]` maps.
pub(super) fn base_image(task: &HarborTask) -> Option<String> {
    let reference = match &task.environment.dockerfile {
        Some(file) => &file.base_image.reference,
        None => task.config.docker_image.as_ref()?,
    };
    let unpinned = reference.split('@').next().unwrap_or(reference);
    (!unpinned.contains('$') && !unpinned.eq_ignore_ascii_case("scratch"))
        .then(|| unpinned.to_string())
}

/// The suite's `[images]`, commented out: where no registry is reachable,
/// each image the tasks start from needs a local stand-in.
fn images_stub(bases: &std::collections::BTreeSet<String>) -> String {
    if bases.is_empty() {
        return String::new();
    }
    let mut stub = String::from(
        "\n# Where no image registry is reachable, map each image the tasks start from to a local\n\
         # one (suites/README.md; deploy/images/debian-base builds stand-ins from Debian's\n\
         # packages), here or in ~/.config/tack/images.toml:\n# [images]\n",
    );
    for base in bases {
        // The task's words (a docker_image may hold anything): one line.
        let _ = writeln!(stub, "# {} = \"localhost/...\"", in_comment(&quote(base)));
    }
    stub
}

pub(super) fn write_suite_file(
    suite_dir: &Path,
    bases: &std::collections::BTreeSet<String>,
) -> Result<Option<PathBuf>, WriteError> {
    let path = suite_dir.join("suite.toml");
    if path.exists() {
        return Ok(None);
    }
    let name = task_id(suite_dir);
    let text = format!(
        r#"# Harbor tasks imported by `tack import harbor`. Each task's task.toml says
# what differs from running it in its container image. See suites/README.md.

[suite]
name = {name}
description = "Harbor tasks imported by tack import harbor."
trials = 1
# Recorded in every run, so runs on different interpreters are not compared unawares.
fingerprint = ["python3 --version"]

[[variants]]
name = "oracle"
description = "Runs each task's solution/solve.sh through the harness: proves every task can be passed."
model = "oracle"

# A real model (its key in OPENAI_API_KEY); add one variant per model or harness configuration:
# [[variants]]
# name = "gpt"
# model = "openai:gpt-4.1"
{images}"#,
        name = quote(&name),
        images = images_stub(bases),
    );
    std::fs::write(&path, text).map_err(io(&path))?;
    Ok(Some(path))
}
