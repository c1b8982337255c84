//! Where runs are: a directory on this machine, or a URL in object storage.

use std::fmt;
use std::path::{Path, PathBuf};

use object_store::path::Path as ObjectPath;
use url::Url;

use crate::StoreError;

/// The object stores tack reads and writes runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    S3,
    Gcs,
    Azure,
    File,
}

/// The URL forms accepted, for error messages and `--help`.
pub const SUPPORTED: &str = "s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX \
     (also abfs://, abfss://, azure://) or file:///ABSOLUTE/PATH";

impl Scheme {
    fn from_name(name: &str) -> Option<Scheme> {
        match name {
            "s3" | "s3a" => Some(Scheme::S3),
            "gs" => Some(Scheme::Gcs),
            "az" | "azure" | "abfs" | "abfss" => Some(Scheme::Azure),
            "file" => Some(Scheme::File),
            _ => None,
        }
    }

    /// The service, as people name it.
    pub fn service(self) -> &'static str {
        match self {
            Scheme::S3 => "S3",
            Scheme::Gcs => "Google Cloud Storage",
            Scheme::Azure => "Azure Blob Storage",
            Scheme::File => "local file system",
        }
    }

    /// Where credentials and endpoints come from: the environment variables
    /// object_store's builders read (`from_env`).
    pub fn credentials_hint(self) -> &'static str {
        match self {
            Scheme::S3 => {
                "credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or \
                 AWS_SESSION_TOKEN, a web identity, or the instance's role), the region from \
                 AWS_REGION; for an S3-compatible server (MinIO, Ceph, moto) set AWS_ENDPOINT_URL, \
                 and AWS_ALLOW_HTTP=true if it speaks plain http"
            }
            Scheme::Gcs => {
                "credentials come from GOOGLE_SERVICE_ACCOUNT (a service account file), \
                 GOOGLE_SERVICE_ACCOUNT_KEY (its JSON) or GOOGLE_APPLICATION_CREDENTIALS"
            }
            Scheme::Azure => {
                "the account comes from AZURE_STORAGE_ACCOUNT_NAME and the key from \
                 AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_CLIENT_ID, AZURE_STORAGE_CLIENT_SECRET \
                 and AZURE_STORAGE_TENANT_ID); AZURE_STORAGE_USE_EMULATOR=true for Azurite"
            }
            Scheme::File => "the directory must be readable and writable by this user",
        }
    }
}

/// A directory in object storage: a prefix that runs are stored under, or
/// one run (`<prefix>/<run-id>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemoteUrl {
    url: Url,
    scheme: Scheme,
}

impl RemoteUrl {
    /// Parses `s3://bucket/prefix` and the like; a trailing `/` is dropped.
    pub fn parse(text: &str) -> Result<RemoteUrl, StoreError> {
        let bad = |reason: String| StoreError::Location {
            location: text.to_string(),
            reason,
        };
        let mut url = Url::parse(text).map_err(|e| bad(format!("not a URL ({e})")))?;
        let scheme = Scheme::from_name(url.scheme()).ok_or_else(|| {
            bad(format!(
                "tack cannot store runs at {}:// URLs; use a directory, or {SUPPORTED}",
                url.scheme()
            ))
        })?;
        let host = url.host_str().unwrap_or_default();
        match scheme {
            Scheme::File if !host.is_empty() => {
                return Err(bad(format!(
                    "a file URL names an absolute path, with three slashes: file:///{host}{}",
                    url.path()
                )));
            }
            Scheme::File => {}
            _ if host.is_empty() => {
                return Err(bad(format!(
                    "name the bucket or container: {}://BUCKET/PREFIX",
                    url.scheme()
                )));
            }
            _ => {}
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "a query (?…) or fragment (#…) means nothing here; configure the store through \
                 the environment instead"
                    .to_string(),
            ));
        }
        if let Some(segment) = url
            .path_segments()
            .into_iter()
            .flatten()
            .find(|s| matches!(*s, "." | ".."))
        {
            return Err(bad(format!("the path may not contain `{segment}`")));
        }
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty();
        }
        ObjectPath::from_url_path(url.path())
            .map_err(|e| bad(format!("not a valid object path: {e}")))?;
        Ok(RemoteUrl { url, scheme })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// The bucket or container (empty for file URLs).
    pub fn bucket(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// `self/name`.
    pub fn join(&self, name: &str) -> RemoteUrl {
        let mut url = self.url.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(name);
        }
        RemoteUrl {
            url,
            scheme: self.scheme,
        }
    }

    /// The last path segment, decoded: a run's id when the URL names a run.
    pub fn name(&self) -> Option<String> {
        self.object_path().filename().map(str::to_string)
    }

    /// The URL one segment up, if the path has a segment.
    pub fn parent(&self) -> Option<RemoteUrl> {
        self.name()?;
        let mut url = self.url.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop();
        }
        Some(RemoteUrl {
            url,
            scheme: self.scheme,
        })
    }

    /// The path inside the store (the bucket is the store's).
    pub(crate) fn object_path(&self) -> ObjectPath {
        // Checked in `parse`; every later URL only appended plain segments.
        ObjectPath::from_url_path(self.url.path()).unwrap_or_default()
    }

    /// Where a copy of this URL lives under a cache directory:
    /// `<scheme>/<bucket>/<path>`, from the URL's own (percent-encoded)
    /// segments, so nothing in it can climb out of the cache.
    pub(crate) fn cache_path(&self, root: &Path) -> PathBuf {
        let mut path = root.join(self.url.scheme());
        if !self.bucket().is_empty() {
            path.push(self.bucket());
        }
        for segment in self.url.path_segments().into_iter().flatten() {
            if !segment.is_empty() {
                path.push(segment);
            }
        }
        path
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

/// A command-line argument naming where runs are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    Remote(RemoteUrl),
}

