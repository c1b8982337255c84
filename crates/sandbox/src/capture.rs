use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use crate::SandboxError;

pub(crate) struct Captured {
    pub text: String,
    pub truncated: bool,
}

pub(crate) type Reader = Option<JoinHandle<std::io::Result<Captured>>>;

/// Reads a pipe to its end, keeping the first `limit` bytes. Reading goes on
/// past the limit so the command never blocks on a full pipe.
pub(crate) fn spawn_reader<R>(pipe: Option<R>, limit: usize) -> Reader
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut pipe = pipe?;
    Some(tokio::spawn(async move {
        let mut kept = Vec::with_capacity(limit.min(64 * 1024));
        let mut chunk = vec![0u8; 16 * 1024];
        let mut truncated = false;
        loop {
            let read = pipe.read(&mut chunk).await?;
            if read == 0 {
                break;
            }
            let room = limit.saturating_sub(kept.len());
            if read > room {
                truncated = true;
            }
            kept.extend_from_slice(&chunk[..read.min(room)]);
        }
        Ok(Captured {
            text: String::from_utf8_lossy(&kept).into_owned(),
            truncated,
        })
    }))
}

pub(crate) async fn finish(reader: Reader) -> Result<Captured, SandboxError> {
    let Some(reader) = reader else {
        return Ok(Captured {
            text: String::new(),
            truncated: false,
        });
    };
    match reader.await {
        Ok(result) => result.map_err(SandboxError::Output),
        Err(join) => Err(SandboxError::Output(std::io::Error::other(join))),
    }
}
