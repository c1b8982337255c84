//! A Harbor task as an image task (the default of `tack import harbor`):
//! its `environment/` is copied as the build context of its Dockerfile,
//! which tack builds with a real engine; `tests/` and `solution/` are
//! shown at `/tests` and `/solution` as Harbor shows them. Nothing is
//! approximated, so nothing is noted but what tack does not enforce.
//!
//! Also the refusals both import modes share: a task whose files link out
//! of it, or whose Dockerfile copies from above its build context, would
//! bring the host's files into the suite (or the image), and is refused
//! with the file or line named, before anything of it is read or copied.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::toml_text::{self, quote, write_table};
use super::write::{ConvertedTask, TaskMode, WriteError, io};
use super::{ComposeService, ComposeVolume, HarborTask, VolumeSource, write};

/// Why the task in `source` must not be read at all: links in it that
/// lead out of it (a symlinked `tests/`, `solution/` or context file).
pub(super) fn links_out(source: &Path) -> Option<String> {
    let links = match tack_image::links_leaving(source, source) {
        Ok(links) => links,
        Err(error) => return Some(format!("its files cannot be listed: {error}")),
    };
    let (link, target) = links.first()?;
    let more = match links.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "{} links to {}, outside the task{more}: refused, not followed (copy the files into \
         the task instead)",
        link.display(),
        target.display()
    ))
}

/// Why the task's build would read outside it: a `COPY`/`ADD` source above
/// a build context, or a build context (compose `context:`) outside the
/// task — of its own image or of a service's.
pub(super) fn build_escapes(task: &HarborTask) -> Option<String> {
    let env = &task.environment;
    let own = env.dockerfile.as_ref().map(|file| {
        (
            env.compose_file.as_deref().unwrap_or(&file.path),
            env.build_context.as_path(),
            file.path.clone(),
        )
    });
    let builds = own
        .into_iter()
        .chain(env.services.iter().filter_map(|service| {
            let (context, dockerfile) = service.build.as_ref()?;
            let compose = env.compose_file.as_deref()?;
            Some((compose, context.as_path(), context.join(dockerfile)))
        }));
    builds
        .into_iter()
        .find_map(|(named_in, context, dockerfile)| escape(task, named_in, context, &dockerfile))
}

fn escape(task: &HarborTask, named_in: &Path, context: &Path, dockerfile: &Path) -> Option<String> {
    let inside = |path: &Path| {
        let (Ok(path), Ok(task_dir)) = (path.canonicalize(), task.dir.canonicalize()) else {
            return false;
        };
        path.starts_with(task_dir)
    };
    if context.to_string_lossy().contains('$') {
        return Some(format!(
            "{}: its build context {} names a variable tack does not set (only Harbor's \
             CONTEXT_DIR is known): write the path out",
            named_in.display(),
            context.display()
        ));
    }
    if !inside(context) {
        return Some(format!(
            "{}: its build context {} is outside the task: refused",
            named_in.display(),
            context.display()
        ));
    }
    let text = match super::read_text(&task.dir, dockerfile) {
        Ok(text) => text,
        Err(error) => return Some(error.to_string()),
    };
    let escape = tack_image::sources_outside_context(&text)
        .into_iter()
        .next()?;
    Some(format!(
        "{} line {}: the COPY/ADD source `{}` is outside the build context: refused, not read",
        dockerfile.display(),
        escape.line,
        escape.source
    ))
}

