//! The HTTP fault suite (omni_conformance::faults, run by every driver): whatever bytes
//! the server sends, a call ends, with a typed outcome, keeping what was received.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::faults::{run_fault_cases, STALL};
use omni_conformance::scenarios;
use omni_tokio::{Client, Options, RetryPolicy};

#[test]
fn every_fault_ends_in_a_typed_outcome() {
    run_fault_cases(|base_url| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let client = Client::builder()
                .base_url("anthropic", base_url)
                .api_key("anthropic", "sk-faults")
                .stall_timeout(STALL)
                .retry(RetryPolicy::none())
                .build()
                .expect("client");
            let mut stream = client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream");
            let mut events = Vec::new();
            while let Some(event) =
                std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx)).await
            {
                events.push(event);
            }
            events
        })
    });
}
