//! The five wire formats: the request a dialect builds ([`http`], [`dialect`]) and
//! where it may go ([`proxy`], [`redirect`]), and a response body's way back to
//! data: bytes framed ([`framing`]), events turned into [`delta`]s by a dialect, deltas
//! accumulated into events and a response ([`accumulator`]), the three put together in
//! [`decoder`]; and the credentials cut out of anything a server echoes back
//! ([`secret`]) or shown in a URL ([`query`]). Pure functions and incremental decoders; no clock, no state across
//! requests.
//!
//! ```text
//!  (Model, Context, Options) ─► Dialect::build_request ─► HttpRequest     (a driver sends it)
//!  body bytes ─► FrameDecoder ─► Frame ─► DialectState ─► Delta ─► Accumulator ─► StreamEvent … Done | Error
//!                                                                          └──────► Response
//! ```

pub(crate) mod accumulator;
pub(crate) mod decoder;
pub(crate) mod delta;
pub(crate) mod dialect;
pub(crate) mod framing;
pub(crate) mod http;
pub(crate) mod proxy;
pub(crate) mod query;
pub(crate) mod redirect;
pub(crate) mod secret;
