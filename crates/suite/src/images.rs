//! Tasks written for a container run in their image's filesystem: before
//! the first trial, each task's image is built from its Dockerfile (or the
//! image it names is pulled) by a real engine, cached by content, and
//! extracted once for tack's sandbox ([`tack_image`]). A task whose image
//! cannot be made is marked so: its trials end as infrastructure errors
//! with the build's own words, and the other tasks run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tack_image::{BuildSpec, Engine, EngineKind, ImageError, ImageMap};
use tack_protocol::{ImageMode, TrialEnvironment};
use tack_sandbox::{ContainerRoot, IMAGE_ID_BASE, ImageRoot, ImageUser};

use crate::walls::Viewer;
use crate::{ProvisionNote, Suite, Task};

const IMAGE_FETCH: &str = concat!(
    include_str!("stand_ins/image-fetch.sh"),
    include_str!("stand_ins/pass-through.sh")
);

/// Where an image task's stand-ins are shown in its image, first on `PATH`.
pub const IMAGE_STAND_INS_AT: &str = "/usr/local/libexec/tack/bin";

/// A task's image, ready for its trials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskImage {
    /// What was built or pulled (`localhost/tack-env:<hash>`, `python:3.12`).
    pub reference: String,
    /// The engine's id of it (`sha256:…`), recorded in the run's fingerprint.
    pub id: String,
    /// Its files, extracted, owners shifted for the sandbox.
    pub rootfs: PathBuf,
    /// Where the workspace is: the task's `workdir`, else the image's.
    pub workdir: String,
    /// The image's `ENV`, and `HOME` of its user.
    pub env: Vec<(String, String)>,
    /// The image's `USER` (its root if none): the checks run as it.
    pub user: ImageUser,
    /// `[environment] user`: the agent's commands and the solution run as
    /// it instead.
    pub agent_user: Option<ImageUser>,
    /// The offline stand-ins shown at [`IMAGE_STAND_INS_AT`], when the task
    /// asks for them.
    pub stand_ins: Option<PathBuf>,
    /// The build's log (none when the image came from the cache).
    pub log: Option<PathBuf>,
    /// The engine that made it, which runs it in engine mode.
    pub engine: EngineKind,
    /// The image's `timeout` program, if it has one (engine mode runs
    /// each command under it).
    pub timeout_program: Option<String>,
    /// The images of the task's services, in the task's order.
    pub services: Vec<ServiceImage>,
}

impl TaskImage {
    /// The host id of the image's root in a trial that runs in engine mode
    /// (`in_engine`) or not: the sandbox's [`IMAGE_ID_BASE`], which podman
    /// maps a trial's container to as well; 0 for docker's containers,
    /// which run with the host's ids. Files tack makes for the trial are
    /// owned from it, so that the image's users own them inside.
    pub(crate) fn id_base(&self, in_engine: bool) -> u32 {
        if in_engine && !self.engine.maps_ids() {
            0
        } else {
            IMAGE_ID_BASE
        }
    }
}

/// A service's image, ready to be started beside a trial's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceImage {
    /// The service's name (its host name in the trial).
    pub name: String,
    /// What was built or pulled.
    pub reference: String,
    /// The engine's id of it, recorded in the run's fingerprint.
    pub id: String,
}

/// A task's image, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageState {
    Ready(Box<TaskImage>),
    /// The build (or pull, or extraction) failed: the task's trials are
    /// infrastructure errors with this message.
    Failed(String),
}

/// How images are made.
#[derive(Debug, Clone, Default)]
pub struct ImageOptions {
    /// `--engine`; by default podman, else docker.
    pub engine: Option<EngineKind>,
    /// Where logs and extracted filesystems are kept; by default
    /// [`image_cache`].
    pub cache: Option<PathBuf>,
}

/// Why no task's image could be made at all.
#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    #[error(
        "{count} task(s) run in a container image ({tasks}), and {error}\n\
         hint: leave them out with --task, or see `tack doctor`"
    )]
    NoEngine {
        count: usize,
        tasks: String,
        /// Boxed: an image error is large, and this one rare.
        error: Box<ImageError>,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `$TACK_IMAGE_CACHE`, else `$XDG_CACHE_HOME/tack/images`, else
/// `~/.cache/tack/images`.
pub fn image_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("TACK_IMAGE_CACHE") {
        return PathBuf::from(dir);
    }
    crate::provision::tack_cache("images")
}

