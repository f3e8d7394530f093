//! Through an HTTP proxy: a `CONNECT` tunnel with Basic credentials, reused by the next
//! call; wrong credentials fail the call (omni_conformance::connect_proxy's cases, run by
//! every driver).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_blocking::{Client, Options, RetryPolicy};
use omni_conformance::connect_proxy::proxy_cases;
use omni_conformance::scenarios;

#[test]
fn calls_go_through_a_connect_proxy() {
    proxy_cases(
        |base_url, key, ca, proxy| {
            Client::builder()
                .base_url("anthropic", base_url)
                .api_key("anthropic", key)
                .root_certificate(ca.as_bytes())
                .proxy(proxy)
                .retry(RetryPolicy::none())
                .build()
                .expect("client")
        },
        |client| client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream").collect(),
    );
}
