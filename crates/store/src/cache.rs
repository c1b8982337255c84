//! tack's cache of runs fetched from object storage, and the staging area
//! where runs bound for it are written first.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use object_store::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::{RemoteUrl, StoreError};

/// `$XDG_CACHE_HOME/tack` (or `~/.cache/tack`): `runs/<scheme>/<bucket>/<path>`
/// holds copies of remote runs, `staging/<run-id>` runs being written for
/// upload. Staging sits beside the copies so that a run, once uploaded,
/// becomes the cached copy by a rename.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The cache under `$XDG_CACHE_HOME`, else `$HOME/.cache`.
    pub fn from_env() -> Result<Cache, StoreError> {
        let absolute = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
        };
        let base = absolute("XDG_CACHE_HOME")
            .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
            .ok_or(StoreError::NoCacheDir)?;
        Ok(Cache::at(base.join("tack")))
    }

    pub fn at(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// Where runs bound for object storage are written first.
    pub fn staging(&self) -> PathBuf {
        self.root.join("staging")
    }

    /// Where the copy of the run at `url` lives.
    pub fn run_dir(&self, url: &RemoteUrl) -> PathBuf {
        url.cache_path(&self.root.join("runs"))
    }
}

/// Beside each cached run: what each file was when fetched, so that a file
/// is fetched again only when the remote one changed. Size alone would miss
/// a compaction that rewrote a part under its old name.
pub(crate) const INDEX_FILE: &str = ".tack-store.json";

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct CacheIndex {
    url: String,
    objects: BTreeMap<String, Fetched>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Fetched {
    size: u64,
    e_tag: Option<String>,
    modified: String,
}

impl Fetched {
    fn of(meta: &ObjectMeta) -> Fetched {
        Fetched {
            size: meta.size,
            e_tag: meta.e_tag.clone(),
            modified: meta.last_modified.to_rfc3339(),
        }
    }
}

impl CacheIndex {
    /// The index of `dir`, empty if it has none or it is unreadable (every
    /// file is then fetched again).
    pub(crate) fn read(dir: &Path, url: &RemoteUrl) -> CacheIndex {
        fs::read_to_string(dir.join(INDEX_FILE))
            .ok()
            .and_then(|text| serde_json::from_str::<CacheIndex>(&text).ok())
            .filter(|index| index.url == url.as_str())
            .unwrap_or_else(|| CacheIndex {
                url: url.to_string(),
                objects: BTreeMap::new(),
            })
    }

    /// Whether the local file `rel` is the remote object `meta`.
    pub(crate) fn is_current(&self, dir: &Path, rel: &str, meta: &ObjectMeta) -> bool {
        let local_size = fs::metadata(dir.join(rel)).map(|m| m.len()).ok();
        local_size == Some(meta.size) && self.objects.get(rel) == Some(&Fetched::of(meta))
    }

    pub(crate) fn from_listing(url: &RemoteUrl, objects: &BTreeMap<String, ObjectMeta>) -> Self {
        CacheIndex {
            url: url.to_string(),
            objects: objects
                .iter()
                .map(|(rel, meta)| (rel.clone(), Fetched::of(meta)))
                .collect(),
        }
    }

    pub(crate) fn write(&self, dir: &Path) -> Result<(), StoreError> {
        let path = dir.join(INDEX_FILE);
        let temporary = dir.join(format!("{INDEX_FILE}.{}", std::process::id()));
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        fs::write(&temporary, text).map_err(|e| StoreError::io(&temporary, e))?;
        fs::rename(&temporary, &path).map_err(|e| StoreError::io(&path, e))
    }
}
