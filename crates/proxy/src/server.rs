//! The listening side: hyper HTTP/1.1 connections, each on a task of its
//! own, until the stop signal; then each connection finishes the request
//! it is answering, within the grace period.

use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tack_protocol::EventSink;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::SHUTDOWN_GRACE;
use crate::forward::{Shared, handle};

/// Accepts until `stop` turns true (or its sender is gone), then drains.
pub(crate) async fn serve<S: EventSink + 'static>(
    listener: TcpListener,
    shared: Arc<Shared<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A failed accept (out of descriptors, a reset) concerns
                // that one client; the next may well succeed.
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                connections.spawn(connection(stream, shared.clone(), stop.clone()));
            }
            _ = stopped(&mut stop) => break,
        }
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    drop(shared);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        // Dropping a connection drops the answer it was streaming, which
        // records the call as cut off.
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
}

async fn connection<S: EventSink + 'static>(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let service = service_fn(move |request| handle(shared.clone(), request));
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopped(&mut stop) => {
            // Ends the connection after the answer in progress, if any.
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Resolves once the proxy is told to stop, or its handle is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns must not live across an await.
    let _ = stop.wait_for(|stopped| *stopped).await.map(|_| ());
}
