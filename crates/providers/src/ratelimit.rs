//! Client-side rate limits shared by every trial that calls one provider at
//! one base URL: requests and tokens per minute over a sliding window, and a
//! concurrency limit that halves on a 429 and grows back by one per success
//! (AIMD). A trial over budget waits for capacity instead of failing; each
//! wait is reported so the trace can show time spent queueing.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::Provider;

const WINDOW: Duration = Duration::from_secs(60);

/// Budgets; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
    pub max_concurrency: Option<u32>,
}

/// What a request waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitCause {
    Requests,
    Tokens,
    Concurrency,
}

/// One wait for the limiter before a request went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWait {
    pub waited: Duration,
    /// The last limit that held the request back.
    pub cause: WaitCause,
}

/// Called after every wait; set per trial in `ProviderConfig::on_rate_wait`.
pub type WaitObserver = Arc<dyn Fn(&RateWait) + Send + Sync>;

/// Collects waits; `observer()` plugs it into a `ProviderConfig`.
#[derive(Debug, Clone, Default)]
pub struct WaitLog(Arc<Mutex<Vec<RateWait>>>);

impl WaitLog {
    pub fn observer(&self) -> WaitObserver {
        let log = self.clone();
        Arc::new(move |wait| lock(&log.0).push(*wait))
    }

    /// The waits so far, emptying the log.
    pub fn take(&self) -> Vec<RateWait> {
        std::mem::take(&mut *lock(&self.0))
    }

    pub fn total(&self) -> Duration {
        lock(&self.0).iter().map(|wait| wait.waited).sum()
    }
}

#[derive(Debug)]
pub struct RateLimiter {
    limits: RateLimits,
    state: Mutex<State>,
    released: Notify,
}

#[derive(Debug)]
struct State {
    /// Requests sent within the last minute, oldest first.
    window: VecDeque<Sent>,
    in_flight: u32,
    /// The AIMD concurrency limit.
    allowed: u32,
    /// Counts decreases, so that one burst of 429s halves once, not once per
    /// request that was already in flight when the limit was hit.
    epoch: u64,
    next_id: u64,
}

#[derive(Debug)]
struct Sent {
    id: u64,
    at: Instant,
    tokens: u64,
}

struct Blocked {
    cause: WaitCause,
    /// When a time budget frees up; `None` waits for a request to finish.
    until: Option<Instant>,
}

impl RateLimiter {
    pub fn new(limits: RateLimits) -> Arc<RateLimiter> {
        Arc::new(RateLimiter {
            limits,
            state: Mutex::new(State {
                window: VecDeque::new(),
                in_flight: 0,
                allowed: ceiling(&limits),
                epoch: 0,
                next_id: 0,
            }),
            released: Notify::new(),
        })
    }

    pub fn limits(&self) -> RateLimits {
        self.limits
    }

    /// The concurrency the limiter allows now (AIMD).
    pub fn allowed_concurrency(&self) -> u32 {
        lock(&self.state).allowed
    }

    pub fn in_flight(&self) -> u32 {
        lock(&self.state).in_flight
    }

    /// Requests and tokens booked in the last minute (estimates until the
    /// real usage of a request is known).
    pub fn usage_in_window(&self) -> (u32, u64) {
        let mut state = lock(&self.state);
        state.expire(Instant::now());
        let tokens = state.window.iter().map(|sent| sent.tokens).sum();
        (state.window.len() as u32, tokens)
    }

    /// Waits until a request estimated at `tokens` fits every budget, and
    /// books it. Report the outcome on the permit.
    pub async fn acquire(self: &Arc<Self>, tokens: u64) -> Permit {
        let start = Instant::now();
        let mut cause = None;
        loop {
            // Registered before the check, so a release between the check and
            // the wait is not missed.
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let blocked = {
                let mut state = lock(&self.state);
                let now = Instant::now();
                match state.check(&self.limits, tokens, now) {
                    Ok(()) => {
                        let (id, epoch) = state.admit(now, tokens);
                        let wait = cause.map(|cause| RateWait {
                            waited: now - start,
                            cause,
                        });
                        return Permit::new(self.clone(), id, epoch, wait);
                    }
                    Err(blocked) => blocked,
                }
            };
            cause = Some(blocked.cause);
            match blocked.until {
                Some(until) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => {}
                        _ = &mut released => {}
                    }
                }
                None => released.await,
            }
        }
    }

    fn finish(&self, id: u64, epoch: u64, outcome: Outcome) {
        let mut state = lock(&self.state);
        state.in_flight = state.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Succeeded(tokens) => {
                // Ids are pushed in increasing order: a binary search, not a
                // scan of a window that holds a minute of calls.
                if let Ok(index) = state.window.binary_search_by_key(&id, |sent| sent.id)
                    && let Some(sent) = state.window.get_mut(index)
                {
                    sent.tokens = tokens;
                }
                state.allowed = state.allowed.saturating_add(1).min(ceiling(&self.limits));
            }
            Outcome::Throttled if epoch == state.epoch => {
                let busy = state.allowed.min(state.in_flight + 1);
                state.allowed = (busy / 2).max(1);
                state.epoch += 1;
            }
            Outcome::Throttled | Outcome::Failed => {}
        }
        drop(state);
        self.released.notify_waiters();
    }
}

