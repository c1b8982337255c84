//! The shared rate limiter on tokio's paused clock: budgets per minute,
//! token estimates corrected by real usage, AIMD concurrency, and waits
//! reported to the harness. No assertion depends on wall time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Case;
use tack_model::CallAnnotation;
use tack_providers::{
    Provider, RateLimiter, RateLimiters, RateLimits, RateWait, WaitCause, WaitLog, build_model,
};
use tack_testkit::ScriptedResponse;

fn limits(rpm: Option<u32>, tpm: Option<u64>, concurrency: Option<u32>) -> RateLimits {
    RateLimits {
        requests_per_minute: rpm,
        tokens_per_minute: tpm,
        max_concurrency: concurrency,
    }
}

/// Whether `acquire` would still be waiting after `virtual_secs` of paused time.
async fn still_waiting(limiter: &Arc<RateLimiter>, tokens: u64, virtual_secs: u64) -> bool {
    tokio::time::timeout(Duration::from_secs(virtual_secs), limiter.acquire(tokens))
        .await
        .is_err()
}

#[tokio::test(start_paused = true)]
async fn requests_per_minute_wait_for_the_oldest_to_leave_the_window() {
    let limiter = RateLimiter::new(limits(Some(2), None, None));
    let first = limiter.acquire(10).await;
    assert_eq!(first.wait, None);
    first.succeeded(10);
    tokio::time::advance(Duration::from_secs(15)).await;
    limiter.acquire(10).await.succeeded(10);
    // The third waits until the first is a minute old: 45 s from now.
    let third = limiter.acquire(10).await;
    assert_eq!(
        third.wait,
        Some(RateWait {
            waited: Duration::from_secs(45),
            cause: WaitCause::Requests,
        })
    );
    third.succeeded(10);
    assert_eq!(limiter.usage_in_window().0, 2);
}

#[tokio::test(start_paused = true)]
async fn token_estimates_are_replaced_by_the_real_usage() {
    let limiter = RateLimiter::new(limits(None, Some(1_000), None));
    // Estimated at 800, really used 100: room for another 800 at once.
    limiter.acquire(800).await.succeeded(100);
    assert_eq!(limiter.usage_in_window(), (1, 100));
    let second = limiter.acquire(800).await;
    assert_eq!(second.wait, None);
    // Really used 800: the window holds 900 and a third 800 must wait
    // until both have left it.
    second.succeeded(800);
    let third = limiter.acquire(800).await;
    assert_eq!(
        third.wait,
        Some(RateWait {
            waited: Duration::from_secs(60),
            cause: WaitCause::Tokens,
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_larger_than_the_budget_still_goes_when_the_window_is_empty() {
    let limiter = RateLimiter::new(limits(None, Some(100), None));
    let big = limiter.acquire(5_000).await;
    assert_eq!(big.wait, None);
    big.succeeded(5_000);
    assert!(still_waiting(&limiter, 10, 59).await);
    assert_eq!(
        limiter.acquire(10).await.wait.unwrap().cause,
        WaitCause::Tokens
    );
}

#[tokio::test(start_paused = true)]
async fn a_429_halves_the_concurrency_once_per_burst_and_successes_add_one() {
    let limiter = RateLimiter::new(limits(None, None, Some(4)));
    let mut permits = Vec::new();
    for _ in 0..4 {
        permits.push(limiter.acquire(1).await);
    }
    assert_eq!(limiter.in_flight(), 4);
    assert!(still_waiting(&limiter, 1, 3600).await);

    // Two 429s from the same burst: one halving, not two.
    permits.pop().unwrap().throttled();
    assert_eq!(limiter.allowed_concurrency(), 2);
    permits.pop().unwrap().throttled();
    assert_eq!(limiter.allowed_concurrency(), 2);
    // Two still in flight: a new request waits for one to finish.
    assert!(still_waiting(&limiter, 1, 3600).await);

    permits.pop().unwrap().succeeded(1);
    assert_eq!(limiter.allowed_concurrency(), 3);
    permits.pop().unwrap().succeeded(1);
    assert_eq!(limiter.allowed_concurrency(), 4);
    let after = limiter.acquire(1).await;
    after.succeeded(1);
    assert_eq!(limiter.allowed_concurrency(), 4, "never above the maximum");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_goes_as_soon_as_a_slot_frees() {
    let limiter = RateLimiter::new(limits(None, None, Some(1)));
    let held = limiter.acquire(1).await;
    let waiter = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.acquire(1).await.wait }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!waiter.is_finished());
    // A dropped permit (a cancelled call) frees its slot too.
    drop(held);
    let wait = waiter.await.unwrap().unwrap();
    assert_eq!(wait.cause, WaitCause::Concurrency);
    assert_eq!(wait.waited, Duration::from_secs(5));
}

#[test]
fn one_limiter_per_provider_and_base_url() {
    let limiters = RateLimiters::default();
    let limit = limits(Some(10), None, None);
    let a = limiters.get(Provider::OpenAi, "https://api.openai.com/v1", limit);
    let b = limiters.get(
        Provider::OpenAi,
        "https://api.openai.com/v1/",
        RateLimits::default(),
    );
    let c = limiters.get(Provider::OpenAi, "http://localhost:11434/v1", limit);
    let d = limiters.get(Provider::Anthropic, "https://api.openai.com/v1", limit);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(b.limits(), limit, "the first caller's limits stand");
    assert!(!Arc::ptr_eq(&a, &c) && !Arc::ptr_eq(&a, &d));
}

/// Through a real model: a call held back by the limiter reports its wait
/// (to the observer and as the span annotation), a 429 halves the
/// concurrency, and the real usage replaces the estimate.
#[tokio::test]
async fn a_model_reports_its_waits_and_feeds_back_429s_and_usage() {
    let case = Case {
        provider: Provider::OpenAi,
        stream: true,
    };
    let usage = tack_testkit::ScriptedUsage {
        input: 70,
        output: 30,
        ..Default::default()
    };
    let server = case
        .server(vec![
            ScriptedResponse::text("first").with_usage(usage),
            ScriptedResponse::rate_limited(1),
        ])
        .await;
    let limiter = RateLimiter::new(limits(None, None, Some(2)));
    let log = WaitLog::default();
    let mut config = case.config(&server);
    config.rate_limiter = Some(limiter.clone());
    config.on_rate_wait = Some(log.observer());
    let mut model = build_model(&config, config.api_key.clone()).unwrap();

    // Both slots taken: the call must wait.
    let held = [limiter.acquire(0).await, limiter.acquire(0).await];
    {
        let call = common::call(model.as_mut());
        tokio::pin!(call);
        let blocked = tokio::time::timeout(Duration::from_millis(50), &mut call).await;
        assert!(blocked.is_err(), "the call went out past the limiter");
        drop(held);
        assert_eq!(call.await.unwrap().message.content, "first");
    }
    let waits = log.take();
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0].cause, WaitCause::Concurrency);
    let note: CallAnnotation = model.take_annotation().unwrap();
    assert_eq!(note.rate_limit_wait_ms, waits[0].waited.as_millis() as u64);
    assert_eq!(model.take_annotation(), None, "taken once");
    // The two held permits booked 0 tokens; the call booked its real 100.
    assert_eq!(limiter.usage_in_window(), (3, 100));

    let error = common::call(model.as_mut()).await.unwrap_err();
    assert!(error.is_transient());
    assert_eq!(limiter.allowed_concurrency(), 1);
    assert_eq!(model.take_annotation(), None, "no wait this time");
}
