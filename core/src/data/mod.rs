//! The data the application holds and sees: the conversation ([`message`]), what a
//! response is ([`response`], [`usage`], [`event`], [`error`]), what a call is made
//! with ([`model`], its [`dialect`]'s name, [`provider`] and its [`hooks`], [`catalogue`], [`options`], [`tool_protocol`]), tools' outputs and
//! schemas ([`tool`], [`schema`]), which names carry credentials ([`secret`]), and the bound on how deep JSON may nest ([`depth`]).
//! Plain values and validation; nothing here knows a wire format or a machine.

pub mod catalogue;
pub mod depth;
pub mod dialect;
pub mod error;
pub mod event;
pub mod hooks;
pub mod message;
pub mod model;
pub mod options;
pub mod provider;
pub mod response;
pub mod schema;
pub mod secret;
pub mod tool;
pub mod tool_protocol;
pub mod usage;