fn ceiling(limits: &RateLimits) -> u32 {
    limits.max_concurrency.unwrap_or(u32::MAX).max(1)
}

impl State {
    fn expire(&mut self, now: Instant) {
        while self
            .window
            .front()
            .is_some_and(|sent| now.duration_since(sent.at) >= WINDOW)
        {
            self.window.pop_front();
        }
    }

    fn check(&mut self, limits: &RateLimits, tokens: u64, now: Instant) -> Result<(), Blocked> {
        self.expire(now);
        if self.in_flight >= self.allowed {
            return Err(Blocked {
                cause: WaitCause::Concurrency,
                until: None,
            });
        }
        if let (Some(rpm), Some(oldest)) = (limits.requests_per_minute, self.window.front())
            && self.window.len() as u64 >= u64::from(rpm.max(1))
        {
            return Err(Blocked {
                cause: WaitCause::Requests,
                until: Some(oldest.at + WINDOW),
            });
        }
        if let Some(tpm) = limits.tokens_per_minute {
            return self.check_tokens(tpm, tokens);
        }
        Ok(())
    }

    /// A request larger than the whole budget still goes out once the window
    /// is empty; otherwise it would wait forever.
    fn check_tokens(&self, tpm: u64, tokens: u64) -> Result<(), Blocked> {
        let used: u64 = self.window.iter().map(|sent| sent.tokens).sum();
        if used == 0 || used + tokens <= tpm {
            return Ok(());
        }
        let mut left = used;
        for sent in &self.window {
            left -= sent.tokens;
            if left == 0 || left + tokens <= tpm {
                return Err(Blocked {
                    cause: WaitCause::Tokens,
                    until: Some(sent.at + WINDOW),
                });
            }
        }
        Ok(())
    }

    fn admit(&mut self, now: Instant, tokens: u64) -> (u64, u64) {
        self.next_id += 1;
        self.in_flight += 1;
        self.window.push_back(Sent {
            id: self.next_id,
            at: now,
            tokens,
        });
        (self.next_id, self.epoch)
    }
}

enum Outcome {
    /// With the real token count, which replaces the estimate.
    Succeeded(u64),
    Throttled,
    Failed,
}

/// A booked request. Dropping it without an outcome (the call was cancelled)
/// frees its concurrency slot and keeps its token estimate.
#[derive(Debug)]
pub struct Permit {
    limiter: Arc<RateLimiter>,
    id: u64,
    epoch: u64,
    /// The wait before the request could go, if it had to wait.
    pub wait: Option<RateWait>,
    done: bool,
}

impl Permit {
    fn new(limiter: Arc<RateLimiter>, id: u64, epoch: u64, wait: Option<RateWait>) -> Permit {
        Permit {
            limiter,
            id,
            epoch,
            wait,
            done: false,
        }
    }

    /// The request succeeded and used `tokens` (input + output).
    pub fn succeeded(mut self, tokens: u64) {
        self.finish(Outcome::Succeeded(tokens));
    }

    /// The server answered 429: allow half the concurrency.
    pub fn throttled(mut self) {
        self.finish(Outcome::Throttled);
    }

    pub fn failed(mut self) {
        self.finish(Outcome::Failed);
    }

    fn finish(&mut self, outcome: Outcome) {
        if !self.done {
            self.done = true;
            self.limiter.finish(self.id, self.epoch, outcome);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.finish(Outcome::Failed);
    }
}

/// One limiter per provider and base URL, for a whole run: create one
/// registry per run and ask it for each trial's limiter.
#[derive(Debug, Default)]
pub struct RateLimiters {
    limiters: Mutex<HashMap<(Provider, String), Arc<RateLimiter>>>,
}

impl RateLimiters {
    /// The shared limiter for `provider` at `base_url`; the limits given by
    /// the first caller stand.
    pub fn get(&self, provider: Provider, base_url: &str, limits: RateLimits) -> Arc<RateLimiter> {
        let key = (provider, base_url.trim_end_matches('/').to_string());
        lock(&self.limiters)
            .entry(key)
            .or_insert_with(|| RateLimiter::new(limits))
            .clone()
    }
}

/// A panic while holding one of these locks leaves consistent data (every
/// update is a single assignment), so a poisoned lock is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
