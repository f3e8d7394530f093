//! Keep-alive connections: calls one after another share a connection; one the server
//! closed is never used; a request dropped on a pooled connection goes out again at once
//! on a new one (the cases are omni_conformance::keepalive's, run by every driver).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::keepalive::reuse_cases;
use omni_conformance::scenarios;
use omni_tokio::{Client, GenerateEvent, Options};

#[test]
fn connections_are_reused_and_stale_ones_cost_no_retry() {
    // One runtime for every call: reqwest's pool lives in it between calls.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    for case in reuse_cases() {
        case.run(
            |base_url, key, ca| {
                let _entered = runtime.enter();
                let mut builder = Client::builder().base_url("anthropic", base_url).api_key("anthropic", key);
                if let Some(ca) = ca {
                    builder = builder.root_certificate(ca.as_bytes());
                }
                builder.build().expect("client")
            },
            |client| {
                runtime.block_on(async {
                    let stream = client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream");
                    case.outcome(collect(stream).await)
                })
            },
        );
    }
}

async fn collect(mut stream: omni_tokio::TextStream) -> Vec<GenerateEvent> {
    use futures_core::Stream;
    let mut events = Vec::new();
    while let Some(event) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)).await {
        events.push(event);
    }
    events
}
