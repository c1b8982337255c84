//! The HTTP side: hyper HTTP/1.1 connections, each on a task; the token
//! checked on every request; pages made on the blocking pool (Polars
//! queries and Parquet reads); the same protective headers on every answer.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::auth::{COOKIE, same_token, token_in_cookies};
use crate::pages::{self, Answer};
use crate::params::Params;
use crate::state::Viewer;

/// No script from anywhere, styles and images only from the viewer itself
/// (the forest plot is inline SVG markup, not an image), forms only to
/// itself, and no framing: a trace's `<script>` or `onerror=` is inert even
/// if escaping ever missed one.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Serves `viewer` on `listener` until `stop` resolves.
pub async fn serve(listener: TcpListener, viewer: Arc<Viewer>, stop: impl Future<Output = ()>) {
    let mut connections = JoinSet::new();
    // A browser sends a host's cookies to every port of it: named for the
    // port, two viewers on one machine keep a cookie each.
    let cookie: Arc<str> = match listener.local_addr() {
        Ok(address) => format!("{COOKIE}_{}", address.port()).into(),
        Err(_) => COOKIE.into(),
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A failed accept concerns that one client.
                let Ok((stream, _)) = accepted else { continue };
                let viewer = viewer.clone();
                let cookie = cookie.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        answer(viewer.clone(), cookie.clone(), request)
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            () = &mut stop => break,
        }
        while connections.try_join_next().is_some() {}
    }
    // The viewer only reads: nothing is lost by cutting a page short.
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

async fn answer(
    viewer: Arc<Viewer>,
    cookie_name: Arc<str>,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Ok(respond(Answer::status(
            StatusCode::METHOD_NOT_ALLOWED,
            "The viewer only reads: GET a page.",
        )));
    }
    let path = request.uri().path().to_string();
    let params = Params::parse(request.uri().query());
    let token = viewer.options.token.clone();
    if let Some(given) = params.get("token") {
        if !same_token(given, &token) {
            return Ok(respond(forbidden()));
        }
        // The token leaves the address bar (and the history) at once. A
        // path of `//host/…` would redirect to another site: never.
        let local = if path.starts_with("//") {
            "/"
        } else {
            path.as_str()
        };
        let mut response = respond(Answer::Redirect(params.without("token").url(local)));
        let cookie = format!("{cookie_name}={token}; HttpOnly; SameSite=Strict; Path=/");
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return Ok(response);
    }
    let cookie_ok = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|header| token_in_cookies(header, &cookie_name))
        .any(|given| same_token(given, &token));
    if !cookie_ok {
        return Ok(respond(forbidden()));
    }
    let page = tokio::task::spawn_blocking(move || pages::page(&viewer, &path, &params)).await;
    Ok(respond(page.unwrap_or_else(|_| {
        Answer::status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The page failed to render (a bug in tack view); the terminal running it may say more.",
        )
    })))
}

fn forbidden() -> Answer {
    Answer::status(
        StatusCode::FORBIDDEN,
        "This viewer needs its access token: open the address `tack view` printed (it ends in ?token=…).",
    )
}

fn respond(answer: Answer) -> Response<Full<Bytes>> {
    let (status, content_type, body, location) = match answer {
        Answer::Html(status, html) => (status, "text/html; charset=utf-8", html, None),
        Answer::Css(css) => (StatusCode::OK, "text/css; charset=utf-8", css, None),
        Answer::Text(text) => (StatusCode::OK, "text/plain; charset=utf-8", text, None),
        Answer::Redirect(to) => (StatusCode::SEE_OTHER, "text/plain", String::new(), Some(to)),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    let fixed = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if let Some(location) = location.and_then(|to| HeaderValue::from_str(&to).ok()) {
        headers.insert(header::LOCATION, location);
    }
    response
}
