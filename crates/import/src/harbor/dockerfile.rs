//! What a task's Dockerfile builds, instruction by instruction, and which
//! of its steps tack can reproduce without building the image.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::HarborError;
use super::install::{self, Install, NotAList};
use super::shell::{self, LogicalLine};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dockerfile {
    pub path: PathBuf,
    /// The image of the final stage.
    pub base_image: BaseImage,
    /// Build stages (`FROM` instructions); more than one is a multi-stage build.
    pub stages: usize,
    /// The last `WORKDIR`, made absolute; `None` when the Dockerfile sets
    /// none, so the base image's applies (`/` for the stock Debian, Ubuntu
    /// and python images). tack does not assume `/app` there.
    pub workdir: Option<String>,
    /// `ENV` pairs in order; a later pair for the same name overrides.
    pub env: Vec<(String, String)>,
    pub copies: Vec<FileCopy>,
    pub runs: Vec<RunStep>,
    /// The last `USER`, when the image does not run as root.
    pub user: Option<String>,
    pub cmd: Option<String>,
    /// Instructions with no bearing on the files or tools of the
    /// environment (`EXPOSE`, `LABEL`, `ARG`, `ENTRYPOINT`, ...).
    pub ignored: Vec<Instruction>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instruction {
    pub line: usize,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaseImage {
    pub line: usize,
    /// As written, e.g. `python:3.13-slim-bookworm@sha256:9d7f…`.
    pub reference: String,
    /// The repository without registry or `library/`: `python`, `ubuntu`.
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl BaseImage {
    fn parse(line: usize, reference: &str) -> BaseImage {
        let (without_digest, digest) = match reference.split_once('@') {
            Some((image, digest)) => (image, Some(digest.to_string())),
            None => (reference, None),
        };
        // A colon after the last slash is a tag; before it, a registry port.
        let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match without_digest[last_slash..].split_once(':') {
            Some((_, tag)) => (
                &without_digest[..without_digest.len() - tag.len() - 1],
                Some(tag.to_string()),
            ),
            None => (without_digest, None),
        };
        let name = repository
            .trim_start_matches("docker.io/")
            .trim_start_matches("library/")
            .to_string();
        BaseImage {
            line,
            reference: reference.to_string(),
            name,
            tag,
            digest,
        }
    }

    /// A stock Debian, Ubuntu or (Debian-based) python image, whose tools
    /// are the ones a Debian-like host provides from packages.
    pub fn is_stock(&self) -> bool {
        let tag = self.tag.as_deref().unwrap_or("latest");
        match self.name.as_str() {
            "debian" | "ubuntu" => true,
            "python" => !tag.contains("alpine") && !tag.contains("windows"),
            _ => false,
        }
    }

    /// The Python version a `python:` image provides (`3.13` for
    /// `python:3.13-slim-bookworm`).
    pub fn python_version(&self) -> Option<&str> {
        if self.name != "python" {
            return None;
        }
        let version = self.tag.as_deref()?.split('-').next()?;
        version
            .starts_with(|c: char| c.is_ascii_digit())
            .then_some(version)
    }
}

/// A `COPY` or `ADD` from the build context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileCopy {
    pub line: usize,
    /// `COPY` or `ADD`.
    pub instruction: String,
    /// Paths relative to the build context, as written.
    pub sources: Vec<String>,
    /// Absolute: a relative destination is resolved against the WORKDIR in
    /// effect at this line. A trailing `/` (copy into) is kept.
    pub destination: String,
    /// `false` when the destination was relative and no WORKDIR was set
    /// yet, so it was resolved against `/`, the stock images' default.
    pub workdir_known: bool,
    pub chown: Option<String>,
    /// `--from=STAGE`: copies out of another image, not the context.
    pub from_stage: Option<String>,
}

/// One `RUN` instruction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStep {
    pub line: usize,
    pub text: String,
    pub commands: Vec<RunCommand>,
}

/// One simple command of a `RUN` step's command list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunCommand {
    Install {
        install: Install,
    },
    /// `mkdir` of absolute paths.
    Directories {
        paths: Vec<String>,
    },
    /// Changes only caches or the shell's state (`apt-get update`, `cd`).
    Housekeeping {
        command: String,
    },
    Unreproducible {
        command: String,
        reason: String,
    },
}

