//! The HTTP fault suite (omni_conformance::faults, run by every driver): whatever bytes
//! the server sends, a call ends, with a typed outcome, keeping what was received.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::faults::{run_fault_cases, STALL};
use omni_conformance::scenarios;
use omni_smol::{Client, Options, RetryPolicy};
use smol::stream::StreamExt;

#[test]
fn every_fault_ends_in_a_typed_outcome() {
    run_fault_cases(|base_url| {
        let client = Client::builder()
            .base_url("anthropic", base_url)
            .api_key("anthropic", "sk-faults")
            .stall_timeout(STALL)
            .retry(RetryPolicy::none())
            .build()
            .expect("client");
        smol::block_on(async {
            client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream").collect().await
        })
    });
}
