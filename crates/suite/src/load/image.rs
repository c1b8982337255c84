//! Checks of a task that runs in a container image: what names the image,
//! and that its build can read nothing outside the task (a `COPY ../`, a
//! link out of the context), refused at load, before any build.

use std::path::{Component, Path};

use crate::{SuiteError, Task};

pub(super) fn check_image(file: &Path, task: &Task) -> Result<(), SuiteError> {
    let env = &task.environment;
    if env.context.is_some() && env.dockerfile.is_none() {
        return Err(SuiteError::invalid(
            file,
            "environment.context",
            "is the build context of a Dockerfile, and the task names none: add `dockerfile` or remove `context`",
        ));
    }
    if !task.wants_image() {
        if env.user.is_some() {
            return Err(SuiteError::invalid(
                file,
                "environment.user",
                "is the image's user the agent runs as, and the task names no image: add \
                 `image` or `dockerfile`, or remove `user`",
            ));
        }
        if !env.services.is_empty() {
            return Err(SuiteError::invalid(
                file,
                "environment.services",
                "are containers started beside the task's own, and the task names no image: add \
                 `image` or `dockerfile`, or remove the services",
            ));
        }
        if !env.volumes.is_empty() {
            return Err(SuiteError::invalid(
                file,
                "environment.volumes",
                "are mounts of the container the engine starts for a trial, and the task names \
                 no image: add `image` or `dockerfile`, or remove the volumes",
            ));
        }
        if !env.mode.is_sandbox() {
            return Err(SuiteError::invalid(
                file,
                "environment.mode",
                "says where the task's image runs, and the task names no image: add `image` or \
                 `dockerfile`, or remove `mode`",
            ));
        }
        return Ok(());
    }
    if env.image.is_some() && env.dockerfile.is_some() {
        return Err(SuiteError::invalid(
            file,
            "environment.image",
            "and `dockerfile` both name the task's image: keep one",
        ));
    }
    if let Some(image) = &env.image
        && (image.trim().is_empty() || image.contains(char::is_whitespace))
    {
        return Err(SuiteError::invalid(
            file,
            "environment.image",
            format!("`{image}` is not an image reference (e.g. `python:3.12-slim`)"),
        ));
    }
    let host_only = [
        ("python", !env.python.is_empty()),
        ("debian", !env.debian.is_empty()),
        ("requires", env.requires.is_some()),
    ];
    if let Some((field, _)) = host_only.iter().find(|(_, set)| *set) {
        return Err(SuiteError::invalid(
            file,
            format!("environment.{field}"),
            "is for tasks that run on the host; a task with an image gets its tools from the \
             image: install them in its Dockerfile, and remove this",
        ));
    }
    if let Some(dockerfile) = &env.dockerfile {
        check_build(
            file,
            task,
            "environment",
            dockerfile,
            env.context.as_deref(),
        )?;
    }
    check_volumes(file, task, "environment.volumes", &env.volumes)?;
    check_services(file, task)
}

/// Each volume names one thing to mount, a volume by a name the engine
/// takes or a file or directory inside the task that leads nowhere out of
/// it, at an absolute path of its own.
fn check_volumes(
    file: &Path,
    task: &Task,
    table: &str,
    volumes: &[crate::Volume],
) -> Result<(), SuiteError> {
    let mut places = std::collections::BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let at = format!("{table}[{i}]");
        match (&volume.name, &volume.path) {
            (Some(_), Some(_)) => {
                return Err(SuiteError::invalid(
                    file,
                    format!("{at}.name"),
                    "and `path` both say what is mounted: keep one",
                ));
            }
            (None, None) => {
                return Err(SuiteError::invalid(
                    file,
                    &at,
                    "mounts nothing: add `name` (a volume of the trial) or `path` (a file or \
                     directory of the task)",
                ));
            }
            (Some(name), None) => {
                let fine = name.len() <= 64
                    && name.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
                if !fine {
                    return Err(SuiteError::invalid(
                        file,
                        format!("{at}.name"),
                        format!(
                            "`{name}` is not a volume name: use letters, digits, `_`, `.` and \
                             `-`, starting with a letter or digit"
                        ),
                    ));
                }
            }
            (None, Some(path)) => check_mounted_path(file, task, &format!("{at}.path"), path)?,
        }
        let target = Path::new(&volume.at);
        let absolute = target.is_absolute()
            && target.components().all(|c| c != Component::ParentDir)
            && target.components().count() > 1;
        if !absolute {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.at"),
                format!(
                    "`{}` is not where a container can mount it: give an absolute path other \
                     than `/`, without `..`",
                    volume.at
                ),
            ));
        }
        if !places.insert(target.components().collect::<Vec<_>>()) {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.at"),
                format!("`{}` is mounted twice: keep one", volume.at),
            ));
        }
    }
    Ok(())
}

