use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use crate::SandboxError;

pub(crate) struct Captured {
    pub text: String,
    pub truncated: bool,
}

/// How long a command's output may stay open once the command has ended
/// and its process group was killed. What holds it then left the group
/// (`setsid`, a daemon): waiting for it to close would let the command
/// outlast its timeout and the trial its wall time (`setsid sleep
/// infinity &` would hold the tool call forever).
pub(crate) const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// Said in place of what a process left in the background wrote once the
/// command had ended.
pub(crate) const OUTPUT_LEFT_OPEN: &str = "\n[tack: a process the command left running kept its \
     output open; what it wrote after the command ended is not here]\n";

/// What a pipe's reader has kept so far.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    truncated: bool,
}

/// A pipe read to its end in the background.
pub(crate) type Reader = Option<PipeReader>;

pub(crate) struct PipeReader {
    task: JoinHandle<std::io::Result<()>>,
    kept: Arc<Mutex<Kept>>,
}

/// Reads a pipe to its end, keeping the first `limit` bytes. Reading goes on
/// past the limit so the command never blocks on a full pipe.
pub(crate) fn spawn_reader<R>(pipe: Option<R>, limit: usize) -> Reader
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut pipe = pipe?;
    let kept: Arc<Mutex<Kept>> = Arc::default();
    let shared = kept.clone();
    let task = tokio::spawn(async move {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let read = pipe.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            let mut kept = shared.lock().unwrap_or_else(PoisonError::into_inner);
            let room = limit.saturating_sub(kept.bytes.len());
            if read > room {
                kept.truncated = true;
            }
            kept.bytes.extend_from_slice(&chunk[..read.min(room)]);
        }
    });
    Some(PipeReader { task, kept })
}

/// What the pipe carried, once the command has ended: to its end, or what
/// came within [`OUTPUT_GRACE`] and a line saying the rest is missing.
pub(crate) async fn finish(reader: Reader) -> Result<Captured, SandboxError> {
    let Some(PipeReader { mut task, kept }) = reader else {
        return Ok(Captured {
            text: String::new(),
            truncated: false,
        });
    };
    let left_open = match tokio::time::timeout(OUTPUT_GRACE, &mut task).await {
        Ok(Ok(read)) => {
            read.map_err(SandboxError::Output)?;
            false
        }
        Ok(Err(join)) => return Err(SandboxError::Output(std::io::Error::other(join))),
        Err(_elapsed) => {
            task.abort();
            true
        }
    };
    let kept = std::mem::take(&mut *kept.lock().unwrap_or_else(PoisonError::into_inner));
    let mut text = String::from_utf8_lossy(&kept.bytes).into_owned();
    if left_open {
        text.push_str(OUTPUT_LEFT_OPEN);
    }
    Ok(Captured {
        text,
        truncated: kept.truncated,
    })
}
