//! The session manager on tokio (the checks are omni_conformance::async_manager's,
//! written once for both async drivers).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_manager_through_tokio() {
    omni_conformance::async_manager::every_check::<omni_tokio::Tokio>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_read_as_text_through_tokio() {
    omni_conformance::async_manager::a_stream_read_as_text::<omni_tokio::Tokio>().await;
}
