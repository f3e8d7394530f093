//! The HTTP suites every driver runs (omni_conformance::keepalive, connect_proxy and
//! faults): connections kept alive and stale ones costing no retry; calls through a
//! CONNECT proxy with credentials; whatever bytes a server sends, a call ends with a typed
//! outcome, keeping what came.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::connect_proxy::proxy_suite;
use omni_conformance::faults::fault_suite;
use omni_conformance::http_suite::{Setup, StreamingDriver};
use omni_conformance::keepalive::reuse_suite;
use omni_conformance::logs::secret_headers_are_sent_but_never_printed;
use omni_conformance::redirects::redirect_suite;
use omni_conformance::scenarios;
use omni_tokio::{Client, GenerateEvent, Options, TextStream};

/// One runtime for every call: reqwest's pool lives in it between calls.
struct Driver(tokio::runtime::Runtime);

impl Driver {
    fn new() -> Self {
        Driver(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime"))
    }
}

impl StreamingDriver for Driver {
    type Client = Client;

    fn client(&self, setup: &Setup) -> Client {
        let _entered = self.0.enter();
        setup.apply(Client::builder()).build().expect("client")
    }

    fn stream(&self, client: &Client) -> Vec<GenerateEvent> {
        let _entered = self.0.enter();
        let stream = client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream");
        self.0.block_on(collect(stream))
    }
}

async fn collect(mut stream: TextStream) -> Vec<GenerateEvent> {
    let mut events = Vec::new();
    while let Some(event) =
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx)).await
    {
        events.push(event);
    }
    events
}

#[test]
fn connections_are_reused_and_stale_ones_cost_no_retry() {
    reuse_suite(&Driver::new());
}

#[test]
fn calls_go_through_a_connect_proxy() {
    proxy_suite(&Driver::new());
}

#[test]
fn every_fault_ends_in_a_typed_outcome() {
    fault_suite(Driver::new());
}

#[test]
fn redirects_are_decided_by_the_core_and_credentials_never_leave_their_origin() {
    redirect_suite(&Driver::new());
}

#[test]
fn secret_headers_from_provider_and_options_are_sent_but_never_printed() {
    secret_headers_are_sent_but_never_printed(&Driver::new());
}
