//! The key never reaches a log record, even with every crate logging at trace level
//! (ureq-proto logs the bytes it writes at that level); nor do a proxy's credentials.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_blocking::{Client, Options};
use omni_conformance::connect_proxy::{encoded_credentials, ConnectProxy, CREDENTIALS, PASSWORD};
use omni_conformance::keepalive::{reuse_body, KeepAliveServer, Plan};
use omni_conformance::logs::{assert_key_not_logged, assert_not_logged, capture_all, KEY};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events};

#[test]
fn the_key_is_sent_but_never_logged() {
    capture_all();
    let server = ReplayServer::start(vec![paced(&text_events(&["Hi"]), std::time::Duration::ZERO)]).expect("server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", KEY)
        .build()
        .expect("client");
    let response = client.generate_text(scenarios::model(), "hi", Options::default()).expect("reply");
    assert_eq!(response.text(), "Hi");
    assert_eq!(server.requests()[0].header("x-api-key"), Some(KEY), "the key was sent");
    assert_key_not_logged("ureq_proto");

    // Through a proxy with credentials: they are secrets too.
    let proxy = ConnectProxy::start(Some(CREDENTIALS)).expect("proxy");
    let (server, ca) = KeepAliveServer::start_tls(reuse_body(), Plan::Serve).expect("server");
    let client = Client::builder()
        .base_url("anthropic", server.base_url())
        .api_key("anthropic", KEY)
        .root_certificate(ca.as_bytes())
        .proxy(&proxy.url(Some(CREDENTIALS)))
        .build()
        .expect("client");
    let response = client.generate_text(scenarios::model(), "hi", Options::default()).expect("reply");
    assert_eq!(response.text(), "Hi");
    assert_eq!(proxy.heads().len(), 1, "the call went through the proxy");
    assert_not_logged(PASSWORD);
    assert_not_logged(&encoded_credentials());
    assert!(!format!("{client:?}").contains(PASSWORD), "nor printed");
}
