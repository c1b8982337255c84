//! The verdict on one task: what would force tack to run it in its
//! container image, what tack must provide on the host instead, and where
//! the task's files go.

use std::path::PathBuf;

use serde::Serialize;

use super::scripts::Script;
use super::{HarborTask, RunCommand};

/// What tack can and cannot reproduce of a task.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Assessment {
    /// Why the task needs its image (`requires = "container"`); empty when
    /// tack can run it on the host.
    pub container_reasons: Vec<String>,
    /// Where the host's tools would stand in for different ones.
    pub toolchain_differences: Vec<String>,
    pub provisioning: Provisioning,
    /// Files of the build context and where the image has them.
    pub placements: Vec<Placement>,
    /// Facts a suite writer must act on that force nothing.
    pub notes: Vec<String>,
}

/// What the host must provide for the task to run without its image.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Provisioning {
    /// Installed by the Dockerfile, then by the scripts at run time.
    pub debian_packages: Vec<String>,
    /// Installed by the Dockerfile or by a script's `pip install`.
    pub python_packages: Vec<String>,
    /// The Python version of a `python:` base image.
    pub python_version: Option<String>,
    /// A script fetches uv or runs `uvx` / `uv run`.
    pub uv: bool,
    /// `--with` pins of those runs.
    pub uv_with: Vec<String>,
    /// `-p` / `--python` of those runs.
    pub uv_python: Option<String>,
}

/// A `COPY`/`ADD` source on the host and its absolute path in the image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    pub source: PathBuf,
    pub at: String,
    pub chown: Option<String>,
    /// Outside the WORKDIR, so it needs its own place in the sandbox.
    pub outside_workdir: bool,
}

pub(super) fn assess(task: &HarborTask) -> Assessment {
    let mut out = Assessment::default();
    dockerfile_findings(task, &mut out);
    if !task.environment.services.is_empty() {
        let names: Vec<&str> = task
            .environment
            .services
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        out.container_reasons.push(format!(
            "docker-compose.yaml starts services beside the agent's container ({}); only an \
             engine runs them",
            names.join(", ")
        ));
    }
    let volumes = &task.environment.volumes;
    if !volumes.is_empty() {
        let places: Vec<&str> = volumes.iter().map(|v| v.at.as_str()).collect();
        out.container_reasons.push(format!(
            "docker-compose.yaml mounts volumes in the agent's container ({}); only an engine \
             mounts them",
            places.join(", ")
        ));
    }
    let mut scripts = vec![("tests/test.sh", &task.tests.script)];
    if let Some(solution) = &task.solution {
        scripts.push(("solution/solve.sh", &solution.script));
    }
    for (name, script) in scripts {
        script_findings(name, script, &mut out);
    }
    if !task.config.network.allow_internet {
        out.notes.push(format!(
            "the agent has no internet ({})",
            task.config.network.raw.as_deref().unwrap_or("default")
        ));
    }
    out
}

fn dockerfile_findings(task: &HarborTask, out: &mut Assessment) {
    let Some(file) = &task.environment.dockerfile else {
        // What a prebuilt image holds is not known before it is pulled.
        out.container_reasons.push(format!(
            "it has no Dockerfile: it runs from the prebuilt image {} (docker_image), whose \
             contents only the image holds",
            task.config
                .docker_image
                .as_deref()
                .unwrap_or("named in task.toml")
        ));
        return;
    };
    let image = &file.base_image;
    if file.stages > 1 {
        out.container_reasons.push(format!(
            "Dockerfile has {} build stages; tack reproduces only a single stage",
            file.stages
        ));
    }
    if image.is_stock() {
        out.provisioning.python_version = image.python_version().map(str::to_string);
    } else {
        out.toolchain_differences.push(format!(
            "Dockerfile line {}: base image {} is not a stock Debian, Ubuntu or python image; \
             the host's tools stand in for its own",
            image.line, image.reference
        ));
    }
    for step in &file.runs {
        if let Some((command, reason)) = step.unreproducible() {
            out.container_reasons.push(format!(
                "Dockerfile line {}: `RUN {}`: `{command}` {reason}",
                step.line, step.text
            ));
        }
        for command in &step.commands {
            if let RunCommand::Directories { paths } = command {
                out.notes.push(format!(
                    "Dockerfile line {}: creates {}",
                    step.line,
                    paths.join(", ")
                ));
            }
        }
    }
    extend_unique(
        &mut out.provisioning.debian_packages,
        file.debian_packages(),
    );
    extend_unique(
        &mut out.provisioning.python_packages,
        file.python_packages(),
    );
    match (&task.config.workdir, &file.workdir) {
        (Some(dir), _) => out
            .notes
            .push(format!("the agent works in {dir} ([environment] workdir)")),
        (None, Some(dir)) => out
            .notes
            .push(format!("the agent works in {dir} (WORKDIR)")),
        (None, None) => out.notes.push(
            "the Dockerfile sets no WORKDIR: the base image's applies (`/` for stock images)"
                .to_string(),
        ),
    }
    copy_findings(task, file, out);
    if let Some(user) = &file.user {
        out.notes.push(format!("the image runs as USER {user}"));
    }
}

