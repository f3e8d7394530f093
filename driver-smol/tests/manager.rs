//! The session manager on smol (the checks are omni_conformance::async_manager's, written
//! once for both async drivers).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[test]
fn the_session_manager_through_smol() {
    smol::block_on(omni_conformance::async_manager::every_check::<omni_smol::Smol>());
}

#[test]
fn a_stream_read_as_text_through_smol() {
    smol::block_on(omni_conformance::async_manager::a_stream_read_as_text::<omni_smol::Smol>());
}
