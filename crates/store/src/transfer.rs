//! Copying a run's directory to and from object storage.
//!
//! A run is read only through its manifest, so the manifest is uploaded last:
//! a reader never finds a manifest whose parts are not there yet. Downloads
//! go to a temporary name and are renamed, so the cache never holds half a
//! file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt, stream};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use tack_trace::Manifest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cache::{Cache, CacheIndex, INDEX_FILE};
use crate::client::{open, remote_error};
use crate::{RemoteUrl, StoreError};

/// Files in flight at once.
const CONCURRENCY: usize = 8;

/// Files up to this size go up in one request; larger ones in parts of it,
/// never more than a few parts in memory.
const SINGLE_PUT_LIMIT: usize = 16 << 20;

/// What a transfer moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    /// Files copied.
    pub files: usize,
    pub bytes: u64,
    /// Files already present and unchanged (downloads only).
    pub unchanged: usize,
    /// Files removed because the source no longer has them.
    pub removed: usize,
}

/// A run that is now in object storage, and its local copy.
#[derive(Debug, Clone)]
pub struct Published {
    /// The local copy: the run's directory in the cache, or, if it could not
    /// be moved there, where it was written.
    pub dir: PathBuf,
    pub transfer: Transfer,
}

/// Uploads the run in `local_run` (a finished or stopped run's directory) to
/// `url` (`<prefix>/<run-id>`): every file, then the removal of objects the
/// run no longer has (parts a compaction replaced), then the manifest.
pub async fn upload_run(local_run: &Path, url: &RemoteUrl) -> Result<Transfer, StoreError> {
    upload_run_with(local_run, url, SINGLE_PUT_LIMIT).await
}