/// The user's image map, `$XDG_CONFIG_HOME/tack/images.toml` (else
/// `~/.config/tack/images.toml`): an `[images]` table as in a suite, for
/// what stands for a public image on this machine; it wins over the
/// suite's.
pub fn user_image_map() -> Result<ImageMap, crate::SuiteError> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
    let Some(file) = config.map(|dir| dir.join("tack").join("images.toml")) else {
        return Ok(ImageMap::new());
    };
    if !file.is_file() {
        return Ok(ImageMap::new());
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct UserImages {
        #[serde(default)]
        images: BTreeMap<String, String>,
    }
    let text = std::fs::read_to_string(&file).map_err(|e| crate::SuiteError::io(&file, e))?;
    let parsed: UserImages = toml::from_str(&text).map_err(|e| crate::SuiteError::Parse {
        path: file.clone(),
        error: Box::new(e),
    })?;
    Ok(parsed.images)
}

impl Task {
    /// Whether the task runs in a container image.
    pub fn wants_image(&self) -> bool {
        self.environment.image.is_some() || self.environment.dockerfile.is_some()
    }

    /// Whether the task's trials run in a container the engine starts
    /// (`mode = "engine"`, or the variant's `image_tasks`, already
    /// applied by [`Task::for_variant`]; services and volumes are the
    /// engine's).
    pub fn in_engine(&self) -> bool {
        self.wants_image()
            && (self.environment.mode == ImageMode::Engine
                || !self.environment.services.is_empty()
                || !self.environment.volumes.is_empty())
    }

    /// The task as `variant` runs it: in engine mode if either asks.
    pub fn for_variant(&self, image_tasks: ImageMode) -> std::borrow::Cow<'_, Task> {
        let mode = self.environment.mode.either(image_tasks);
        if mode == self.environment.mode || !self.wants_image() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut task = self.clone();
        task.environment.mode = mode;
        std::borrow::Cow::Owned(task)
    }

    /// Where the task's trials run.
    pub fn trial_environment(&self) -> TrialEnvironment {
        match (self.wants_image(), self.in_engine()) {
            (false, _) => TrialEnvironment::Host,
            (true, false) => TrialEnvironment::Image,
            (true, true) => TrialEnvironment::Engine,
        }
    }

    /// The task's image, when made.
    pub fn ready_image(&self) -> Option<&TaskImage> {
        match &self.image {
            Some(ImageState::Ready(image)) => Some(image),
            _ => None,
        }
    }

    /// The build context `context` (relative to the task: the task's
    /// `context`, a service's) names for the Dockerfile at `dockerfile`,
    /// else the Dockerfile's directory.
    pub(crate) fn context_of(&self, dockerfile: &Path, context: Option<&str>) -> PathBuf {
        match context {
            Some(context) => self.dir.join(context),
            None => dockerfile
                .parent()
                .map_or_else(|| self.dir.clone(), Path::to_path_buf),
        }
    }

    /// Where the workspace is shown: the task's `workdir`, else its image's.
    pub fn workdir(&self) -> Option<&str> {
        self.environment
            .workdir
            .as_deref()
            .or_else(|| self.ready_image().map(|image| image.workdir.as_str()))
    }

    /// Who `viewer`'s commands run as in the image (`None`: its root).
    fn image_user(image: &TaskImage, viewer: Viewer) -> Option<ImageUser> {
        let user = match (viewer, image.agent_user) {
            (Viewer::Agent | Viewer::Solution, Some(agent)) => agent,
            _ => image.user,
        };
        (user.uid != 0 || user.gid != 0).then_some(user)
    }

    /// The sandbox's view of the image for `viewer`'s commands in a trial
    /// whose writable layer is `layer`.
    pub(crate) fn image_root(&self, layer: PathBuf, viewer: Viewer) -> Option<ImageRoot> {
        self.ready_image().map(|image| ImageRoot {
            rootfs: image.rootfs.clone(),
            layer,
            user: Task::image_user(image, viewer),
        })
    }

    /// The trial's container, in engine mode, for `viewer`'s commands in
    /// the trial whose directory is `trial`; `bound` are the paths the
    /// container was started with.
    pub(crate) fn container_root(
        &self,
        trial: &Path,
        viewer: Viewer,
        bound: Vec<PathBuf>,
    ) -> Option<ContainerRoot> {
        let image = self.ready_image().filter(|_| self.in_engine())?;
        Some(ContainerRoot {
            engine: image.engine.as_str().to_string(),
            name: tack_image::container_name(trial),
            user: Task::image_user(image, viewer),
            bound,
            timeout_program: image.timeout_program.clone(),
        })
    }
}

