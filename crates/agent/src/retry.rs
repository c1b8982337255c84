//! Backoff between model-call attempts.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

const BASE: Duration = Duration::from_millis(500);
const CAP: Duration = Duration::from_secs(30);

/// How long to wait before attempt `next_attempt` (2, 3, …): the server's
/// Retry-After when it gave one, otherwise exponential backoff from 0.5 s,
/// capped at 30 s, with up to 50% random jitter so that concurrent trials do
/// not retry in lockstep.
pub(crate) fn backoff(next_attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(CAP * 4);
    }
    let exponent = next_attempt.saturating_sub(2).min(16);
    let base = BASE.saturating_mul(1 << exponent).min(CAP);
    let jitter = RandomState::new().hash_one(next_attempt) % 1000;
    base + base.mul_f64(jitter as f64 / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_with_bounded_jitter_and_honours_retry_after() {
        for (attempt, base_ms) in [(2, 500), (3, 1000), (4, 2000), (20, 30_000)] {
            let wait = backoff(attempt, None).as_millis() as u64;
            assert!(
                (base_ms..=base_ms * 3 / 2).contains(&wait),
                "{attempt}: {wait}"
            );
        }
        assert_eq!(
            backoff(2, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
    }
}
