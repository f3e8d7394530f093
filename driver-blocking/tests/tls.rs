//! HTTPS against a loopback server whose certificate authority exists only in this
//! test: trusted when given, refused (as a TLS failure, not retried) otherwise.

use std::time::Duration;

use omni_blocking::{Client, Error};
use omni_blocking::{GenerateError, RetryPolicy, TransportErrorKind};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events};
use omni_conformance::sim::Reply;

fn replies() -> Vec<Reply> {
    vec![paced(&text_events(&["secure ", "hello"]), Duration::ZERO)]
}

#[test]
fn connects_when_given_the_ca() {
    let (server, ca) = ReplayServer::start_tls(replies()).expect("TLS server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "k")
        .root_certificate(ca)
        .build()
        .expect("client");
    let response = client.generate_text(scenarios::model(), "hi").expect("a response");
    assert_eq!(response.text(), "secure hello");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn refuses_an_unknown_ca_without_retrying() {
    let (server, _ca) = ReplayServer::start_tls(replies()).expect("TLS server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "k")
        .retry(RetryPolicy::default())
        .build()
        .expect("client");
    let error = client.generate_text(scenarios::model(), "hi").expect_err("untrusted");
    match error {
        Error::Generate { error: GenerateError::Transport(t), .. } => {
            assert_eq!(t.kind, TransportErrorKind::Tls, "{t}")
        }
        other => panic!("expected a TLS failure, got {other:?}"),
    }
    assert!(server.requests().is_empty(), "no request got through");
}
