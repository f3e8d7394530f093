//! The user API's setup errors and secrecy: keys never printed, setup failures typed,
//! transport failures classified.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets, clocks

use std::net::TcpListener;

use omni_blocking::{Client, ClientError, Error, Options, Provider};
use omni_blocking::{GenerateError, RetryPolicy, SetupError, TransportErrorKind};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios;
use omni_conformance::sim::Reply;

#[test]
fn keys_never_show_in_debug_or_errors() {
    let server = ReplayServer::start(vec![Reply::error(
        401,
        &[],
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    )])
    .expect("server");
    let client = Client::builder()
        .api_key("anthropic", "sk-secret-client")
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .build()
        .expect("client");
    assert!(!format!("{client:?}").contains("sk-secret"), "{client:?}");
    let call = client.call(scenarios::model(), "hi").api_key("sk-secret-call");
    assert!(!format!("{call:?}").contains("sk-secret"), "{call:?}");
    let error = call.generate().expect_err("401");
    assert!(matches!(&error, Error::Generate { error: GenerateError::Provider(_), .. }), "{error:?}");
    assert!(!format!("{error} {error:?}").contains("sk-secret"), "{error:?}");
    // The call's key won over the client's.
    assert_eq!(server.requests()[0].header("x-api-key"), Some("sk-secret-call"));
}

#[test]
fn setup_problems_are_client_errors_before_anything_is_sent() {
    let provider = Provider::openai_compatible("acme", "http://127.0.0.1:9/v1", Some("OMNI_BLOCKING_TEST_UNSET_KEY"));
    let client = Client::builder().provider(provider).build().expect("client");
    let missing = client.generate_text("acme:any-model", "hi").expect_err("no key");
    assert!(matches!(missing, Error::Client(ClientError::MissingApiKey { .. })), "{missing:?}");
    assert!(missing.to_string().contains("OMNI_BLOCKING_TEST_UNSET_KEY"));
    let unknown = client.stream_text("nosuch:model", "hi").expect_err("unknown provider");
    assert!(matches!(unknown, Error::Client(_)), "{unknown:?}");
    let invalid = client
        .call("acme:any-model", "hi")
        .api_key("k")
        .options(Options { max_tokens: Some(0), ..Options::default() })
        .stream()
        .expect_err("invalid options");
    assert!(matches!(invalid, Error::Client(ClientError::InvalidOptions(_))), "{invalid:?}");
}

#[test]
fn a_bad_root_certificate_fails_the_build() {
    let error = Client::builder().root_certificate("not a certificate").build().expect_err("bad PEM");
    assert!(matches!(error, Error::Setup(SetupError::HttpClient { .. })), "{error:?}");
}

#[test]
fn a_refused_connection_is_a_connect_failure() {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let client = Client::builder()
        .base_url("anthropic", format!("http://127.0.0.1:{port}/v1"))
        .api_key("anthropic", "k")
        .retry(RetryPolicy::none())
        .build()
        .expect("client");
    let error = client.generate_text(scenarios::model(), "hi").expect_err("refused");
    let Error::Generate { error: GenerateError::Transport(t), .. } = &error else { panic!("{error:?}") };
    assert_eq!(t.kind, TransportErrorKind::Connect, "{t}");
}

#[test]
fn handles_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Client>();
    send_sync::<omni_blocking::Tool>();
    send_sync::<omni_blocking::CancelHandle>();
    send::<omni_blocking::TextStream>();
    send::<omni_blocking::Call>();
}