impl Location {
    /// A URL when the argument starts with `scheme://`, else a path.
    pub fn parse(arg: &Path) -> Result<Location, StoreError> {
        match arg.to_str() {
            Some(text) if url_scheme(text).is_some() => {
                RemoteUrl::parse(text).map(Location::Remote)
            }
            _ => Ok(Location::Local(arg.to_path_buf())),
        }
    }

    /// `self/name`.
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Local(dir) => Location::Local(dir.join(name)),
            Location::Remote(url) => Location::Remote(url.join(name)),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(dir) => write!(f, "{}", dir.display()),
            Location::Remote(url) => write!(f, "{url}"),
        }
    }
}

/// The scheme of `scheme://…` (RFC 3986: a letter, then letters, digits,
/// `+`, `-`, `.`).
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn remote(text: &str) -> RemoteUrl {
        match Location::parse(Path::new(text)).unwrap() {
            Location::Remote(url) => url,
            Location::Local(path) => panic!("{} parsed as a path", path.display()),
        }
    }

    fn refused(text: &str) -> String {
        Location::parse(Path::new(text)).unwrap_err().to_string()
    }

    #[test]
    fn paths_stay_paths() {
        for text in [
            "traces",
            "./traces/run",
            "/abs/dir",
            "weird:name",
            "a/b://c",
        ] {
            assert_eq!(
                Location::parse(Path::new(text)).unwrap(),
                Location::Local(PathBuf::from(text)),
                "{text}"
            );
        }
    }

    #[test]
    fn urls_name_a_bucket_and_a_prefix() {
        let url = remote("s3://bucket/runs/");
        assert_eq!(url.scheme(), Scheme::S3);
        assert_eq!(url.bucket(), "bucket");
        assert_eq!(url.as_str(), "s3://bucket/runs");
        assert_eq!(url.object_path().as_ref(), "runs");
        let run = url.join("20261201-demo-shard1of2");
        assert_eq!(run.as_str(), "s3://bucket/runs/20261201-demo-shard1of2");
        assert_eq!(run.name().as_deref(), Some("20261201-demo-shard1of2"));
        assert_eq!(run.parent().unwrap(), url);
        assert_eq!(
            run.cache_path(Path::new("/c")),
            PathBuf::from("/c/s3/bucket/runs/20261201-demo-shard1of2")
        );
        assert_eq!(remote("gs://b").object_path().as_ref(), "");
        assert_eq!(remote("gs://b").name(), None);
        assert_eq!(remote("az://container/x").scheme(), Scheme::Azure);
        let file = remote("file:///tmp/runs");
        assert_eq!(file.object_path().as_ref(), "tmp/runs");
        assert_eq!(
            file.cache_path(Path::new("/c")),
            PathBuf::from("/c/file/tmp/runs")
        );
    }

    #[test]
    fn bad_urls_say_what_to_write() {
        let unknown = refused("https://example.com/runs");
        assert!(unknown.contains("https://"), "{unknown}");
        assert!(unknown.contains("s3://BUCKET/PREFIX"), "{unknown}");
        assert!(refused("s3:///runs").contains("name the bucket"));
        assert!(refused("file://tmp/runs").contains("file:///tmp/runs"));
        assert!(refused("s3://b/runs?region=x").contains("environment"));
    }
}
