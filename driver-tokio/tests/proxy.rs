//! Through an HTTP proxy: a `CONNECT` tunnel with Basic credentials, reused by the next
//! call; wrong credentials fail the call (omni_conformance::connect_proxy's cases, run by
//! every driver).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::connect_proxy::proxy_cases;
use omni_conformance::scenarios;
use omni_tokio::{Client, Options, RetryPolicy};

#[test]
fn calls_go_through_a_connect_proxy() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    proxy_cases(
        |base_url, key, ca, proxy| {
            let _entered = runtime.enter();
            Client::builder()
                .base_url("anthropic", base_url)
                .api_key("anthropic", key)
                .root_certificate(ca.as_bytes())
                .proxy(proxy)
                .retry(RetryPolicy::none())
                .build()
                .expect("client")
        },
        |client| {
            runtime.block_on(async {
                let mut stream = client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream");
                let mut events = Vec::new();
                while let Some(event) =
                    std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx))
                        .await
                {
                    events.push(event);
                }
                events
            })
        },
    );
}