/// Makes the image of every task that has one (`[environment] image` or
/// `dockerfile`), of those in `only` if given, and records it in
/// [`Task::image`]. One task's failure is that task's; no engine at all is
/// an error, since no such task can run.
pub async fn prepare_images(
    suite: &mut Suite,
    only: Option<&[String]>,
    options: &ImageOptions,
    note: ProvisionNote<'_>,
) -> Result<(), ImagesError> {
    let chosen = |task: &Task| task.wants_image() && only.is_none_or(|ids| ids.contains(&task.id));
    let wanting: Vec<String> = suite
        .tasks
        .iter()
        .filter(|t| chosen(t))
        .map(|t| t.id.clone())
        .collect();
    if wanting.is_empty() {
        return Ok(());
    }
    let engine = Engine::detect(options.engine).map_err(|error| ImagesError::NoEngine {
        count: wanting.len(),
        tasks: wanting.join(", "),
        error: Box::new(error),
    })?;
    // What a killed run left in the engine goes now, whichever mode this
    // run's trials take.
    crate::container::sweep_once(&engine, &crate::workspaces_root());
    let cache = options.cache.clone().unwrap_or_else(image_cache);
    std::fs::create_dir_all(&cache).map_err(|source| ImagesError::Io {
        path: cache.clone(),
        source,
    })?;
    let mut map = suite.images.clone();
    match user_image_map() {
        Ok(user) => map.extend(user),
        Err(error) => note(format!("the user's image map is ignored: {error}")),
    }
    for task in suite.tasks.iter_mut().filter(|t| chosen(t)) {
        note(format!("image of task `{}`: preparing", task.id));
        let made = {
            let (engine, map, cache, task) =
                (engine.clone(), map.clone(), cache.clone(), task.clone());
            tokio::task::spawn_blocking(move || make_image(&engine, &task, &map, &cache)).await
        };
        let state = match made {
            Ok(Ok(image)) => {
                note(format!(
                    "image of task `{}`: {} ({})",
                    task.id,
                    image.reference,
                    short_id(&image.id)
                ));
                ImageState::Ready(Box::new(image))
            }
            Ok(Err(error)) => {
                note(format!("image of task `{}` failed: {error}", task.id));
                ImageState::Failed(format!("the task's image could not be made: {error}"))
            }
            Err(join) => ImageState::Failed(format!("preparing the task's image crashed: {join}")),
        };
        task.image = Some(state);
    }
    Ok(())
}

fn short_id(id: &str) -> &str {
    let hex = id.trim_start_matches("sha256:");
    &hex[..hex.len().min(12)]
}

/// Builds or pulls, extracts, and reads the user of one task's image;
/// builds or pulls its services' images.
fn make_image(
    engine: &Engine,
    task: &Task,
    map: &ImageMap,
    cache: &Path,
) -> Result<TaskImage, ImageError> {
    let env = &task.environment;
    let (reference, config, log) = made(
        engine,
        task,
        (env.dockerfile.as_deref(), env.context.as_deref()),
        env.image.as_deref(),
        map,
        cache,
    )?;
    let services = service_images(engine, task, map, cache)?;
    let mapped = tack_sandbox::IMAGE_IDS;
    let root = tack_image::rootfs(
        engine,
        &reference,
        &config.id,
        (IMAGE_ID_BASE, mapped),
        cache,
    )?;
    let resolve = |name: Option<&str>| tack_image::resolve_user(&root.path, name, mapped);
    let user = resolve(config.user.as_deref())?;
    let agent = env
        .user
        .as_deref()
        .map(|name| resolve(Some(name)))
        .transpose()?;
    let workdir = env
        .workdir
        .clone()
        .or_else(|| config.workdir.as_ref().map(|w| w.display().to_string()))
        .filter(|w| w != "/")
        .ok_or_else(|| ImageError::Engine {
            command: format!("{} image inspect {reference}", engine.kind.as_str()),
            stderr: "the image sets no WORKDIR (or `/`), so there is no workspace to give the \
                     agent; set `workdir` in the task's [environment] (e.g. \"/app\")"
                .into(),
        })?;
    let mut image_env = config.env.clone();
    image_env.retain(|(name, _)| name != "HOME");
    let home = agent.as_ref().unwrap_or(&user).home.display().to_string();
    image_env.push(("HOME".to_string(), home));
    let stand_ins = if env.stand_ins {
        Some(write_stand_ins(cache)?)
    } else {
        None
    };
    let timeout_program = ["usr/bin/timeout", "bin/timeout"]
        .into_iter()
        .find(|path| std::fs::symlink_metadata(root.path.join(path)).is_ok())
        .map(|path| format!("/{path}"));
    Ok(TaskImage {
        reference,
        id: config.id,
        rootfs: root.path,
        workdir,
        env: image_env,
        user: ImageUser {
            uid: user.uid,
            gid: user.gid,
        },
        agent_user: agent.map(|agent| ImageUser {
            uid: agent.uid,
            gid: agent.gid,
        }),
        stand_ins,
        log,
        engine: engine.kind,
        timeout_program,
        services,
    })
}