/// Writes `task` as an image task into `root` (the staging directory of
/// the task's directory `dir`).
pub(super) fn write_image_task(
    task: &HarborTask,
    id: String,
    root: &Path,
    dir: &Path,
) -> Result<ConvertedTask, WriteError> {
    let env = &task.environment;
    let task_dir = task.dir.canonicalize().map_err(io(&task.dir))?;
    let mut contexts = Contexts {
        task_dir: &task_dir,
        root,
        copied: Vec::new(),
    };
    let image = match (&env.dockerfile, &task.config.docker_image) {
        (Some(file), _) => {
            let (context, dockerfile) = contexts.place(&env.build_context, &file.path)?;
            Image::Built {
                context,
                dockerfile,
            }
        }
        (None, Some(reference)) => Image::Prebuilt(reference),
        // HarborTask::load refuses a task with neither.
        (None, None) => {
            let path = task.dir.join("environment/Dockerfile");
            return Err(io(&path)(std::io::ErrorKind::NotFound.into()));
        }
    };
    let mut services = Vec::new();
    for service in &env.services {
        let build = match &service.build {
            Some((context, dockerfile)) => {
                Some(contexts.place(context, &context.join(dockerfile))?)
            }
            None => None,
        };
        services.push((service, build));
    }
    for path in mounted_paths(task) {
        write::copy(
            &task_dir.join(path),
            &root.join(MOUNTS).join(path),
            &task_dir,
        )?;
    }
    write::copy(&task.tests.dir, &root.join("checks"), &task.dir)?;
    if let Some(solution) = &task.solution {
        write::copy(&solution.dir, &root.join("solution"), &task.dir)?;
    }
    let engine = engine_reason(task);
    let notes = notes(task, engine.is_some());
    let mut text = task_toml(task, &image, &notes, engine.as_deref());
    for (service, build) in &services {
        service_table(&mut text, service, build.as_ref());
    }
    let task_file = root.join("task.toml");
    std::fs::write(&task_file, text).map_err(io(&task_file))?;
    Ok(ConvertedTask {
        source: task.dir.clone(),
        task: id,
        dir: dir.to_path_buf(),
        mode: TaskMode::Image,
        engine: engine.is_some(),
        container_reasons: Vec::new(),
        python: Vec::new(),
        debian: Vec::new(),
        notes,
        unknown_keys: task.config.unknown_keys.clone(),
    })
}

/// Where the imported task keeps the files of the task its containers
/// mount, each at its path in the Harbor task.
const MOUNTS: &str = "mounts";

