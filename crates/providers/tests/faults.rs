//! Every way a call can fail, mapped to the `ModelError` the harness acts
//! on, for both providers, streamed and not — and the key in none of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{CASES, Case};
use tack_model::ModelError;
use tack_providers::{ApiKey, Provider, ProviderConfig, build_model, provider_model};
use tack_testkit::{ScriptedResponse, TEST_API_KEY};

async fn fail(case: Case, script: Vec<ScriptedResponse>) -> ModelError {
    let (result, _server) = case.call_once(script).await;
    match result {
        Ok(response) => panic!("{case:?}: expected an error, got {response:?}"),
        Err(error) => error,
    }
}

fn status_of(error: &ModelError) -> Option<u16> {
    match error {
        ModelError::Api { status, .. } => Some(*status),
        _ => None,
    }
}

#[tokio::test]
async fn a_429_carries_its_retry_after_in_every_form() {
    let forms = [
        (ScriptedResponse::rate_limited(7), Duration::from_secs(7)),
        (
            ScriptedResponse::Status {
                status: 429,
                retry_after: Some("2".into()),
                retry_after_ms: Some(1500),
                message: None,
            },
            Duration::from_millis(1500),
        ),
        (
            // A date long past: retry at once.
            ScriptedResponse::Status {
                status: 429,
                retry_after: Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
                retry_after_ms: None,
                message: None,
            },
            Duration::ZERO,
        ),
    ];
    for case in CASES {
        for (response, expected) in forms.clone() {
            let error = fail(case, vec![response]).await;
            assert_eq!(status_of(&error), Some(429), "{case:?}: {error}");
            assert_eq!(error.retry_after(), Some(expected), "{case:?}");
            assert!(error.is_transient());
        }
    }
}

#[tokio::test]
async fn server_errors_are_transient_and_client_errors_are_not() {
    for case in CASES {
        for status in [500, 502, 503, 529] {
            let error = fail(case, vec![ScriptedResponse::status(status)]).await;
            assert_eq!(status_of(&error), Some(status), "{case:?}");
            assert!(error.is_transient(), "{case:?}: {error}");
            assert_eq!(error.retry_after(), None);
            assert!(error.to_string().contains("scripted status"), "{error}");
        }
        for status in [400, 401, 404] {
            let error = fail(case, vec![ScriptedResponse::status(status)]).await;
            assert_eq!(status_of(&error), Some(status), "{case:?}");
            assert!(!error.is_transient(), "{case:?}: {error}");
        }
    }
}

#[tokio::test]
async fn a_slow_answer_times_out_as_a_transport_error() {
    for case in CASES {
        let server = case
            .server(vec![ScriptedResponse::delayed(
                10_000,
                ScriptedResponse::text("late"),
            )])
            .await;
        let mut config = case.config(&server);
        config.timeout = Duration::from_millis(200);
        let mut model = build_model(&config, config.api_key.clone()).unwrap();
        let error = common::call(model.as_mut()).await.unwrap_err();
        assert!(
            matches!(error, ModelError::Transport(_)),
            "{case:?}: {error}"
        );
        assert!(error.to_string().contains("timed out"), "{error}");
        assert!(error.is_transient());
    }
}

#[tokio::test]
async fn a_malformed_body_is_an_invalid_response() {
    for case in CASES {
        let error = fail(case, vec![ScriptedResponse::MalformedJson]).await;
        assert!(
            matches!(error, ModelError::InvalidResponse(_)),
            "{case:?}: {error}"
        );
        assert!(!error.is_transient());
    }
}

#[tokio::test]
async fn a_stream_cut_part_way_is_a_transport_error() {
    for case in CASES {
        for after_events in [0, 1, 3] {
            let error = fail(case, vec![ScriptedResponse::CutStream { after_events }]).await;
            assert!(
                matches!(error, ModelError::Transport(_)),
                "{case:?} after {after_events}: {error}"
            );
            assert!(error.is_transient());
        }
    }
}

#[tokio::test]
async fn a_reset_connection_is_a_transport_error() {
    for case in CASES {
        let error = fail(case, vec![ScriptedResponse::Reset]).await;
        assert!(
            matches!(error, ModelError::Transport(_)),
            "{case:?}: {error}"
        );
        assert!(error.is_transient());
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let mut config = ProviderConfig::new(provider, "m");
        config.base_url = Some(format!("http://127.0.0.1:{port}/v1"));
        let mut model = build_model(&config, Some(ApiKey::new(TEST_API_KEY))).unwrap();
        let error = common::call(model.as_mut()).await.unwrap_err();
        assert!(matches!(error, ModelError::Transport(_)), "{error}");
        assert!(error.to_string().contains("could not connect"), "{error}");
    }
}

#[tokio::test]
async fn the_key_is_in_no_error_and_no_debug_output() {
    for case in CASES {
        let echo = ScriptedResponse::Status {
            status: 401,
            retry_after: None,
            retry_after_ms: None,
            message: Some(format!("Incorrect API key provided: {TEST_API_KEY}")),
        };
        let script = vec![
            echo,
            ScriptedResponse::rate_limited(1),
            ScriptedResponse::MalformedJson,
            ScriptedResponse::CutStream { after_events: 2 },
            ScriptedResponse::Reset,
        ];
        let server = case.server(script).await;
        let config = case.config(&server);
        let mut model = build_model(&config, config.api_key.clone()).unwrap();
        for _ in 0..5 {
            let error = common::call(model.as_mut()).await.unwrap_err();
            for text in [error.to_string(), format!("{error:?}")] {
                assert!(!text.contains(TEST_API_KEY), "{case:?}: {text}");
            }
        }
        let config_text = format!("{config:?}");
        assert!(config_text.contains("[redacted]") && !config_text.contains(TEST_API_KEY));
        assert_eq!(server.requests().len(), 5);
    }
}

#[tokio::test]
async fn the_concrete_models_debug_without_the_key() {
    let server = Case {
        provider: Provider::OpenAi,
        stream: false,
    }
    .server(vec![])
    .await;
    let mut config = ProviderConfig::new(Provider::OpenAi, "m");
    config.base_url = Some(server.base_url());
    let openai =
        tack_providers::OpenAiModel::new(&config, Some(ApiKey::new(TEST_API_KEY))).unwrap();
    let anthropic =
        tack_providers::AnthropicModel::new(&config, Some(ApiKey::new(TEST_API_KEY))).unwrap();
    for text in [format!("{openai:?}"), format!("{anthropic:?}")] {
        assert!(!text.contains(TEST_API_KEY), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}

#[tokio::test]
async fn provider_model_builds_from_a_spec() {
    let spec = tack_protocol::ModelSpec::parse("anthropic:claude-sonnet-4-20250514").unwrap();
    let server = Case {
        provider: Provider::Anthropic,
        stream: false,
    }
    .server(vec![ScriptedResponse::text("hello")])
    .await;
    let mut config = ProviderConfig::for_spec(&spec).unwrap();
    config.base_url = Some(server.base_url());
    config.api_key = Some(ApiKey::new(TEST_API_KEY));
    let mut model = provider_model(&config).unwrap();
    assert_eq!(model.provider(), "anthropic");
    assert_eq!(model.model_name(), "claude-sonnet-4-20250514");
    let response = common::call(model.as_mut()).await.unwrap();
    assert_eq!(response.message.content, "hello");
    assert!(server.requests()[0].auth_matches);
    let sim = tack_protocol::ModelSpec::parse("sim").unwrap();
    assert!(ProviderConfig::for_spec(&sim).is_none());
}
