//! Container images as task environments. A task written for a container
//! names an image or a Dockerfile; a real engine (podman or docker, see
//! [`Engine`]) builds it, cached by the content of its build context
//! ([`build`]), and its filesystem is extracted once per image for tack's
//! own sandbox to run trials in ([`rootfs`]): the engine builds, it does
//! not run every command (a `docker exec` costs hundreds of milliseconds).
//!
//! It depends on no workspace crate: it speaks to an engine's command line
//! and hands back paths and facts (the image's id, working directory,
//! environment and user) that the suite and the sandbox use.
//!
//! No image registry is reachable on every machine: a map
//! ([`ImageMap`]) names the local image that stands for a public one
//! (`ubuntu:24.04` → a base built from Debian's packages), and every
//! `FROM` of a Dockerfile is rewritten through it before the build.

mod build;
mod container;
mod context;
mod engine;
mod error;
mod rootfs;
mod user;

pub use build::{BuildSpec, Built, ImageMap, build, context_hash, mapped};
pub use container::{
    Bind, ContainerSpec, ContainerState, KEEP_ALIVE, ServiceSpec, TRIAL_LABEL, VolumeMount,
    container_name, service_container_name, volume_name,
};
pub use context::{Escape, climbs_out_from, links_leaving, sources_outside_context};
pub use engine::{ENGINE_VAR, Engine, EngineKind, ImageConfig};
pub use error::{ImageError, last_lines};
pub use rootfs::{Rootfs, rootfs};
pub use user::{ImageUser, resolve_user};
