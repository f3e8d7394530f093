//! PLACEHOLDER: this dialect is being written.

use super::{DialectRequest, RequestSpec};
use crate::delta::Delta;
use crate::error::{RequestError, StreamError};
use crate::framing::Frame;
use crate::response::Warning;

pub(crate) fn build_request(
    _spec: &RequestSpec<'_>,
    _warnings: &mut Vec<Warning>,
) -> Result<DialectRequest, RequestError> {
    Err(RequestError::Unsupported { message: "not yet written".into() })
}

/// Per-stream state.
#[derive(Debug, Default)]
pub struct StreamState {}

impl StreamState {
    pub(crate) fn parse(&mut self, _frame: &Frame<'_>, _out: &mut Vec<Delta>) -> Result<(), StreamError> {
        Ok(())
    }

    pub(crate) fn finish(&mut self, _out: &mut Vec<Delta>) {}
}
