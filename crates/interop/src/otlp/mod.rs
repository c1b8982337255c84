//! Runs as OpenTelemetry traces, sent to a collector over OTLP: HTTP with
//! protobuf bodies (`POST …/v1/traces`) or gRPC (the `TraceService/Export`
//! call over HTTP/2). Where to send and how come from flags or the standard
//! `OTEL_EXPORTER_OTLP_*` variables ([`Target`]); what is sent is in
//! [`spans`].

pub mod spans;
mod stream;

use std::path::PathBuf;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use tack_analysis::RunTables;

use crate::InteropError;
pub use spans::{RunContext, trial_spans};
pub use stream::{Streamed, Streamer};

/// How OTLP is spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Protocol {
    /// `http/protobuf`: POST to `<endpoint>/v1/traces`.
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// `grpc`: `TraceService/Export` over HTTP/2 (cleartext for `http://`).
    #[serde(rename = "grpc")]
    Grpc,
}

impl Protocol {
    pub fn parse(text: &str) -> Result<Protocol, InteropError> {
        match text {
            "http/protobuf" | "http" => Ok(Protocol::HttpProtobuf),
            "grpc" => Ok(Protocol::Grpc),
            other => Err(InteropError::Otlp(format!(
                "OTLP protocol `{other}` is not supported; use `http/protobuf` or `grpc`"
            ))),
        }
    }
}

/// Where spans go.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    /// The full URL requests go to.
    pub url: String,
    pub protocol: Protocol,
    /// Never printed: they may hold an API key.
    #[serde(skip)]
    pub headers: Vec<(String, String)>,
    #[serde(rename = "timeout_ms", serialize_with = "millis")]
    pub timeout: Duration,
    /// What describes the sender: `service.name` (`tack`, else
    /// `OTEL_SERVICE_NAME`) and `OTEL_RESOURCE_ATTRIBUTES`, as the
    /// OpenTelemetry SDKs read them; a collector groups runs by these.
    pub resource: Vec<(String, String)>,
}

fn millis<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// The OTLP exporter variables tack reads, the traces-specific one first.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

