//! The data the application holds and sees: the conversation ([`message`]), what a
//! response is ([`response`], [`usage`], [`event`], [`error`]), what a call is made
//! with ([`model`], [`provider`] and its [`hooks`], [`catalogue`], [`options`]), tools' outputs and
//! schemas ([`tool`], [`schema`]), and the bound on how deep JSON may nest ([`depth`]).
//! Plain values and validation; nothing here knows a wire format or a machine.

pub(crate) mod catalogue;
pub(crate) mod depth;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod hooks;
pub(crate) mod message;
pub(crate) mod model;
pub(crate) mod options;
pub(crate) mod provider;
pub(crate) mod response;
pub(crate) mod schema;
pub(crate) mod tool;
pub(crate) mod usage;