/// The task's files its containers mount, relative to the task.
fn mounted_paths(task: &HarborTask) -> Vec<&Path> {
    let env = &task.environment;
    let mut paths: Vec<&Path> = (env.volumes.iter())
        .chain(env.services.iter().flat_map(|s| &s.volumes))
        .filter_map(|volume| match &volume.source {
            VolumeSource::Task(path) => Some(path.as_path()),
            VolumeSource::Named(_) => None,
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// `volumes = [...]` in tack's spelling, the task's files as the import
/// placed them.
fn volumes_line(out: &mut String, volumes: &[ComposeVolume]) {
    if volumes.is_empty() {
        return;
    }
    let items: Vec<String> = volumes
        .iter()
        .map(|volume| {
            let source = match &volume.source {
                VolumeSource::Named(name) => format!("name = {}", quote(name)),
                VolumeSource::Task(path) => format!(
                    "path = {}",
                    quote(&Path::new(MOUNTS).join(path).display().to_string())
                ),
            };
            let read_only = if volume.read_only {
                ", read_only = true"
            } else {
                ""
            };
            format!("{{ {source}, at = {}{read_only} }}", quote(&volume.at))
        })
        .collect();
    let _ = writeln!(out, "volumes = [{}]", items.join(", "));
}

/// Where an image task's image comes from.
enum Image<'a> {
    /// Built from `dockerfile` in `context`, both as copied into the
    /// imported task.
    Built {
        context: PathBuf,
        dockerfile: PathBuf,
    },
    /// Harbor's `docker_image`, for a task without a Dockerfile.
    Prebuilt(&'a str),
}

/// The build contexts copied into the imported task so far.
struct Contexts<'a> {
    task_dir: &'a Path,
    root: &'a Path,
    copied: Vec<PathBuf>,
}

impl Contexts<'_> {
    /// Copies the build context `context` of the Dockerfile `dockerfile`
    /// (unless an earlier copy holds it) and returns where both are in the
    /// imported task. The context keeps its place in the task
    /// (`environment/`, or the task itself for a compose `context: ..`), so
    /// the Dockerfile's own path inside it stays right.
    fn place(
        &mut self,
        context: &Path,
        dockerfile: &Path,
    ) -> Result<(PathBuf, PathBuf), WriteError> {
        let context = context.canonicalize().map_err(io(context))?;
        let context_rel = context
            .strip_prefix(self.task_dir)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let copied = if context_rel.as_os_str().is_empty() {
            PathBuf::from("environment")
        } else {
            context_rel
        };
        if !self.copied.iter().any(|done| copied.starts_with(done)) {
            copy_context(&context, &self.root.join(&copied), self.task_dir)?;
            self.copied.push(copied.clone());
        }
        let dockerfile = dockerfile.canonicalize().map_err(io(dockerfile))?;
        let dockerfile_rel = copied.join(
            dockerfile
                .strip_prefix(&context)
                .unwrap_or(Path::new("Dockerfile")),
        );
        Ok((copied, dockerfile_rel))
    }
}

/// `[[environment.services]]` for one of the compose file's services.
fn service_table(out: &mut String, service: &ComposeService, build: Option<&(PathBuf, PathBuf)>) {
    let _ = writeln!(
        out,
        "\n# The compose file's service `{}`, started beside the trial's container.",
        toml_text::in_comment(&service.name)
    );
    if !service.unreproduced.is_empty() {
        let _ = writeln!(
            out,
            "# Not reproduced: {}.",
            toml_text::in_comment(&service.unreproduced.join(", "))
        );
    }
    let _ = writeln!(
        out,
        "[[environment.services]]\nname = {}",
        quote(&service.name)
    );
    match (build, &service.image) {
        (Some((context, dockerfile)), _) => {
            let _ = writeln!(
                out,
                "dockerfile = {}",
                quote(&dockerfile.display().to_string())
            );
            if dockerfile.parent() != Some(context.as_path()) {
                let _ = writeln!(out, "context = {}", quote(&context.display().to_string()));
            }
        }
        (None, Some(image)) => {
            let _ = writeln!(out, "image = {}", quote(image));
        }
        (None, None) => {}
    }
    for (key, words) in [
        ("entrypoint", &service.entrypoint),
        ("command", &service.command),
    ] {
        if let Some(words) = words {
            let words: Vec<String> = words.iter().map(|w| quote(w)).collect();
            let _ = writeln!(out, "{key} = [{}]", words.join(", "));
        }
    }
    if let Some(user) = &service.user {
        let _ = writeln!(out, "user = {}", quote(user));
    }
    if let Some(wait) = service.wait {
        let _ = writeln!(out, "wait = \"{}\"", wait.as_str());
    }
    volumes_line(out, &service.volumes);
    write_table(out, "env", &service.env);
    if let Some(health) = &service.healthcheck {
        let _ = writeln!(out, "[environment.services.healthcheck]");
        health_fields(out, health);
    }
}

/// Copies the build context; when it is the task itself (`context: ..`),
/// without the task's tests and solution, which the image must not hold.
fn copy_context(context: &Path, to: &Path, task_dir: &Path) -> Result<(), WriteError> {
    if context != task_dir {
        return write::copy(context, to, task_dir);
    }
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(context).map_err(io(context))? {
        let entry = entry.map_err(io(context))?;
        let name = entry.file_name();
        if name == "tests" || name == "solution" {
            continue;
        }
        write::copy(&entry.path(), &to.join(name), task_dir)?;
    }
    Ok(())
}

/// Why the task needs engine mode: its image starts services (an
/// `ENTRYPOINT`), it waits for one to be healthy, or its solution starts
/// one the tests then reach; tack's sandbox runs none of them.
fn engine_reason(task: &HarborTask) -> Option<String> {
    let ignored = task
        .environment
        .dockerfile
        .iter()
        .flat_map(|file| &file.ignored);
    let entrypoint = ignored.into_iter().find(|i| {
        i.text
            .split_whitespace()
            .next()
            .is_some_and(|word| word.eq_ignore_ascii_case("ENTRYPOINT"))
    });
    let services = &task.environment.services;
    let volumes = &task.environment.volumes;
    if !volumes.is_empty() && services.is_empty() {
        let places: Vec<&str> = volumes.iter().map(|v| v.at.as_str()).collect();
        return Some(format!(
            "It mounts volumes in its container ({})",
            places.join(", ")
        ));
    }
    if !services.is_empty() {
        let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
        return Some(format!(
            "It starts services beside its own container ({})",
            names.join(", ")
        ));
    }
    // The tests reach what the solution left running (a web server, sshd);
    // under tack's sandbox a command's processes end with it.
    let daemon = (task.solution.as_ref()).and_then(|solution| solution.script.daemons.first());
    match (entrypoint, &task.config.healthcheck, daemon) {
        (Some(line), _, _) => Some(format!(
            "Its Dockerfile has an ENTRYPOINT (line {})",
            line.line
        )),
        (None, Some(_), _) => Some("It has a health check".to_string()),
        (None, None, Some(start)) => Some(format!(
            "Its solution leaves a process running for the tests (solution/solve.sh line {}: `{}`)",
            start.line, start.text
        )),
        (None, None, None) => None,
    }
}

/// `[environment.healthcheck]` in tack's spelling.
fn healthcheck_table(out: &mut String, health: &super::config::Healthcheck) {
    out.push_str("\n[environment.healthcheck]\n");
    health_fields(out, health);
}

/// A health check's fields in tack's spelling.
fn health_fields(out: &mut String, health: &super::config::Healthcheck) {
    let _ = writeln!(out, "command = {}", quote(&health.command));
    for (name, value) in [
        ("interval_secs", health.interval_sec),
        ("timeout_secs", health.timeout_sec),
        ("start_period_secs", health.start_period_sec),
        ("start_interval_secs", health.start_interval_sec),
    ] {
        if let Some(value) = value {
            let _ = writeln!(out, "{name} = {value:?}");
        }
    }
    if let Some(retries) = health.retries {
        let _ = writeln!(out, "retries = {retries}");
    }
}

/// What tack does not enforce of the task's settings (`engine`: it runs in
/// engine mode).
fn notes(task: &HarborTask, engine: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let resources = &task.config.resources;
    if !engine && (resources.cpus.is_some() || resources.memory_mb.is_some()) {
        notes.push(
            "cpus and memory_mb hold in engine mode (the container's --cpus and --memory); under \
             tack's sandbox only [limits] memory_mb, each process's address space, is enforced"
                .to_string(),
        );
    }
    write::unenforced_notes(task, &mut notes);
    let unmounted = &task.environment.unreproduced_volumes;
    if !unmounted.is_empty() {
        notes.push(format!(
            "the agent's container: not reproduced: {}",
            unmounted.join(", ")
        ));
    }
    for service in &task.environment.services {
        if !service.unreproduced.is_empty() {
            notes.push(format!(
                "service `{}`: not reproduced: {}",
                service.name,
                service.unreproduced.join(", ")
            ));
        }
    }
    if !task.config.network.allow_internet {
        notes.push(format!(
            "no network for the task's checks ({}); an agent's network is its variant's sandbox",
            task.config.network.raw.as_deref().unwrap_or("default")
        ));
    }
    notes
}

/// The task.toml's opening comment: where the task came from, how its
/// trials run, and what differs from Harbor's run of it.
fn header(task: &HarborTask, image: &Image, notes: &[String], in_engine: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Imported by `tack import harbor` from {} (Harbor task `{}`):\n\
         # {}, each trial {}.",
        toml_text::in_comment(&task.dir.display().to_string()),
        toml_text::in_comment(&task.name),
        match image {
            Image::Built { .. } => "built from its Dockerfile".to_string(),
            Image::Prebuilt(reference) => format!(
                "run from its prebuilt image {}",
                toml_text::in_comment(reference)
            ),
        },
        if in_engine {
            "in a container the engine starts"
        } else {
            "in the image's filesystem"
        }
    );
    for note in notes {
        let _ = writeln!(out, "#   - {}", toml_text::in_comment(note));
    }
    write::unknown_keys_note(&mut out, task);
    out.push('\n');
    out
}

