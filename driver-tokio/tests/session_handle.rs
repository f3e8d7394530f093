//! The session handle's own behaviour on tokio (the checks are
//! omni_conformance::async_session's, written once for both async drivers).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Arc;

use omni_conformance::async_session::{every_check, handle_replies};
use omni_conformance::replay::ReplayServer;
use omni_conformance::session_drive::replay_client;
use omni_store::MemoryStore;
use omni_tokio::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_handle_through_tokio() {
    let server = ReplayServer::start(handle_replies()).expect("replay server");
    let client = replay_client::<Client>(&server).expect("client");
    every_check(client, &server, Arc::new(MemoryStore::default())).await;
}