impl Target {
    /// From flags, else the `OTEL_EXPORTER_OTLP_*` variables (read through
    /// `env`): `endpoint` is a base URL (`http://host:4318`; the HTTP path
    /// `/v1/traces` is added unless it is there), as is
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// is taken as written. Headers are `key=value`, from flags and
    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` (comma-separated,
    /// percent-encoded values).
    pub fn new(
        endpoint: Option<&str>,
        protocol: Option<&str>,
        headers: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Target, InteropError> {
        let var = |names: &[&str]| {
            names
                .iter()
                .find_map(|name| env(name).filter(|v| !v.is_empty()))
        };
        let protocol = match protocol.map(str::to_string).or_else(|| {
            var(&[
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ])
        }) {
            Some(text) => Protocol::parse(&text)?,
            None => Protocol::HttpProtobuf,
        };
        let (base, as_written) = match endpoint {
            Some(endpoint) => (endpoint.to_string(), false),
            None => match env(ENDPOINT_VARS[0]).filter(|v| !v.is_empty()) {
                Some(url) => (url, true),
                None => (var(&ENDPOINT_VARS[1..]).ok_or_else(|| {
                    InteropError::Otlp(
                        "no OTLP endpoint: pass --endpoint URL (e.g. http://127.0.0.1:4318) or set OTEL_EXPORTER_OTLP_ENDPOINT".into(),
                    )
                })?, false),
            },
        };
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(InteropError::Otlp(format!(
                "the OTLP endpoint `{base}` is not an http:// or https:// URL"
            )));
        }
        let trimmed = base.trim_end_matches('/');
        let url = match protocol {
            Protocol::HttpProtobuf if as_written || trimmed.ends_with("/v1/traces") => {
                trimmed.to_string()
            }
            Protocol::HttpProtobuf => format!("{trimmed}/v1/traces"),
            Protocol::Grpc => {
                format!("{trimmed}/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            }
        };
        // Each list variable by name, for its errors.
        let named = |names: &[&'static str]| {
            names
                .iter()
                .find_map(|name| Some((*name, env(name).filter(|v| !v.is_empty())?)))
        };
        let mut pairs = Vec::new();
        if let Some((name, listed)) = named(&[
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ]) {
            pairs.extend(pairs_of(&listed, name)?);
        }
        for item in headers {
            pairs.push(pair(item, None, "header")?);
        }
        let timeout = match named(&[
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]) {
            None => Duration::from_secs(10),
            Some((name, ms)) => ms.trim().parse::<u64>().map(Duration::from_millis).map_err(|_| {
                InteropError::Otlp(format!(
                    "{name} is `{ms}`: give the export timeout in whole milliseconds (e.g. 10000)"
                ))
            })?,
        };
        let resource = resource(
            env("OTEL_RESOURCE_ATTRIBUTES").filter(|v| !v.is_empty()),
            env("OTEL_SERVICE_NAME").filter(|v| !v.is_empty()),
        )?;
        Ok(Target {
            url,
            protocol,
            headers: pairs,
            timeout,
            resource,
        })
    }
}

/// The resource, as the OpenTelemetry SDKs make it: `OTEL_RESOURCE_ATTRIBUTES`
/// (`listed`), `service.name` from `OTEL_SERVICE_NAME` (`service`) over it,
/// else `tack`; `service.version` always tack's.
fn resource(
    listed: Option<String>,
    service: Option<String>,
) -> Result<Vec<(String, String)>, InteropError> {
    let mut resource = match listed {
        Some(listed) => pairs_of(&listed, "OTEL_RESOURCE_ATTRIBUTES")?,
        None => Vec::new(),
    };
    resource.retain(|(key, _)| key != "service.version");
    let named = resource.iter().position(|(key, _)| key == "service.name");
    match (service, named) {
        (Some(name), Some(at)) => resource[at].1 = name,
        (Some(name), None) => resource.insert(0, ("service.name".to_string(), name)),
        (None, Some(_)) => {}
        (None, None) => resource.insert(0, ("service.name".to_string(), "tack".to_string())),
    }
    resource.push((
        "service.version".to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    ));
    Ok(resource)
}

/// A variable's comma-separated `key=value` pairs, percent-decoded.
fn pairs_of(listed: &str, variable: &str) -> Result<Vec<(String, String)>, InteropError> {
    listed
        .split(',')
        .filter(|item| !item.trim().is_empty())
        .map(|item| pair(item, Some(variable), "item"))
        .collect()
}

/// `key=value`; from a variable (named, for the error) the value is
/// percent-decoded.
fn pair(item: &str, variable: Option<&str>, what: &str) -> Result<(String, String), InteropError> {
    let (key, value) = item.split_once('=').ok_or_else(|| {
        InteropError::Otlp(match variable {
            Some(name) => format!("{name}: the {what} `{item}` is not `key=value`"),
            None => format!("the OTLP {what} `{item}` is not `key=value`"),
        })
    })?;
    let value = match variable {
        Some(_) => percent_decode(value.trim()),
        None => value.to_string(),
    };
    Ok((key.trim().to_string(), value))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends batches of spans to one [`Target`].
pub struct Exporter {
    client: reqwest::Client,
    target: Target,
    resource: Resource,
}

/// What an export sent and what it lost.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Sent {
    pub spans: u64,
    pub requests: u64,
    /// Spans in requests that failed, or that the collector rejected.
    pub dropped_spans: u64,
    /// The first failure, said once.
    pub first_error: Option<String>,
}

impl Exporter {
    pub fn new(target: Target) -> Result<Exporter, InteropError> {
        tack_providers::wire::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("tack/", env!("CARGO_PKG_VERSION")))
            .timeout(target.timeout)
            .connect_timeout(target.timeout.min(Duration::from_secs(5)));
        if target.protocol == Protocol::Grpc && target.url.starts_with("http://") {
            // gRPC without TLS speaks HTTP/2 from the first byte.
            builder = builder.http2_prior_knowledge();
        }
        let client = builder
            .build()
            .map_err(|e| InteropError::Otlp(format!("cannot make an HTTP client: {e}")))?;
        let resource = Resource {
            attributes: {
                let mut a = spans::Attributes::default();
                for (key, value) in &target.resource {
                    a.str(key, value);
                }
                a.0
            },
            ..Resource::default()
        };
        Ok(Exporter {
            client,
            target,
            resource,
        })
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Sends `spans` in one request; what did not arrive is counted in
    /// `sent`, never retried forever. False when the request failed (no
    /// answer, or an error status), not when the collector answered and
    /// rejected some spans.
    pub async fn send(&self, spans: Vec<Span>, sent: &mut Sent) -> bool {
        let count = spans.len() as u64;
        if count == 0 {
            return true;
        }
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(self.resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "tack".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..InstrumentationScope::default()
                    }),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        sent.requests += 1;
        match self.post(&request).await {
            Ok(rejected) => {
                sent.spans += count - rejected.min(count);
                sent.dropped_spans += rejected.min(count);
                true
            }
            Err(error) => {
                sent.dropped_spans += count;
                sent.first_error.get_or_insert(error);
                false
            }
        }
    }

    /// One request; the spans the collector rejected (partial success).
    async fn post(&self, request: &ExportTraceServiceRequest) -> Result<u64, String> {
        let message = request.encode_to_vec();
        let mut post = self.client.post(&self.target.url);
        for (key, value) in &self.target.headers {
            post = post.header(key, value);
        }
        let post = match self.target.protocol {
            Protocol::HttpProtobuf => post
                .header("content-type", "application/x-protobuf")
                .body(message),
            Protocol::Grpc => {
                // A gRPC message: uncompressed flag, length, protobuf.
                let mut framed = Vec::with_capacity(message.len() + 5);
                framed.push(0);
                framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                framed.extend_from_slice(&message);
                post.header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .body(framed)
            }
        };
        let url = &self.target.url;
        let response = post
            .send()
            .await
            .map_err(|e| format!("{url}: {}", describe(&e)))?;
        let status = response.status();
        let grpc_status = response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let grpc_message = response
            .headers()
            .get("grpc-message")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("{url}: reading the answer: {}", describe(&e)))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let text: String = text.chars().take(300).collect();
            return Err(format!("{url} answered {status}: {text}"));
        }
        if let Some(code) = grpc_status.filter(|c| c != "0") {
            return Err(format!(
                "{url} answered gRPC status {code}: {}",
                grpc_message.unwrap_or_default()
            ));
        }
        let payload = match self.target.protocol {
            Protocol::HttpProtobuf => &body[..],
            Protocol::Grpc => body.get(5..).unwrap_or_default(),
        };
        let answer = ExportTraceServiceResponse::decode(payload).unwrap_or_default();
        Ok(answer.partial_success.map_or(0, |partial| {
            u64::try_from(partial.rejected_spans).unwrap_or(0)
        }))
    }
}

fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "no answer in time".into()
    } else if error.is_connect() {
        "could not connect (is the collector running?)".into()
    } else {
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text = format!("{text}: {cause}");
            source = cause.source();
        }
        text
    }
}

/// Trials read and sent per request.
const BATCH: usize = 64;

/// What `tack export otlp` sent, per run and in all.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exported {
    pub target: Target,
    pub runs: Vec<PathBuf>,
    pub trials: u64,
    pub sent: Sent,
}

/// Sends every trial of each run (every attempt) to `exporter`;
/// `progress(trials done, trials in all)` after each request.
pub async fn export(
    runs: &[PathBuf],
    exporter: &Exporter,
    content: bool,
    mut progress: impl FnMut(u64, u64),
) -> Result<Exported, InteropError> {
    let mut plans = Vec::new();
    for run_dir in runs {
        let tables = RunTables::open(run_dir)?;
        let ids = crate::trial_ids(run_dir)?;
        plans.push((tables, ids));
    }
    let total: u64 = plans.iter().map(|(_, ids)| ids.len() as u64).sum();
    let mut sent = Sent::default();
    let mut done = 0;
    for (tables, ids) in &plans {
        let manifest = tables.manifest();
        let context = RunContext {
            run_id: manifest.run_id.clone(),
            simulated: crate::simulated_variants(manifest),
            content,
        };
        for batch in ids.chunks(BATCH) {
            let traces = tack_analysis::load_trials(tables, batch)?;
            let spans: Vec<Span> = traces
                .iter()
                .flat_map(|trace| trial_spans(trace, &context))
                .collect();
            // A failed request is counted in `sent`; the next one is tried.
            exporter.send(spans, &mut sent).await;
            done += batch.len() as u64;
            progress(done, total);
        }
    }
    Ok(Exported {
        target: exporter.target.clone(),
        runs: runs.to_vec(),
        trials: total,
        sent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn flags_and_variables_name_the_url_the_protocol_and_the_headers() {
        let t = Target::new(Some("http://127.0.0.1:4318/"), None, &[], env(&[])).unwrap();
        assert_eq!(t.url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(t.protocol, Protocol::HttpProtobuf);
        let t = Target::new(Some("http://c:4317"), Some("grpc"), &[], env(&[])).unwrap();
        assert_eq!(
            t.url,
            "http://c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        );
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x=1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ];
        let t = Target::new(None, None, &["y=2".into()], env(&vars)).unwrap();
        assert_eq!(t.url, "https://otel.example:4318/v1/traces");
        assert_eq!(
            t.headers,
            [
                ("api-key".to_string(), "a b".to_string()),
                ("x".to_string(), "1".to_string()),
                ("y".to_string(), "2".to_string())
            ]
        );
        assert_eq!(t.timeout, Duration::from_millis(2500));
        // The traces-specific variable is a whole URL, taken as written.
        let vars = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:1/custom")];
        assert_eq!(
            Target::new(None, None, &[], env(&vars)).unwrap().url,
            "http://h:1/custom"
        );
        let missing = Target::new(None, None, &[], env(&[]))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("--endpoint"), "{missing}");
        let json = Target::new(Some("http://h"), Some("http/json"), &[], env(&[]));
        assert!(json.unwrap_err().to_string().contains("http/protobuf"));
        assert!(Target::new(Some("h:4318"), None, &[], env(&[])).is_err());
        assert!(Target::new(Some("http://h"), None, &["novalue".into()], env(&[])).is_err());
    }

    #[test]
    fn the_resource_and_bad_variables_are_read_as_the_sdks_read_them() {
        let t = Target::new(Some("http://h"), None, &[], env(&[])).unwrap();
        assert_eq!(t.resource[0], ("service.name".into(), "tack".into()));
        let vars = [
            ("OTEL_SERVICE_NAME", "evals"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=ci,team=a%20b",
            ),
        ];
        let t = Target::new(Some("http://h"), None, &[], env(&vars)).unwrap();
        let keys: Vec<(&str, &str)> = t
            .resource
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            keys[..3],
            [
                ("service.name", "evals"),
                ("deployment.environment", "ci"),
                ("team", "a b")
            ]
        );
        let bad = |name: &'static str, value: &'static str| {
            Target::new(Some("http://h"), None, &[], env(&[(name, value)]))
                .unwrap_err()
                .to_string()
        };
        assert!(
            bad("OTEL_EXPORTER_OTLP_TIMEOUT", "abc")
                .contains("OTEL_EXPORTER_OTLP_TIMEOUT is `abc`")
        );
        assert!(
            bad("OTEL_EXPORTER_OTLP_HEADERS", "nokey")
                .contains("OTEL_EXPORTER_OTLP_HEADERS: the item `nokey`")
        );
        assert!(bad("OTEL_RESOURCE_ATTRIBUTES", "x").contains("OTEL_RESOURCE_ATTRIBUTES"));
    }
}