/// Each local COPY/ADD source becomes a placement; what tack cannot place
/// (another stage, a URL, an archive to extract) is a container reason.
fn copy_findings(task: &HarborTask, file: &super::Dockerfile, out: &mut Assessment) {
    let workdir = task.workdir();
    for copy in &file.copies {
        let at = |what: &str| format!("Dockerfile line {}: {} {what}", copy.line, copy.instruction);
        if let Some(stage) = &copy.from_stage {
            out.container_reasons
                .push(at(&format!("--from={stage} copies out of another image")));
            continue;
        }
        for source in &copy.sources {
            if source.contains("://") {
                out.container_reasons
                    .push(at(&format!("downloads {source}")));
                continue;
            }
            if copy.instruction == "ADD" && is_archive(source) {
                out.container_reasons
                    .push(at(&format!("extracts the archive {source}")));
                continue;
            }
            // Docker reads every source in the build context, an absolute
            // one too (`COPY /x /app` copies <context>/x): joined as it is,
            // `/x` would name the host's /x and copy it into the suite.
            let host = task
                .environment
                .build_context
                .join(source.trim_start_matches('/'));
            if !host.exists() && !source.contains(['*', '?']) {
                out.notes
                    .push(at(&format!("source {source} is not in the build context")));
            }
            let outside = workdir.is_none_or(|dir| !within(&copy.destination, dir));
            if outside {
                out.notes.push(at(&format!(
                    "places {source} at {}, outside the WORKDIR",
                    copy.destination
                )));
            }
            if !copy.workdir_known {
                out.notes.push(at(&format!(
                    "resolves {} against `/` because no WORKDIR was set yet",
                    copy.destination
                )));
            }
            out.placements.push(Placement {
                source: host,
                at: copy.destination.clone(),
                chown: copy.chown.clone(),
                outside_workdir: outside,
            });
        }
    }
}

fn script_findings(name: &str, script: &Script, out: &mut Assessment) {
    for command in &script.root_commands {
        out.container_reasons.push(format!(
            "{name} line {}: `{}` needs root, and tack runs scripts unprivileged",
            command.line, command.text
        ));
    }
    for install in &script.needs.other_installs {
        out.container_reasons.push(format!(
            "{name} line {}: `{}` installs what tack cannot provide from a package list",
            install.line, install.text
        ));
    }
    let needs = &script.needs;
    if !needs.debian_packages.is_empty() {
        out.notes.push(format!(
            "{name} runs apt-get install {} (as root) at run time; tack provides them beforehand",
            needs.debian_packages.join(" ")
        ));
    }
    extend_unique(
        &mut out.provisioning.debian_packages,
        needs.debian_packages.iter().map(String::as_str),
    );
    extend_unique(
        &mut out.provisioning.python_packages,
        needs.python_packages.iter().map(String::as_str),
    );
    if needs.uv_installer.is_some() || !needs.uv_runs.is_empty() {
        out.provisioning.uv = true;
    }
    for run in &needs.uv_runs {
        extend_unique(
            &mut out.provisioning.uv_with,
            run.with.iter().map(String::as_str),
        );
        if run.python.is_some() {
            out.provisioning.uv_python.clone_from(&run.python);
        }
    }
    for url in &needs.downloads {
        let note = format!("{name} downloads {url} at run time");
        // A script may fetch one URL twice (a retry loop).
        if !out.notes.contains(&note) {
            out.notes.push(note);
        }
    }
}

fn extend_unique<'a>(list: &mut Vec<String>, items: impl IntoIterator<Item = &'a str>) {
    for item in items {
        if !list.iter().any(|have| have == item) {
            list.push(item.to_string());
        }
    }
}

fn is_archive(source: &str) -> bool {
    [
        ".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst",
    ]
    .iter()
    .any(|ext| source.ends_with(ext))
}

/// Whether absolute `path` is `dir` or under it.
pub(super) fn within(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    dir.is_empty() || path == dir || path.starts_with(&format!("{dir}/"))
}
