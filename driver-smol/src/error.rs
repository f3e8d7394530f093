//! The driver's error type: the one every omni driver returns.

pub use omni_core::driver_error::Error;
