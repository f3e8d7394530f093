//! omni conformance suite: fixture loading, upstream corpus replay and a decoder CLI.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
pub mod upstream;
