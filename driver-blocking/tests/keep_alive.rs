//! Keep-alive connections: calls one after another share a connection; one the server
//! closed is never used; a request dropped on a pooled connection goes out again at once
//! on a new one (the cases are omni_conformance::keepalive's, run by every driver).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_blocking::{Client, Options};
use omni_conformance::keepalive::reuse_cases;
use omni_conformance::scenarios;

#[test]
fn connections_are_reused_and_stale_ones_cost_no_retry() {
    for case in reuse_cases() {
        case.run(
            |base_url, key, ca| {
                let mut builder = Client::builder().base_url("anthropic", base_url).api_key("anthropic", key);
                if let Some(ca) = ca {
                    builder = builder.root_certificate(ca.as_bytes());
                }
                builder.build().expect("client")
            },
            |client| {
                let stream = client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream");
                case.outcome(stream)
            },
        );
    }
}