/// A file or directory of the task a container mounts: there, and with no
/// link in it that leads out of the task (a copy would follow none, but a
/// task whose files reach outside it is refused whole).
fn check_mounted_path(file: &Path, task: &Task, field: &str, path: &str) -> Result<(), SuiteError> {
    let full = inside(file, task, field, path)?;
    let meta = std::fs::symlink_metadata(&full).map_err(|e| {
        SuiteError::invalid(
            file,
            field,
            format!(
                "{} cannot be read ({e}): add it or fix the path",
                full.display()
            ),
        )
    })?;
    // No link anywhere on the way either: `d/env` with `d` a link to
    // ~/.config/tack is read through it.
    let within = full
        .canonicalize()
        .ok()
        .zip(task.dir.canonicalize().ok())
        .is_some_and(|(real, task_dir)| {
            real == task_dir.join(Path::new(path).components().collect::<std::path::PathBuf>())
        });
    if meta.file_type().is_symlink() || !within {
        return Err(SuiteError::invalid(
            file,
            field,
            format!(
                "{} is, or is reached through, a symbolic link; a mount of the task's files \
                 follows none: name the file itself",
                full.display()
            ),
        ));
    }
    if meta.is_dir() {
        let links = tack_image::links_leaving(&full, &task.dir)
            .map_err(|e| SuiteError::file(&full, e.to_string()))?;
        if let Some((link, target)) = links.first() {
            return Err(SuiteError::file(
                link,
                format!(
                    "is a symbolic link to {}, outside the task: copy the file in instead",
                    target.display()
                ),
            ));
        }
    }
    Ok(())
}

/// A service is named as a host (its name is one), named once, and made
/// like the task's image: from an image or a Dockerfile of the task.
fn check_services(file: &Path, task: &Task) -> Result<(), SuiteError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, service) in task.environment.services.iter().enumerate() {
        let at = format!("environment.services[{i}]");
        check_service_name(file, &at, &service.name, &mut seen)?;
        check_service_image(file, task, &at, service)?;
        if service.command.as_ref().is_some_and(Vec::is_empty) {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.command"),
                "is empty: give the program and its arguments, or remove it for the image's own",
            ));
        }
        super::task::check_variables(file, &format!("{at}.env"), &service.env)?;
        if let Some(health) = &service.healthcheck {
            super::task::check_healthcheck(file, &format!("{at}.healthcheck"), health)?;
        }
        if let Some(user) = &service.user
            && (user.trim().is_empty() || user.contains(char::is_whitespace))
        {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.user"),
                format!("`{user}` is not a user of an image (a name or uid, e.g. `nobody`)"),
            ));
        }
        check_volumes(file, task, &format!("{at}.volumes"), &service.volumes)?;
        if service.wait == Some(crate::ServiceWait::Healthy) && service.healthcheck.is_none() {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.wait"),
                "is `healthy`, and the service has no health check: add \
                 [environment.services.healthcheck], or wait for `started`",
            ));
        }
    }
    Ok(())
}

/// A service's name: a host name the trial reaches it by, and its own.
fn check_service_name<'a>(
    file: &Path,
    at: &str,
    name: &'a str,
    seen: &mut std::collections::BTreeSet<&'a str>,
) -> Result<(), SuiteError> {
    let host = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !host {
        return Err(SuiteError::invalid(
            file,
            format!("{at}.name"),
            format!(
                "`{name}` is not a host name the trial can reach it by: use lowercase \
                 letters, digits, `-` and `_`"
            ),
        ));
    }
    if name == "localhost" || !seen.insert(name) {
        return Err(SuiteError::invalid(
            file,
            format!("{at}.name"),
            format!("`{name}` is taken (by `localhost` or another service): rename it"),
        ));
    }
    Ok(())
}