impl RunStep {
    /// The first command tack cannot reproduce, which makes the whole step
    /// unreproducible, with why.
    pub fn unreproducible(&self) -> Option<(&str, &str)> {
        self.commands.iter().find_map(|c| match c {
            RunCommand::Unreproducible { command, reason } => {
                Some((command.as_str(), reason.as_str()))
            }
            _ => None,
        })
    }
}

impl Dockerfile {
    /// Debian packages the image installs, in order, from all steps.
    pub fn debian_packages(&self) -> Vec<&str> {
        self.installs(|i| match i {
            Install::Debian(p) => Some(p),
            Install::Python(_) => None,
        })
    }

    /// Python requirement specifiers the image installs, in order.
    pub fn python_packages(&self) -> Vec<&str> {
        self.installs(|i| match i {
            Install::Python(p) => Some(p),
            Install::Debian(_) => None,
        })
    }

    fn installs(&self, pick: impl Fn(&Install) -> Option<&Vec<String>>) -> Vec<&str> {
        let commands = self.runs.iter().flat_map(|r| &r.commands);
        commands
            .filter_map(|c| match c {
                RunCommand::Install { install } => pick(install),
                _ => None,
            })
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// Reads and analyses the Dockerfile at `path`, a file of the task in
/// `task_dir`.
pub(super) fn load(task_dir: &Path, path: &Path) -> Result<Dockerfile, HarborError> {
    let text = super::read_text(task_dir, path)?;
    parse(path, &text)
}

fn parse(path: &Path, text: &str) -> Result<Dockerfile, HarborError> {
    let syntax = |line: usize, message: String| HarborError::Dockerfile {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut base_image = None;
    let mut stages = 0;
    let mut workdir: Option<String> = None;
    let mut file = Dockerfile {
        path: path.to_path_buf(),
        base_image: BaseImage::parse(0, ""),
        stages: 0,
        workdir: None,
        env: Vec::new(),
        copies: Vec::new(),
        runs: Vec::new(),
        user: None,
        cmd: None,
        ignored: Vec::new(),
    };
    for LogicalLine {
        number,
        text: line,
        heredoc,
    } in shell::logical_lines(text)
    {
        let (keyword, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let args = args.trim();
        match keyword.to_ascii_uppercase().as_str() {
            "FROM" => {
                let image = shell::words(args)
                    .into_iter()
                    .find(|w| !w.starts_with("--"))
                    .ok_or_else(|| syntax(number, "FROM names no image".into()))?;
                base_image = Some(BaseImage::parse(number, &image));
                stages += 1;
                // Each stage starts from its image's WORKDIR, not the last stage's.
                workdir = None;
            }
            _ if base_image.is_none() && !keyword.eq_ignore_ascii_case("ARG") => {
                return Err(syntax(
                    number,
                    format!("{keyword} comes before any FROM; a Dockerfile must start with FROM"),
                ));
            }
            "WORKDIR" => workdir = Some(resolve(workdir.as_deref(), args)),
            "ENV" => file.env.extend(env_pairs(args)),
            "COPY" | "ADD" => file
                .copies
                .push(copy(number, keyword, args, workdir.as_deref())),
            "RUN" => file.runs.push(run(number, args, &heredoc)),
            "USER" => file.user = Some(args.to_string()),
            "CMD" => file.cmd = Some(args.to_string()),
            _ => file.ignored.push(Instruction {
                line: number,
                text: line.clone(),
            }),
        }
    }
    file.base_image = base_image.ok_or_else(|| HarborError::NoFrom {
        path: path.to_path_buf(),
    })?;
    file.stages = stages;
    file.workdir = workdir;
    Ok(file)
}

/// `path` made absolute against `workdir` (`/` when unknown), and clean:
/// `.` and `..` resolved as Docker resolves them, `..` stopping at `/`
/// (`COPY x /app/../../etc/y` writes `/etc/y`). What the import writes
/// is placed by this path, so it never climbs out of where it is put.
fn resolve(workdir: Option<&str>, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", workdir.unwrap_or("/"))
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    // A trailing `/` (or `.`) says "into this directory": kept.
    let into = joined.ends_with('/') || joined.ends_with("/.") || joined.ends_with("/..");
    let mut clean = format!("/{}", parts.join("/"));
    if into && clean != "/" {
        clean.push('/');
    }
    clean
}

fn env_pairs(args: &str) -> Vec<(String, String)> {
    let words = shell::words(args);
    match words.first() {
        Some(first) if !first.contains('=') => {
            // The legacy form `ENV NAME value with spaces`.
            let value = args[first.len()..].trim().to_string();
            vec![(first.clone(), value)]
        }
        _ => words
            .iter()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn copy(line: usize, keyword: &str, args: &str, workdir: Option<&str>) -> FileCopy {
    let mut words = if args.starts_with('[') {
        serde_json::from_str::<Vec<String>>(args).unwrap_or_else(|_| shell::words(args))
    } else {
        shell::words(args)
    };
    let flags = words.iter().take_while(|w| w.starts_with("--")).count();
    let flag = |name: &str| {
        words[..flags]
            .iter()
            .find_map(|w| w.strip_prefix(name).map(str::to_string))
    };
    let chown = flag("--chown=");
    let from_stage = flag("--from=");
    let mut paths = words.split_off(flags);
    let destination = paths.pop().unwrap_or_default();
    FileCopy {
        line,
        instruction: keyword.to_ascii_uppercase(),
        sources: paths,
        workdir_known: destination.starts_with('/') || workdir.is_some(),
        destination: resolve(workdir, &destination),
        chown,
        from_stage,
    }
}

fn run(line: usize, args: &str, heredoc: &[String]) -> RunStep {
    let unreproducible = |reason: &str| RunStep {
        line,
        text: args.to_string(),
        commands: vec![RunCommand::Unreproducible {
            command: args.to_string(),
            reason: reason.to_string(),
        }],
    };
    if !heredoc.is_empty() {
        return unreproducible("runs a heredoc script");
    }
    if args.starts_with('[') {
        return unreproducible("runs a program in exec form");
    }
    let commands = shell::split_commands(args)
        .into_iter()
        .map(|command| classify(&command))
        .collect();
    RunStep {
        line,
        text: args.to_string(),
        commands,
    }
}

pub(super) fn classify(command: &str) -> RunCommand {
    let unreproducible = |reason: String| RunCommand::Unreproducible {
        command: command.to_string(),
        reason,
    };
    if shell::redirects_or_substitutes(command) {
        return unreproducible("writes or computes through a redirection or substitution".into());
    }
    let words = shell::command_words(command);
    if install::is_housekeeping(&words) || words.first().is_some_and(|w| w == "cd") {
        return RunCommand::Housekeeping {
            command: command.to_string(),
        };
    }
    match install::parse(&words) {
        Ok(Some(install)) => return RunCommand::Install { install },
        Err(NotAList(reason)) => return unreproducible(reason),
        Ok(None) => {}
    }
    let program = words.first().map_or("", String::as_str);
    if program == "mkdir" {
        let paths: Vec<String> = words[1..]
            .iter()
            .filter(|w| !w.starts_with('-'))
            .cloned()
            .collect();
        if !paths.is_empty() && paths.iter().all(|p| p.starts_with('/')) {
            return RunCommand::Directories { paths };
        }
    }
    unreproducible(why_not(program).to_string())
}

fn why_not(program: &str) -> &'static str {
    match program {
        "make" | "cmake" | "gcc" | "cc" | "g++" | "clang" | "cargo" | "go" | "javac" | "mvn"
        | "gradle" | "ninja" | "meson" | "configure" | "./configure" => {
            "builds something tack cannot reproduce"
        }
        "curl" | "wget" | "git" | "svn" | "hg" => "downloads something tack cannot reproduce",
        "npm" | "yarn" | "pnpm" | "conda" | "mamba" | "apk" | "yum" | "dnf" | "gem" | "cpan"
        | "opam" | "rustup" | "uv" | "pipx" | "dpkg" => {
            "uses a package manager tack does not reproduce"
        }
        "python" | "python3" | "node" | "bash" | "sh" | "perl" | "ruby" => {
            "runs a script, which may generate data tack cannot reproduce"
        }
        _ => "changes the image in a way tack cannot reproduce",
    }
}
