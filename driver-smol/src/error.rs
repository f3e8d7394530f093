//! The driver's error type, shared with the other async driver.

pub use omni_async::Error;