/// A service's image: a reference, or a Dockerfile of the task to build.
fn check_service_image(
    file: &Path,
    task: &Task,
    at: &str,
    service: &crate::Service,
) -> Result<(), SuiteError> {
    let name = &service.name;
    match (&service.image, &service.dockerfile) {
        (Some(_), Some(_)) => {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.image"),
                "and `dockerfile` both name the service's image: keep one",
            ));
        }
        (None, None) => {
            return Err(SuiteError::invalid(
                file,
                at,
                format!("service `{name}` names no image: add `image` or `dockerfile`"),
            ));
        }
        (Some(image), None) if image.trim().is_empty() || image.contains(char::is_whitespace) => {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.image"),
                format!("`{image}` is not an image reference (e.g. `redis:7`)"),
            ));
        }
        (Some(_), None) if service.context.is_some() => {
            return Err(SuiteError::invalid(
                file,
                format!("{at}.context"),
                "is the build context of a Dockerfile, and the service names none: add \
                 `dockerfile` or remove `context`",
            ));
        }
        (Some(_), None) => {}
        (None, Some(dockerfile)) => {
            check_build(file, task, at, dockerfile, service.context.as_deref())?;
        }
    }
    Ok(())
}

/// The Dockerfile `dockerfile` and build context `context` of the table at
/// `table` (`environment`, `environment.services[0]`): inside the task,
/// and a build of them reads nothing outside it.
fn check_build(
    file: &Path,
    task: &Task,
    table: &str,
    dockerfile: &str,
    context: Option<&str>,
) -> Result<(), SuiteError> {
    let field = format!("{table}.dockerfile");
    let path = inside(file, task, &field, dockerfile)?;
    let meta = std::fs::symlink_metadata(&path).map_err(|e| {
        SuiteError::invalid(
            file,
            &field,
            format!(
                "{} cannot be read ({e}): add it or fix the path",
                path.display()
            ),
        )
    })?;
    if !meta.is_file() {
        return Err(SuiteError::invalid(
            file,
            &field,
            format!(
                "{} is not a regular file (a link is not followed)",
                path.display()
            ),
        ));
    }
    let context_field = format!("{table}.context");
    if let Some(context) = context {
        inside(file, task, &context_field, context)?;
    }
    let context = task.context_of(&path, context);
    if !context.is_dir() || context.is_symlink() {
        return Err(SuiteError::invalid(
            file,
            &context_field,
            format!("{} is not a directory of the task", context.display()),
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| SuiteError::io(&path, e))?;
    if let Some(escape) = tack_image::sources_outside_context(&text).first() {
        return Err(SuiteError::file(
            &path,
            format!(
                "line {}: `{}` is outside the build context {}; a build reads only its context: \
                 move the file into it",
                escape.line,
                escape.source,
                context.display()
            ),
        ));
    }
    let links = tack_image::links_leaving(&context, &task.dir)
        .map_err(|e| SuiteError::file(&context, e.to_string()))?;
    if let Some((link, target)) = links.first() {
        return Err(SuiteError::file(
            link,
            format!(
                "is a symbolic link to {}, outside the task; a build never follows a link out of \
                 its task: copy the file in instead",
                target.display()
            ),
        ));
    }
    Ok(())
}

/// `relative` (a path the task names) joined to the task directory, if it
/// stays inside it.
fn inside(
    file: &Path,
    task: &Task,
    field: &str,
    relative: &str,
) -> Result<std::path::PathBuf, SuiteError> {
    let path = Path::new(relative);
    let fine = !relative.trim().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !fine {
        return Err(SuiteError::invalid(
            file,
            field,
            format!(
                "`{relative}` must be a path inside the task directory, relative, without `..`"
            ),
        ));
    }
    Ok(task.dir.join(path))
}
