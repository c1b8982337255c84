//! How a long-running command (`tack proxy`, `tack view`, `tack run`) is told
//! to stop.

/// Resolves on Ctrl-C or SIGTERM (how scripts and supervisors stop it).
pub async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            // Without the handler only Ctrl-C stops it.
            Err(_) => std::future::pending::<()>().await,
        }
    };
    let interrupt = async {
        // Without the handler only SIGTERM stops it: a failed registration
        // is no signal (`tack run` would cancel itself at once).
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}