/// The images of the task's services, built or pulled.
fn service_images(
    engine: &Engine,
    task: &Task,
    map: &ImageMap,
    cache: &Path,
) -> Result<Vec<ServiceImage>, ImageError> {
    (task.environment.services.iter())
        .map(|service| {
            let (reference, config, _) = made(
                engine,
                task,
                (service.dockerfile.as_deref(), service.context.as_deref()),
                service.image.as_deref(),
                map,
                cache,
            )
            .map_err(|error| ImageError::Service {
                name: service.name.clone(),
                error: Box::new(error),
            })?;
            Ok(ServiceImage {
                name: service.name.clone(),
                reference,
                id: config.id,
            })
        })
        .collect()
}

/// An image from the task's Dockerfile and build context (`build`), built
/// once per content, or the image it names, mapped or pulled: its
/// reference, configuration and build log.
fn made(
    engine: &Engine,
    task: &Task,
    build: (Option<&str>, Option<&str>),
    image: Option<&str>,
    map: &ImageMap,
    cache: &Path,
) -> Result<(String, tack_image::ImageConfig, Option<PathBuf>), ImageError> {
    match (build, image) {
        ((Some(dockerfile), context), _) => {
            let dockerfile = task.dir.join(dockerfile);
            let spec = BuildSpec {
                context: task.context_of(&dockerfile, context),
                dockerfile,
                boundary: task.dir.clone(),
            };
            let built = tack_image::build(engine, &spec, map, cache)?;
            Ok((built.tag, built.config, built.log))
        }
        ((None, _), Some(image)) => {
            let local = tack_image::mapped(image, map).unwrap_or_else(|| image.to_string());
            let config = engine.ensure(&local)?;
            Ok((local, config, None))
        }
        ((None, _), None) => Err(ImageError::Engine {
            command: "image".into(),
            stderr: "the task names no image".into(),
        }),
    }
}

/// The image tasks' stand-ins (the uv installer from the package index),
/// written once per content under the cache.
fn write_stand_ins(cache: &Path) -> Result<PathBuf, ImageError> {
    use sha2::Digest;
    use std::os::unix::fs::PermissionsExt;
    let hash = crate::hash::hex(&sha2::Sha256::digest(IMAGE_FETCH.as_bytes())[..8]);
    let dir = cache.join("stand-ins").join(hash);
    if dir.join("curl").is_file() {
        return Ok(dir);
    }
    let partial = tempfile::Builder::new()
        .prefix(".stand-ins-")
        .tempdir_in(cache)
        .map_err(|e| ImageError::io(cache, e))?;
    for name in ["curl", "wget"] {
        let path = partial.path().join(name);
        std::fs::write(&path, IMAGE_FETCH)
            .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)))
            .map_err(|e| ImageError::io(&path, e))?;
    }
    let parent = cache.join("stand-ins");
    std::fs::create_dir_all(&parent).map_err(|e| ImageError::io(&parent, e))?;
    let kept = partial.keep();
    if std::fs::rename(&kept, &dir).is_err() {
        // Another run wrote it first.
        let _ = std::fs::remove_dir_all(&kept);
    }
    Ok(dir)
}
