//! One object-store client per URL, configured from the environment.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;

use crate::{RemoteUrl, Scheme, StoreError};

/// The store holding `url`'s bucket, with credentials and endpoint from the
/// standard environment variables ([`Scheme::credentials_hint`]).
pub(crate) fn open(url: &RemoteUrl) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match url.scheme() {
        Scheme::S3 => AmazonS3Builder::from_env()
            .with_url(url.as_str())
            .build()
            .map(|s| Arc::new(s) as _),
        Scheme::Gcs => GoogleCloudStorageBuilder::from_env()
            .with_url(url.as_str())
            .build()
            .map(|s| Arc::new(s) as _),
        Scheme::Azure => MicrosoftAzureBuilder::from_env()
            .with_url(url.as_str())
            .build()
            .map(|s| Arc::new(s) as _),
        Scheme::File => Ok(Arc::new(LocalFileSystem::new())),
    };
    built.map_err(|error| StoreError::Client {
        url: url.to_string(),
        service: url.scheme().service(),
        error: Box::new(error),
        hint: url.scheme().credentials_hint(),
    })
}

/// Wraps a failed request to the store, with what to check.
pub(crate) fn remote_error(
    url: &RemoteUrl,
    action: &'static str,
    error: object_store::Error,
) -> StoreError {
    let hint = match &error {
        object_store::Error::NotFound { .. } => format!(
            "check that the bucket and path exist; {}",
            url.scheme().credentials_hint()
        ),
        _ => url.scheme().credentials_hint().to_string(),
    };
    StoreError::Remote {
        url: url.to_string(),
        action,
        error: Box::new(error),
        hint,
    }
}