/// The task.toml of an image task; `engine` says why it runs in engine
/// mode, when it does.
fn task_toml(task: &HarborTask, image: &Image, notes: &[String], engine: Option<&str>) -> String {
    let mut out = header(task, image, notes, engine.is_some());
    let _ = writeln!(out, "instruction = {}", quote(&task.instruction));
    out.push_str(write::NOTHING_PROTECTED);
    out.push_str("tags = [\"harbor\"]\n\n[environment]\n");
    match image {
        Image::Built {
            context,
            dockerfile,
        } => {
            let _ = writeln!(
                out,
                "dockerfile = {}",
                quote(&dockerfile.display().to_string())
            );
            if context != Path::new("environment") || dockerfile.parent() != Some(context) {
                let _ = writeln!(out, "context = {}", quote(&context.display().to_string()));
            }
        }
        Image::Prebuilt(reference) => {
            let _ = writeln!(
                out,
                "# Harbor's docker_image. Where no registry is reachable, the suite's [images]\n\
                 # maps it to a local image. The agent works in the image's WORKDIR; if the\n\
                 # image sets none, name one here: workdir = \"/app\".\nimage = {}",
                quote(reference)
            );
        }
    }
    if let Some(workdir) = &task.config.workdir {
        let _ = writeln!(
            out,
            "workdir = {}   # Harbor's [environment] workdir, over the image's WORKDIR",
            quote(workdir)
        );
    }
    if let Some(user) = &task.config.agent_user {
        let _ = writeln!(
            out,
            "user = {}   # Harbor's [agent] user: the agent and the solution run as it",
            quote(user)
        );
    }
    write_table(&mut out, "env", &task.config.environment_env);
    let resources = &task.config.resources;
    if let Some(cpus) = resources.cpus {
        let _ = writeln!(out, "cpus = {cpus}   # the container's, in engine mode");
    }
    if let Some(memory) = resources.memory_mb {
        let _ = writeln!(
            out,
            "memory_mb = {memory}   # the container's, in engine mode"
        );
    }
    volumes_line(&mut out, &task.environment.volumes);
    if let Some(why) = engine {
        // A comment line: a command quoted in the reason may span lines.
        let why = toml_text::in_comment(why);
        let _ = writeln!(
            out,
            "# {why}: it runs in a container the engine starts.\nmode = \"engine\""
        );
    }
    let scripts =
        std::iter::once(&task.tests.script).chain(task.solution.as_ref().map(|s| &s.script));
    if scripts.clone().any(|s| s.needs.uv_installer.is_some()) {
        out.push_str(
            "# The scripts fetch the uv installer from astral.sh; where that is out of reach, a\n\
             # stand-in installs the same uv from the package index.\nstand_ins = true\n",
        );
    }
    if let Some(health) = &task.config.healthcheck {
        healthcheck_table(&mut out, health);
    }
    if let Some(wall) = task.config.timeouts.agent.map(toml_text::whole_secs) {
        let _ = writeln!(out, "\n[limits]\nmax_wall_secs = {wall}");
    }
    write::check(&mut out, task, task.config.network.allow_internet);
    write::solution(&mut out, task);
    out
}