async fn upload_run_with(
    local_run: &Path,
    url: &RemoteUrl,
    single_put_limit: usize,
) -> Result<Transfer, StoreError> {
    check_uploadable(local_run)?;
    let files = run_files(local_run)?;
    let store = open(url)?;
    let before = list_objects(&store, url).await?;
    let (manifest, parts): (Vec<String>, Vec<String>) = files
        .iter()
        .cloned()
        .partition(|rel| rel == Manifest::FILE_NAME);
    let sizes: Vec<u64> = stream::iter(parts)
        .map(|rel| {
            let (store, url) = (store.clone(), url.clone());
            let path = local_run.join(&rel);
            async move { put_file(&store, &url, &rel, &path, single_put_limit).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let keep: BTreeSet<&String> = files.iter().collect();
    let stale: Vec<&String> = before.keys().filter(|rel| !keep.contains(rel)).collect();
    for rel in &stale {
        store
            .delete(&object(url, rel))
            .await
            .map_err(|e| remote_error(&url.join(rel), "remove a replaced file", e))?;
    }
    let mut bytes: u64 = sizes.iter().sum();
    for rel in &manifest {
        bytes += put_file(&store, url, rel, &local_run.join(rel), single_put_limit).await?;
    }
    Ok(Transfer {
        files: files.len(),
        bytes,
        unchanged: 0,
        removed: stale.len(),
    })
}

/// Uploads `local_run` to `url`, then makes it the cached copy of `url`
/// (a rename within the cache when it was staged there), so that reading the
/// run back fetches nothing.
pub async fn publish_run(
    local_run: &Path,
    url: &RemoteUrl,
    cache: &Cache,
) -> Result<Published, StoreError> {
    let transfer = upload_run(local_run, url).await?;
    let store = open(url)?;
    let objects = list_objects(&store, url).await?;
    let cached = cache.run_dir(url);
    let same = match (fs::canonicalize(local_run), fs::canonicalize(&cached)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let dir = if same || move_dir(local_run, &cached).is_ok() {
        cached
    } else {
        local_run.to_path_buf()
    };
    CacheIndex::from_listing(url, &objects).write(&dir)?;
    Ok(Published { dir, transfer })
}

/// Replaces `to` by `from`; fails (leaving `from`) across file systems.
fn move_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    fs::rename(from, to)
}

/// Brings the run at `url` into the cache and returns its directory there.
/// Files already fetched and unchanged remotely are kept; files the remote
/// run no longer has are removed, so the copy is the remote run.
pub async fn download_run(url: &RemoteUrl, cache: &Cache) -> Result<Published, StoreError> {
    let store = open(url)?;
    let objects = list_objects(&store, url).await?;
    if !objects.contains_key(Manifest::FILE_NAME) {
        return Err(StoreError::NotARun {
            url: url.to_string(),
        });
    }
    let dir = cache.run_dir(url);
    fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
    let index = CacheIndex::read(&dir, url);
    let (current, stale): (Vec<_>, Vec<_>) = objects
        .iter()
        .partition(|(rel, meta)| index.is_current(&dir, rel, meta));
    // The manifest last: a run read while this runs (a second tack on the
    // same cache) is the old one or the whole new one.
    let (manifest, parts): (Vec<_>, Vec<_>) = stale
        .into_iter()
        .partition(|(rel, _)| rel.as_str() == Manifest::FILE_NAME);
    let sizes: Vec<u64> = stream::iter(parts)
        .map(|(rel, meta)| {
            let (store, dir) = (store.clone(), dir.clone());
            async move { get_file(&store, url, rel, meta, &dir).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let mut bytes: u64 = sizes.iter().sum();
    for (rel, meta) in &manifest {
        bytes += get_file(&store, url, rel, meta, &dir).await?;
    }
    let mut removed = 0;
    for rel in run_files(&dir)? {
        if !objects.contains_key(&rel) {
            let path = dir.join(&rel);
            fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            removed += 1;
        }
    }
    CacheIndex::from_listing(url, &objects).write(&dir)?;
    Ok(Published {
        dir,
        transfer: Transfer {
            files: sizes.len() + manifest.len(),
            bytes,
            unchanged: current.len(),
            removed,
        },
    })
}

fn check_uploadable(local_run: &Path) -> Result<(), StoreError> {
    let refuse = |reason: &str| StoreError::LocalRun {
        path: local_run.to_path_buf(),
        reason: reason.to_string(),
    };
    if !local_run.join(Manifest::FILE_NAME).is_file() {
        return Err(refuse(
            "it holds no manifest.json; is it a run's directory?",
        ));
    }
    let writer = tack_trace::run_writer(local_run);
    if writer.is_live() {
        return Err(refuse(&format!(
            "{writer} is still writing it (see {}); upload it once that has ended",
            tack_trace::PID_FILE
        )));
    }
    // A compaction cut off by a crash is completed, so that what goes up is
    // one consistent set of parts.
    tack_trace::finish_pending(local_run)?;
    Ok(())
}

/// The run's files, as `/`-separated paths under its directory: every file
/// but temporaries (hidden names), the cache's index and the pid file.
fn run_files(dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut files = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = pending.pop() {
        let entries = fs::read_dir(&path).map_err(|e| StoreError::io(&path, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&path, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(StoreError::LocalRun {
                    path: entry.path(),
                    reason: "its name is not UTF-8, which object stores require".to_string(),
                });
            };
            let claim = [tack_trace::PID_FILE, tack_trace::CLAIM_FILE].contains(&name);
            if name.starts_with('.') || (rel.is_empty() && claim) {
                continue;
            }
            let child = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry
                .file_type()
                .map_err(|e| StoreError::io(&entry.path(), e))?;
            if kind.is_dir() {
                pending.push((entry.path(), child));
            } else if kind.is_file() {
                files.push(child);
            } else {
                // Uploading a link would upload what it points at (a key).
                return Err(StoreError::LocalRun {
                    path: entry.path(),
                    reason: "is not a regular file (a link is not followed); a run holds only \
                             the files tack wrote"
                        .to_string(),
                });
            }
        }
    }
    files.sort();
    Ok(files)
}

fn object(url: &RemoteUrl, rel: &str) -> ObjectPath {
    rel.split('/')
        .fold(url.object_path(), |path, part| path.join(part))
}

/// Every object under `url`, by its path below it.
pub(crate) async fn list_objects(
    store: &Arc<dyn ObjectStore>,
    url: &RemoteUrl,
) -> Result<BTreeMap<String, ObjectMeta>, StoreError> {
    let prefix = url.object_path();
    let listed: Vec<ObjectMeta> = match store.list(Some(&prefix)).try_collect().await {
        Ok(listed) => listed,
        Err(object_store::Error::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(remote_error(url, "list the run's files", e)),
    };
    let mut objects = BTreeMap::new();
    for meta in listed {
        let Some(parts) = meta.location.prefix_match(&prefix) else {
            continue;
        };
        let parts: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
        // Only what a run directory can hold: no empty, `.` or `..` parts,
        // no hidden names (temporaries, the cache index).
        let safe = !parts.is_empty()
            && parts
                .iter()
                .all(|p| !p.is_empty() && !p.starts_with('.') && p != INDEX_FILE);
        if safe {
            objects.insert(parts.join("/"), meta);
        }
    }
    Ok(objects)
}

/// Uploads one file; returns its size.
async fn put_file(
    store: &Arc<dyn ObjectStore>,
    url: &RemoteUrl,
    rel: &str,
    path: &Path,
    single_put_limit: usize,
) -> Result<u64, StoreError> {
    let location = object(url, rel);
    let failed = |e| remote_error(&url.join(rel), "upload", e);
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|e| StoreError::io(path, e))?;
    let size = file
        .metadata()
        .await
        .map_err(|e| StoreError::io(path, e))?
        .len();
    if size <= single_put_limit as u64 {
        let mut bytes = Vec::with_capacity(size as usize);
        file.read_to_end(&mut bytes)
            .await
            .map_err(|e| StoreError::io(path, e))?;
        store
            .put(&location, PutPayload::from(bytes))
            .await
            .map_err(failed)?;
        return Ok(size);
    }
    let upload = store.put_multipart(&location).await.map_err(failed)?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, single_put_limit);
    let mut buffer = vec![0u8; single_put_limit];
    loop {
        let read = match file.read(&mut buffer).await {
            Ok(read) => read,
            Err(e) => {
                // Leave no half-uploaded object behind.
                let _ = writer.abort().await;
                return Err(StoreError::io(path, e));
            }
        };
        if read == 0 {
            break;
        }
        writer.wait_for_capacity(2).await.map_err(failed)?;
        writer.write(&buffer[..read]);
    }
    writer.finish().await.map_err(failed)?;
    Ok(size)
}

/// Downloads one object into `dir` under a temporary name, then renames it;
/// returns its size.
async fn get_file(
    store: &Arc<dyn ObjectStore>,
    url: &RemoteUrl,
    rel: &str,
    meta: &ObjectMeta,
    dir: &Path,
) -> Result<u64, StoreError> {
    let failed = |e| remote_error(&url.join(rel), "download", e);
    let path = dir.join(rel);
    let parent = path.parent().unwrap_or(dir);
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|e| StoreError::io(parent, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = parent.join(format!(".{name}.download-{}", std::process::id()));
    let result = async {
        let mut stream = store
            .get(&meta.location)
            .await
            .map_err(failed)?
            .into_stream();
        let mut file = tokio::fs::File::create(&temporary)
            .await
            .map_err(|e| StoreError::io(&temporary, e))?;
        let mut size = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(failed)?;
            size += chunk.len() as u64;
            file.write_all(&chunk)
                .await
                .map_err(|e| StoreError::io(&temporary, e))?;
        }
        file.sync_all()
            .await
            .map_err(|e| StoreError::io(&temporary, e))?;
        tokio::fs::rename(&temporary, &path)
            .await
            .map_err(|e| StoreError::io(&path, e))?;
        Ok(size)
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&temporary).await;
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Uploading a link would upload what it points at: refused.
    #[test]
    fn a_link_in_a_run_is_not_uploaded() {
        let temp = tempfile::tempdir().unwrap();
        let run = temp.path().join("run-1");
        fake_run(&run);
        let secret = temp.path().join("id_rsa");
        fs::write(&secret, "PRIVATE KEY").unwrap();
        std::os::unix::fs::symlink(&secret, run.join("spans/part-000-00009.parquet")).unwrap();
        let error = run_files(&run).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }

    /// A run directory as a writer leaves it, with a part bigger than the
    /// test's single-put limit.
    fn fake_run(dir: &Path) {
        for (rel, bytes) in [
            ("manifest.json", b"{}".to_vec()),
            ("trials/part-000-00000.parquet", vec![1u8; 40]),
            ("spans/part-000-00000.parquet", vec![2u8; 100_000]),
            ("journal/t.jsonl", b"{}\n".to_vec()),
            ("trials/.part-000-00001.parquet.partial", vec![3u8; 10]),
        ] {
            let path = dir.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
    }

    #[tokio::test]
    async fn big_files_go_up_in_parts_and_come_back_whole() {
        let temp = tempfile::tempdir().unwrap();
        let run = temp.path().join("run-1");
        fake_run(&run);
        let bucket = temp.path().join("bucket");
        fs::create_dir_all(&bucket).unwrap();
        let url = RemoteUrl::parse(&format!("file://{}/run-1", bucket.display())).unwrap();
        let up = upload_run_with(&run, &url, 4096).await.unwrap();
        assert_eq!(up.files, 4);
        assert_eq!(up.bytes, 2 + 40 + 100_000 + 3);
        let cache = Cache::at(temp.path().join("cache"));
        let down = download_run(&url, &cache).await.unwrap();
        assert_eq!(
            fs::read(down.dir.join("spans/part-000-00000.parquet")).unwrap(),
            vec![2u8; 100_000]
        );
        assert!(
            !down
                .dir
                .join("trials/.part-000-00001.parquet.partial")
                .exists()
        );
    }
}
