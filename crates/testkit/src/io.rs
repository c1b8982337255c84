//! A TCP stream that can be reset on purpose: once the flag is set, the next
//! write sets `SO_LINGER` to zero and fails, hyper drops the connection, and
//! the close sends an RST instead of a FIN — the client sees "connection
//! reset by peer", as when a load balancer kills a connection.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub(crate) struct Resettable {
    inner: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Resettable {
    pub(crate) fn new(inner: TcpStream, reset: Arc<AtomicBool>) -> Resettable {
        Resettable { inner, reset }
    }

    fn reset_now(&self) -> Option<io::Error> {
        if !self.reset.load(Ordering::SeqCst) {
            return None;
        }
        // If this fails the close is a plain FIN: still a broken answer.
        let _ = self.inner.set_zero_linger();
        Some(io::ErrorKind::ConnectionReset.into())
    }
}

impl AsyncRead for Resettable {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Resettable {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(error) = this.reset_now() {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(error) = this.reset_now() {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
