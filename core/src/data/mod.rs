//! The data the application holds and sees: the conversation ([`message`]), what a
//! response is ([`response`], [`usage`], [`event`], [`error`]), what a call is made
//! with ([`model`], its [`dialect`]'s name, [`provider`] and its [`hooks`], [`catalogue`], [`options`], [`tool_protocol`]), tools' outputs and
//! schemas ([`tool`], [`schema`]), which names carry credentials ([`secret`]), and the bound on how deep JSON may nest ([`depth`]).
//! Plain values and validation; nothing here knows a wire format or a machine.

pub(crate) mod catalogue;
pub(crate) mod depth;
pub(crate) mod dialect;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod hooks;
pub(crate) mod message;
pub(crate) mod model;
pub(crate) mod options;
pub(crate) mod provider;
pub(crate) mod response;
pub(crate) mod schema;
pub(crate) mod secret;
pub(crate) mod tool;
pub(crate) mod tool_protocol;
pub(crate) mod usage;
