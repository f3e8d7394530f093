//! The conformance suite every [`Store`] passes, written once (see [`run`]).
