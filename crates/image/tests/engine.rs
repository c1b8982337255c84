//! Building and extracting images with the real engine (podman here; CI
//! installs it and builds the base image from Debian's packages, since no
//! registry is reachable). The base image's name comes from
//! `TACK_IMAGE_BASE`; without it (or without an engine) the tests say so
//! and skip, unless `TACK_REQUIRE_ENGINE=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // tests fail loudly by design

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use tack_image::{BuildSpec, Engine, ImageError, ImageMap, build, rootfs};

/// The engine and the base image, or why the test cannot run.
fn setup() -> Option<(Engine, String)> {
    let required = std::env::var("TACK_REQUIRE_ENGINE").is_ok_and(|v| v == "1");
    let skip = |why: String| {
        assert!(!required, "TACK_REQUIRE_ENGINE=1, but {why}");
        eprintln!("skipped: {why}");
        None
    };
    let engine = match Engine::detect(None) {
        Ok(engine) => engine,
        Err(error) => return skip(error.to_string()),
    };
    let Ok(base) = std::env::var("TACK_IMAGE_BASE") else {
        return skip("TACK_IMAGE_BASE names no base image".to_string());
    };
    if !engine.has_image(&base) {
        return skip(format!("the engine has no image {base}"));
    }
    Some((engine, base))
}

fn context(dockerfile: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Dockerfile"), dockerfile).unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello\n").unwrap();
    dir
}

fn spec(dir: &Path) -> BuildSpec {
    BuildSpec {
        context: dir.to_path_buf(),
        dockerfile: dir.join("Dockerfile"),
        boundary: dir.to_path_buf(),
    }
}

fn map(base: &str) -> ImageMap {
    [("debian:bookworm".to_string(), base.to_string())].into()
}

/// The filesystem of `built`, its ids shifted as the sandbox maps them.
fn extract(engine: &Engine, built: &tack_image::Built, cache: &Path) -> tack_image::Rootfs {
    rootfs(
        engine,
        &built.tag,
        &built.config.id,
        (100_000, 65_536),
        cache,
    )
    .unwrap()
}

const DOCKERFILE: &str = "FROM debian:bookworm\n\
RUN useradd -m alice && chmod 700 /home/alice && echo built > /built\n\
RUN mknod /disk b 8 0 && cp /bin/true /suid && chown 4294967000 /suid && chmod 4755 /suid\n\
WORKDIR /app\n\
COPY hello.txt /app/\n\
ENV FOO=bar\n";

/// A Dockerfile whose `FROM` is mapped to the local base builds; its
/// config (WORKDIR, ENV) is read back; the same content is not built
/// again; its filesystem is extracted with owners shifted.
#[test]
fn a_mapped_dockerfile_builds_once_and_extracts_shifted() {
    let Some((engine, base)) = setup() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let dir = context(DOCKERFILE);
    let built = build(&engine, &spec(dir.path()), &map(&base), cache.path()).unwrap();
    assert!(built.tag.starts_with("localhost/tack-env:"));
    assert_eq!(built.config.workdir.as_deref(), Some(Path::new("/app")));
    assert!(
        built
            .config
            .env
            .contains(&("FOO".to_string(), "bar".to_string()))
    );
    assert!(built.config.id.starts_with("sha256:"));
    let again = build(&engine, &spec(dir.path()), &map(&base), cache.path()).unwrap();
    assert!(again.cached && again.tag == built.tag);

    let root = extract(&engine, &built, cache.path());
    assert!(!root.cached);
    let file = |p: &str| root.path.join(p);
    assert_eq!(
        std::fs::read_to_string(file("app/hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(std::fs::read_to_string(file("built")).unwrap(), "built\n");
    let alice = std::fs::metadata(file("home/alice")).unwrap();
    assert_eq!((alice.uid(), alice.mode() & 0o777), (101_000, 0o700));
    assert_eq!(
        std::fs::metadata(file("etc/passwd")).unwrap().uid(),
        100_000
    );
    // Extracted by root, shifted: no host device, no id wrapped round to
    // the host's root with its set-uid bit.
    assert!(std::fs::symlink_metadata(file("disk")).is_err());
    let suid = std::fs::metadata(file("suid")).unwrap();
    assert_eq!((suid.uid(), suid.mode() & 0o7777), (165_534, 0o755));
    let cached = extract(&engine, &built, cache.path());
    assert!(cached.cached && cached.path == root.path);

    // Another context is another image.
    std::fs::write(dir.path().join("hello.txt"), "changed\n").unwrap();
    let changed = build(&engine, &spec(dir.path()), &map(&base), cache.path()).unwrap();
    assert_ne!(changed.tag, built.tag);
    // So is another base under the same name: the stand-in was rebuilt.
    let other = context("FROM debian:bookworm\nRUN echo another base > /another\n");
    let other_base = build(&engine, &spec(other.path()), &map(&base), cache.path()).unwrap();
    let rebased = build(
        &engine,
        &spec(dir.path()),
        &map(&other_base.tag),
        cache.path(),
    )
    .unwrap();
    assert!(!rebased.cached);
    assert_ne!(rebased.tag, changed.tag);
    for tag in [&built.tag, &changed.tag, &rebased.tag, &other_base.tag] {
        engine.remove_image(tag).unwrap();
    }
}

/// A build that fails says so with the end of its log.
#[test]
fn a_failing_build_quotes_its_log() {
    let Some((engine, base)) = setup() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let dir = context("FROM debian:bookworm\nRUN echo about to fail && false\n");
    let error = build(&engine, &spec(dir.path()), &map(&base), cache.path()).unwrap_err();
    let ImageError::Build { tail, log, .. } = &error else {
        panic!("{error}");
    };
    assert!(tail.contains("about to fail"), "{error}");
    assert!(log.is_file());
}

/// Nothing outside the context reaches a build: a `COPY ../` source and a
/// link out of the context are refused before the engine runs.
#[test]
fn a_build_never_reads_outside_its_context() {
    let Some((engine, base)) = setup() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let dir = context("FROM debian:bookworm\nCOPY ../secret /app/\n");
    let error = build(&engine, &spec(dir.path()), &map(&base), cache.path()).unwrap_err();
    assert!(
        matches!(&error, ImageError::OutsideContext { line: 2, .. }),
        "{error}"
    );
    let dir = context("FROM debian:bookworm\nCOPY . /app/\n");
    std::os::unix::fs::symlink("/etc/shadow", dir.path().join("shadow")).unwrap();
    let error = build(&engine, &spec(dir.path()), &map(&base), cache.path()).unwrap_err();
    assert!(matches!(&error, ImageError::LinkOut { .. }), "{error}");
    assert!(!cache.path().join("logs").exists(), "the engine ran");
}
