//! The real key cut out of what the upstream answers: an upstream that
//! echoes the request's key (an error quoting the header) must not hand
//! the agent, which holds a stand-in, the real one, nor the trace. A
//! stream is scrubbed as it passes: an occurrence may straddle two chunks,
//! so the end of a chunk that could begin the key waits for the next one
//! (it is rare: the key's first bytes at a chunk's very end).

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderValue};

const REDACTED: &[u8] = b"[redacted]";

/// Cuts `secret` out of a body given in one piece or in chunks.
pub(crate) struct Scrub {
    secret: Vec<u8>,
    /// The end of what was fed that may be the start of the secret.
    held: Vec<u8>,
}

impl Scrub {
    pub(crate) fn new(secret: &str) -> Scrub {
        Scrub {
            secret: secret.as_bytes().to_vec(),
            held: Vec::new(),
        }
    }

    /// What of `chunk` (after what was held) can be passed on now.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Bytes {
        let needle = self.secret.as_slice();
        if needle.is_empty() {
            return Bytes::copy_from_slice(chunk);
        }
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(data.len());
        let mut rest = data.as_slice();
        while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(REDACTED);
            rest = &rest[at + needle.len()..];
        }
        let hold = (1..needle.len().min(rest.len() + 1))
            .rev()
            .find(|&n| rest.ends_with(&needle[..n]))
            .unwrap_or(0);
        let (now, later) = rest.split_at(rest.len() - hold);
        out.extend_from_slice(now);
        self.held = later.to_vec();
        Bytes::from(out)
    }

    /// What was held at the end: the body ended before the secret did.
    pub(crate) fn end(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.held))
    }

    /// `body` whole, scrubbed.
    pub(crate) fn whole(secret: &str, body: &[u8]) -> Bytes {
        let mut scrub = Scrub::new(secret);
        let mut out = scrub.feed(body).to_vec();
        out.extend_from_slice(&scrub.end());
        Bytes::from(out)
    }

    /// `headers` with every value that holds the secret redacted.
    pub(crate) fn headers(secret: &str, mut headers: HeaderMap) -> HeaderMap {
        for value in headers.values_mut() {
            if !secret.is_empty()
                && value
                    .as_bytes()
                    .windows(secret.len())
                    .any(|w| w == secret.as_bytes())
            {
                *value = HeaderValue::from_static("[redacted]");
            }
        }
        headers
    }
}

/// Every header value the request carried, and its part after a scheme
/// (`Bearer …`), and every value of its query string (`?key=…`, as
/// Gemini's API takes one): whatever the upstream echoes back of them is
/// cut out of recorded text. Scrubbing all values, not only known key
/// headers, covers keys in places this proxy has never heard of.
#[derive(Debug, Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    pub(crate) fn of(headers: &HeaderMap, query: Option<&str>) -> Secrets {
        let mut values: Vec<String> = (query.unwrap_or_default().split('&'))
            .filter_map(|pair| Some(pair.split_once('=')?.1.to_string()))
            .collect();
        for value in headers.values() {
            let Ok(text) = value.to_str() else { continue };
            let text = text.trim();
            if let Some((_, token)) = text.split_once(' ') {
                values.push(token.trim().to_string());
            }
            values.push(text.to_string());
        }
        // Short values (`1`, `json`) are not secrets and would mangle text.
        values.retain(|v| v.len() >= 8);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        Secrets(values)
    }

    /// These secrets and `key`.
    pub(crate) fn and(mut self, key: Option<&str>) -> Secrets {
        if let Some(key) = key.filter(|key| !key.is_empty()) {
            self.0.push(key.to_string());
            self.0.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
        self
    }

    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut bytes = Bytes::copy_from_slice(text.as_bytes());
        for secret in &self.0 {
            bytes = Scrub::whole(secret, &bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_cut_wherever_the_chunks_split_it() {
        let secret = "sk-real-key-123";
        let body = format!("data: {{\"echo\": \"{secret}\"}}\n\ndata: {secret}{secret}\n\nsk-re");
        let expected = "data: {\"echo\": \"[redacted]\"}\n\ndata: [redacted][redacted]\n\nsk-re";
        assert_eq!(Scrub::whole(secret, body.as_bytes()), expected.as_bytes());
        // Every way of cutting the body in two, and byte by byte.
        for at in 0..=body.len() {
            let mut scrub = Scrub::new(secret);
            let mut out = scrub.feed(&body.as_bytes()[..at]).to_vec();
            out.extend_from_slice(&scrub.feed(&body.as_bytes()[at..]));
            out.extend_from_slice(&scrub.end());
            assert_eq!(String::from_utf8(out).unwrap(), expected, "cut at {at}");
        }
        let mut scrub = Scrub::new(secret);
        let mut out = Vec::new();
        for byte in body.as_bytes() {
            out.extend_from_slice(&scrub.feed(std::slice::from_ref(byte)));
        }
        out.extend_from_slice(&scrub.end());
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn a_key_that_overlaps_itself_is_still_cut() {
        // "abcab" ends with its own start: a match must not be split by
        // what is held back.
        assert_eq!(Scrub::whole("abcab", b"xxabcab"), "xx[redacted]".as_bytes());
        let mut scrub = Scrub::new("abcab");
        let mut out = scrub.feed(b"xxabc").to_vec();
        out.extend_from_slice(&scrub.feed(b"abcabz"));
        out.extend_from_slice(&scrub.end());
        assert_eq!(out, Scrub::whole("abcab", b"xxabcabcabz"));
        assert_eq!(out, b"xx[redacted]cabz");
    }

    #[test]
    fn a_header_holding_the_secret_is_redacted() {
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", HeaderValue::from_static("Bearer sk-real-key-123"));
        headers.insert("x-request-id", HeaderValue::from_static("req-1"));
        let headers = Scrub::headers("sk-real-key-123", headers);
        assert_eq!(headers["x-echo"], "[redacted]");
        assert_eq!(headers["x-request-id"], "req-1");
    }

    #[test]
    fn header_values_are_scrubbed_from_text() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            HeaderValue::from_static("Bearer sk-test-SECRET123"),
        );
        headers.insert("x-custom-token", HeaderValue::from_static("tok-ABCDEFGH"));
        headers.insert("accept", HeaderValue::from_static("json"));
        let secrets = Secrets::of(&headers, None);
        let text = "Incorrect API key sk-test-SECRET123; also tok-ABCDEFGH as json";
        assert_eq!(
            secrets.scrub(text),
            "Incorrect API key [redacted]; also [redacted] as json"
        );
    }

    #[test]
    fn query_values_are_scrubbed_from_text() {
        let query = Some("api_key=sk-query-SECRET999&alt=sse&flag");
        let secrets = Secrets::of(&HeaderMap::new(), query);
        let text = "GET /v1/models?api_key=sk-query-SECRET999&alt=sse: 401";
        assert_eq!(
            secrets.scrub(text),
            "GET /v1/models?api_key=[redacted]&alt=sse: 401"
        );
    }
}
