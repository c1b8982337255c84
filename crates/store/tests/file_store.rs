//! The store's transfers through a real object store that needs no server:
//! object_store's local file system, behind file:// URLs. The S3 path is
//! tested against a real S3 server in crates/cli/tests/object_store.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::path::{Path, PathBuf};

use tack_store::{
    Cache, RemoteUrl, StoreError, download_run, expand_runs, list_runs, publish_run, run_exists,
    upload_run,
};

fn write(dir: &Path, rel: &str, bytes: &[u8]) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// A stopped run's directory: manifest, parts, a journal, a temporary file
/// and the pid file of a process that is gone.
fn fake_run(root: &Path, run_id: &str) -> PathBuf {
    let dir = root.join(run_id);
    write(
        &dir,
        "manifest.json",
        format!("{{\"run_id\":\"{run_id}\"}}").as_bytes(),
    );
    write(&dir, "trials/part-000-00000.parquet", b"trials-0");
    write(&dir, "spans/part-000-00000.parquet", b"spans-0");
    write(&dir, "messages/part-000-00000.parquet", b"messages-0");
    write(&dir, "journal/t--1.jsonl", b"{}\n");
    write(&dir, "trials/.part-000-00001.parquet.partial", b"half");
    write(&dir, "run.pid", b"4000000000");
    dir
}

struct Setup {
    _temp: tempfile::TempDir,
    root: PathBuf,
    prefix: RemoteUrl,
    cache: Cache,
}

fn setup() -> Setup {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().to_path_buf();
    let bucket = root.join("bucket");
    fs::create_dir_all(&bucket).unwrap();
    let prefix = RemoteUrl::parse(&format!("file://{}/runs", bucket.display())).unwrap();
    let cache = Cache::at(root.join("cache"));
    Setup {
        _temp: temp,
        root,
        prefix,
        cache,
    }
}

fn remote_files(setup: &Setup, run_id: &str) -> Vec<String> {
    let dir = setup.root.join("bucket/runs").join(run_id);
    let mut files = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(at) = pending.pop() {
        for entry in fs::read_dir(at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(
                    path.strip_prefix(&dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    files.sort();
    files
}

#[tokio::test]
async fn a_run_goes_up_whole_and_comes_back_only_where_it_changed() {
    let setup = setup();
    let run = fake_run(&setup.root.join("local"), "run-a");
    let url = setup.prefix.join("run-a");
    let up = upload_run(&run, &url).await.unwrap();
    assert_eq!(up.files, 5);
    assert_eq!(
        remote_files(&setup, "run-a"),
        [
            "journal/t--1.jsonl",
            "manifest.json",
            "messages/part-000-00000.parquet",
            "spans/part-000-00000.parquet",
            "trials/part-000-00000.parquet",
        ],
        "temporaries and the pid file stay behind"
    );

    let first = download_run(&url, &setup.cache).await.unwrap();
    assert_eq!((first.transfer.files, first.transfer.unchanged), (5, 0));
    assert_eq!(
        fs::read(first.dir.join("spans/part-000-00000.parquet")).unwrap(),
        b"spans-0"
    );
    let again = download_run(&url, &setup.cache).await.unwrap();
    assert_eq!((again.transfer.files, again.transfer.unchanged), (0, 5));

    // A resume compacts: a part is rewritten under its old name with the
    // same size, another replaced, the journal recovered. The re-upload
    // removes what the run no longer has; the download follows.
    write(&run, "trials/part-000-00000.parquet", b"trials-1");
    fs::remove_file(run.join("spans/part-000-00000.parquet")).unwrap();
    write(&run, "spans/part-001-00000.parquet", b"spans-1");
    fs::remove_file(run.join("journal/t--1.jsonl")).unwrap();
    let up = upload_run(&run, &url).await.unwrap();
    assert_eq!(up.removed, 2);
    assert!(!remote_files(&setup, "run-a").contains(&"spans/part-000-00000.parquet".to_string()));
    let third = download_run(&url, &setup.cache).await.unwrap();
    assert_eq!(third.transfer.removed, 2);
    assert_eq!(
        fs::read(third.dir.join("trials/part-000-00000.parquet")).unwrap(),
        b"trials-1",
        "same size, new content: fetched again"
    );
    assert!(third.dir.join("spans/part-001-00000.parquet").is_file());
    assert!(!third.dir.join("spans/part-000-00000.parquet").exists());
    assert!(!third.dir.join("journal/t--1.jsonl").exists());
}

#[tokio::test]
async fn a_published_run_becomes_the_cached_copy() {
    let setup = setup();
    let staged = fake_run(&setup.cache.staging(), "run-b");
    let url = setup.prefix.join("run-b");
    let published = publish_run(&staged, &url, &setup.cache).await.unwrap();
    assert_eq!(published.dir, setup.cache.run_dir(&url));
    assert!(!staged.exists(), "moved, not copied");
    let fetched = download_run(&url, &setup.cache).await.unwrap();
    assert_eq!(fetched.dir, published.dir);
    assert_eq!((fetched.transfer.files, fetched.transfer.unchanged), (0, 5));
}

#[tokio::test]
async fn runs_are_listed_and_globbed_under_a_prefix() {
    let setup = setup();
    let local = setup.root.join("local");
    for run_id in ["demo-shard2of2", "demo-shard1of2", "other"] {
        let run = fake_run(&local, run_id);
        upload_run(&run, &setup.prefix.join(run_id)).await.unwrap();
    }
    // Parts without a manifest: a run still being uploaded.
    write(
        &setup.root,
        "bucket/runs/demo-shard3of2/trials/part-000-00000.parquet",
        b"x",
    );

    let names =
        |runs: Vec<RemoteUrl>| -> Vec<String> { runs.iter().map(|r| r.name().unwrap()).collect() };
    assert_eq!(
        names(list_runs(&setup.prefix).await.unwrap()),
        ["demo-shard1of2", "demo-shard2of2", "other"]
    );
    assert_eq!(
        names(
            expand_runs(&setup.prefix.join("demo-shard*"))
                .await
                .unwrap()
        ),
        ["demo-shard1of2", "demo-shard2of2"]
    );
    let one = setup.prefix.join("other");
    assert_eq!(expand_runs(&one).await.unwrap(), std::slice::from_ref(&one));
    assert!(run_exists(&one).await.unwrap());
    assert!(
        !run_exists(&setup.prefix.join("demo-shard3of2"))
            .await
            .unwrap()
    );

    let none = expand_runs(&setup.prefix.join("nothing-*"))
        .await
        .unwrap_err();
    assert!(none.to_string().contains("no run under"), "{none}");
    let still_uploading = download_run(&setup.prefix.join("demo-shard3of2"), &setup.cache)
        .await
        .unwrap_err();
    assert!(matches!(still_uploading, StoreError::NotARun { .. }));
    assert!(still_uploading.is_usage());
}

#[tokio::test]
async fn only_a_run_directory_is_uploaded() {
    let setup = setup();
    let empty = setup.root.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let error = upload_run(&empty, &setup.prefix.join("empty"))
        .await
        .unwrap_err();
    assert!(error.is_usage());
    assert!(error.to_string().contains("manifest.json"), "{error}");

    // A run whose writer is alive (this process) is not uploaded.
    let live = fake_run(&setup.root.join("local"), "live");
    fs::write(live.join("run.pid"), std::process::id().to_string()).unwrap();
    let error = upload_run(&live, &setup.prefix.join("live"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("still writing"), "{error}");
}
