//! What keeping connections alive saves: a whole call (request to `Finished`) over HTTPS
//! on loopback, through each driver, on a kept connection against a fresh one, in the
//! same run.
//!
//! Two `omni_conformance::keepalive` servers serve the same short text stream with
//! `connection: keep-alive`: `kept` answers every request on a connection, `fresh` closes
//! each connection after its response (as llama-server does), so every call there pays
//! a TCP and TLS handshake (plus the driver noticing the kept connection closed). One
//! client per driver and server, warmed up first. The calls alternate between the two
//! servers in pairs (`omni_conformance::ttfe::compare`), so the machine's load drifting
//! cannot bias the ratio `kept / fresh` (medians), which is what reuse saves per call on
//! loopback; over a real network the handshake costs round trips, and saves far more.
//!
//! Run: `cargo bench -p omni-conformance --bench keep_alive`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use futures_lite::StreamExt;
use omni_conformance::keepalive::{reuse_body, KeepAliveServer, Plan, KEY};
use omni_conformance::scenarios;
use omni_conformance::ttfe::{compare, under_cargo_bench};
use omni_protocol::generate::GenerateEvent;

/// What each run prints the medians and ratio of.
const SIDES: [&str; 2] = ["kept", "fresh"];

fn main() {
    divan::main();
    if !under_cargo_bench() {
        return;
    }
    let (kept, kept_ca) = KeepAliveServer::start_tls(reuse_body(), Plan::Serve).expect("server");
    let (fresh, fresh_ca) = KeepAliveServer::start_tls(reuse_body(), Plan::CloseAfter(1)).expect("server");

    let blocking = |server: &KeepAliveServer, ca: &str| {
        let client = omni_blocking::Client::builder()
            .base_url("anthropic", server.base_url())
            .api_key("anthropic", KEY)
            .root_certificate(ca.as_bytes())
            .build()
            .expect("client");
        move || finished(client.stream_text(scenarios::model(), "hi").expect("stream"))
    };
    let (on_kept, on_fresh) = (blocking(&kept, &kept_ca), blocking(&fresh, &fresh_ca));
    on_kept();
    compare("blocking", SIDES, || {}, on_kept, on_fresh);

    let smol_client = |server: &KeepAliveServer, ca: &str| {
        omni_smol::Client::builder()
            .base_url("anthropic", server.base_url())
            .api_key("anthropic", KEY)
            .root_certificate(ca.as_bytes())
            .build()
            .expect("client")
    };
    let (on_kept, on_fresh) = (smol_client(&kept, &kept_ca), smol_client(&fresh, &fresh_ca));
    let smol_call = |client: &omni_smol::Client| {
        smol::block_on(async {
            let stream = client.stream_text(scenarios::model(), "hi").expect("stream");
            finished(stream.collect::<Vec<_>>().await)
        })
    };
    smol_call(&on_kept);
    compare("smol", SIDES, || {}, || smol_call(&on_kept), || smol_call(&on_fresh));

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let tokio_client = |server: &KeepAliveServer, ca: &str| {
        let _entered = runtime.enter();
        omni_tokio::Client::builder()
            .base_url("anthropic", server.base_url())
            .api_key("anthropic", KEY)
            .root_certificate(ca.as_bytes())
            .build()
            .expect("client")
    };
    let (on_kept, on_fresh) = (tokio_client(&kept, &kept_ca), tokio_client(&fresh, &fresh_ca));
    let tokio_call = |client: &omni_tokio::Client| {
        runtime.block_on(async {
            let stream = client.stream_text(scenarios::model(), "hi").expect("stream");
            finished(stream.collect::<Vec<_>>().await)
        })
    };
    tokio_call(&on_kept);
    compare("tokio", SIDES, || {}, || tokio_call(&on_kept), || tokio_call(&on_fresh));

    assert_eq!(kept.requests_per_connection().len(), 3, "one connection per driver on the kept server");
}

/// Checks a call's events end in `Finished` with the reply's text.
fn finished(events: impl IntoIterator<Item = GenerateEvent>) {
    for event in events {
        match event {
            GenerateEvent::Finished(response) => return assert_eq!(response.text(), "Hi"),
            GenerateEvent::Failed { error, .. } => panic!("the call failed: {error}"),
            _ => {}
        }
    }
    panic!("the stream ended without an outcome")
}
