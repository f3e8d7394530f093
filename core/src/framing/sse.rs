//! PLACEHOLDER: replaced by the framing work.

use super::{Frame, FramingError, StreamEnd};

/// Decoder.
#[derive(Debug)]
pub struct SseDecoder {
    _max: usize,
}

impl SseDecoder {
    /// New decoder.
    pub fn new(max: usize) -> Self {
        SseDecoder { _max: max }
    }

    /// Feed.
    pub fn feed<F: FnMut(Frame<'_>)>(&mut self, _chunk: &[u8], _on_frame: F) -> Result<(), FramingError> {
        Ok(())
    }

    /// Finish.
    pub fn finish<F: FnMut(Frame<'_>)>(&mut self, _on_frame: F) -> Result<StreamEnd, FramingError> {
        Ok(StreamEnd::Clean)
    }
}
