//! One object-store client per URL, configured from the environment, and
//! what its failures mean to someone who has to fix them.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::client::{ClientConfigKey, HttpError, HttpErrorKind};
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;

use crate::{RemoteUrl, Scheme, StoreError};

/// The store holding `url`'s bucket, with credentials and endpoint from the
/// standard environment variables ([`Scheme::credentials_hint`]).
pub(crate) fn open(url: &RemoteUrl) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match url.scheme() {
        Scheme::S3 => {
            let builder = AmazonS3Builder::from_env().with_url(url.as_str());
            refuse_plain_http(url, &builder)?;
            builder.build().map(|s| Arc::new(s) as _)
        }
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

/// The S3 client refuses an http:// endpoint unless told otherwise, and
/// says only "builder error" on the first request; say what to set instead.
fn refuse_plain_http(url: &RemoteUrl, builder: &AmazonS3Builder) -> Result<(), StoreError> {
    let endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_default();
    let allowed = builder
        .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
        .is_some_and(|value| value == "true");
    if endpoint.starts_with("http://") && !allowed {
        return Err(StoreError::Setup {
            url: url.to_string(),
            reason: format!(
                "AWS_ENDPOINT_URL is {endpoint}, plain http, which the S3 client refuses; set \
                 AWS_ALLOW_HTTP=true (or use an https endpoint)"
            ),
        });
    }
    Ok(())
}

/// Why a request failed, as far as the fix goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The bucket or container is not there.
    MissingBucket,
    /// The store refused the credentials, or they allow less than needed.
    Denied,
    /// Nothing answered (connection refused, DNS, timeout).
    Unreachable,
    /// The object is not there (a bucket that exists).
    NotFound,
    Other,
}

/// Error codes of S3 and Azure Blob Storage (the `<Code>` of their XML
/// error bodies) that mean the credentials are wrong or not enough.
const DENIED_CODES: &[&str] = &[
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
];

pub(crate) fn cause(error: &object_store::Error) -> Cause {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(http) = current.downcast_ref::<HttpError>()
            && matches!(http.kind(), HttpErrorKind::Connect | HttpErrorKind::Timeout)
        {
            return Cause::Unreachable;
        }
        source = current.source();
    }
    let text = error.to_string();
    match xml_tag(&text, "Code") {
        Some("NoSuchBucket" | "ContainerNotFound") => return Cause::MissingBucket,
        Some(code) if DENIED_CODES.contains(&code) => return Cause::Denied,
        _ => {}
    }
    // Google Cloud Storage answers in JSON, without a code.
    if text.contains("The specified bucket does not exist") {
        return Cause::MissingBucket;
    }
    match error {
        object_store::Error::NotFound { .. } => Cause::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => Cause::Denied,
        _ => Cause::Other,
    }
}

/// The text between `<tag>` and `</tag>`, the first time.
fn xml_tag<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let (_, rest) = text.split_once(&format!("<{tag}>"))?;
    let (inside, _) = rest.split_once(&format!("</{tag}>"))?;
    Some(inside)
}

/// The store's error text with an XML error body shortened to its code and
/// message: the request ids and the XML are noise to a reader.
pub(crate) fn detail(error: &object_store::Error) -> String {
    let text = error.to_string();
    let Some(start) = text.find("<?xml").or_else(|| text.find("<Error>")) else {
        return text;
    };
    let head = text[..start].trim_end().trim_end_matches(':');
    match (xml_tag(&text, "Code"), xml_tag(&text, "Message")) {
        (Some(code), Some(message)) => format!("{head}: {code}: {message}"),
        (Some(code), None) => format!("{head}: {code}"),
        _ => text,
    }
}

/// Where an S3 request went, for messages: the endpoint the environment
/// names, or AWS.
fn s3_endpoint() -> String {
    match std::env::var("AWS_ENDPOINT_URL").or_else(|_| std::env::var("AWS_ENDPOINT")) {
        Ok(endpoint) if !endpoint.is_empty() => format!("{endpoint} (AWS_ENDPOINT_URL)"),
        _ => "AWS (AWS_ENDPOINT_URL is not set)".to_string(),
    }
}

