//! HTTPS against a loopback server whose certificate authority exists only in this
//! test: trusted when given, refused otherwise.

use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events};
use omni_protocol::generate::{GenerateError, RetryPolicy, TransportErrorKind};
use omni_tokio::{Client, Error};

fn replies() -> Vec<omni_conformance::sim::Reply> {
    vec![paced(&text_events(&["secure ", "hello"]), std::time::Duration::ZERO)]
}

#[tokio::test]
async fn connects_when_given_the_ca() {
    let (server, ca) = ReplayServer::start_tls(replies()).unwrap();
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "k")
        .root_certificate(ca)
        .build()
        .unwrap();
    let response = client.generate_text(scenarios::model(), "hi").await.unwrap();
    assert_eq!(response.text(), "secure hello");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn refuses_an_unknown_ca_without_retrying() {
    let (server, _ca) = ReplayServer::start_tls(replies()).unwrap();
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "k")
        .retry(RetryPolicy::default())
        .build()
        .unwrap();
    let err = client.generate_text(scenarios::model(), "hi").await.unwrap_err();
    match err {
        Error::Generate { error: GenerateError::Transport(t), .. } => {
            assert_eq!(t.kind, TransportErrorKind::Tls, "{t}")
        }
        other => panic!("expected a TLS failure, got {other}"),
    }
    assert!(server.requests().is_empty(), "no request got through");
}