/// Wraps a failed request to the store, with what to check.
pub(crate) fn remote_error(
    url: &RemoteUrl,
    action: &'static str,
    error: object_store::Error,
) -> StoreError {
    let scheme = url.scheme();
    let cause = cause(&error);
    let hint = match (cause, scheme) {
        (Cause::MissingBucket, Scheme::S3) => format!(
            "the bucket `{}` does not exist at {}; create it, or correct the URL or the endpoint",
            url.bucket(),
            s3_endpoint()
        ),
        (Cause::MissingBucket, _) => format!(
            "the bucket or container `{}` does not exist; create it, or correct the URL ({})",
            url.bucket(),
            scheme.credentials_hint()
        ),
        (Cause::Unreachable, Scheme::S3) => format!(
            "nothing answered at {}; check the endpoint and the network",
            s3_endpoint()
        ),
        (Cause::Unreachable, _) => format!(
            "the {} endpoint did not answer; check the network ({})",
            scheme.service(),
            scheme.credentials_hint()
        ),
        (Cause::Denied, _) => format!(
            "the store refused the credentials: {}",
            scheme.credentials_hint()
        ),
        (Cause::NotFound, _) => format!(
            "check that the bucket and path exist; {}",
            scheme.credentials_hint()
        ),
        (Cause::Other, _) => scheme.credentials_hint().to_string(),
    };
    StoreError::Remote {
        url: url.to_string(),
        action,
        detail: detail(&error),
        error: Box::new(error),
        hint,
        usage: matches!(cause, Cause::MissingBucket | Cause::Denied),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// An S3 error as object_store reports a failed list: a generic error
    /// whose text carries the XML body.
    #[derive(Debug, thiserror::Error)]
    #[error(
        "Error performing list request: Error performing GET http://127.0.0.1:9/b?list-type=2 in \
         20ms - Server returned non-2xx status code: 404 Not Found: <?xml version=\"1.0\" \
         encoding=\"utf-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>\
         <RequestId>abc</RequestId></Error>"
    )]
    struct FakeS3 {
        code: &'static str,
        message: &'static str,
    }

    fn s3_error(code: &'static str, message: &'static str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(FakeS3 { code, message }),
        }
    }

    fn url() -> RemoteUrl {
        RemoteUrl::parse("s3://nobucket/runs").unwrap()
    }

    #[test]
    fn a_missing_bucket_is_named_and_the_xml_is_cut() {
        let error = remote_error(
            &url(),
            "list the runs",
            s3_error("NoSuchBucket", "The specified bucket does not exist"),
        );
        assert!(error.is_usage());
        let text = error.to_string();
        assert!(
            text.starts_with("s3://nobucket/runs: could not list the runs"),
            "{text}"
        );
        assert!(
            text.contains("404 Not Found: NoSuchBucket: The specified bucket does not exist"),
            "{text}"
        );
        assert!(
            !text.contains("<?xml") && !text.contains("RequestId"),
            "{text}"
        );
        assert!(
            text.contains("the bucket `nobucket` does not exist at"),
            "{text}"
        );
    }

    #[test]
    fn refused_credentials_point_at_the_variables() {
        let error = remote_error(
            &url(),
            "upload",
            s3_error("InvalidAccessKeyId", "no such key"),
        );
        assert!(error.is_usage());
        let text = error.to_string();
        assert!(text.contains("refused the credentials"), "{text}");
        assert!(text.contains("AWS_ACCESS_KEY_ID"), "{text}");
    }

    #[test]
    fn other_failures_are_the_stores_not_the_users() {
        let error = remote_error(&url(), "upload", s3_error("InternalError", "try again"));
        assert!(!error.is_usage());
        assert_eq!(
            cause(&object_store::Error::NotFound {
                path: "x".to_string(),
                source: "gone".into()
            }),
            Cause::NotFound
        );
    }

    #[test]
    fn text_without_xml_is_kept_whole() {
        let error = object_store::Error::Generic {
            store: "S3",
            source: "HTTP error: error sending request".into(),
        };
        assert_eq!(detail(&error), error.to_string());
    }
}
