//! A whole JSON body: the response is one document, not a stream (a format whose server
//! answers at once). Its bytes are kept until the body ends and handed over as one
//! `Frame::Event { event: "", data: body, id: None }`; an empty body gives no frame.
//! Memory is bounded like one event's: a body larger than the limit is
//! [`FramingError::EventTooLarge`].

use super::{Frame, FramingError, StreamEnd};

/// A decoder of a whole JSON body (see the module's doc).
#[derive(Debug)]
pub struct WholeDecoder {
    body: Vec<u8>,
    max: usize,
}

impl WholeDecoder {
    /// A decoder that refuses bodies larger than `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self { body: Vec::new(), max: max_bytes }
    }

    /// Keeps a chunk; no frame comes before the end.
    pub fn feed<F: FnMut(Frame<'_>)>(&mut self, chunk: &[u8], on_frame: F) -> Result<(), FramingError> {
        let _ = on_frame;
        if self.body.len() + chunk.len() > self.max {
            return Err(FramingError::EventTooLarge { limit: self.max });
        }
        self.body.extend_from_slice(chunk);
        Ok(())
    }

    /// The body ended: the document, decoded from UTF-8 (invalid bytes as U+FFFD), as one
    /// frame. A whole body is never cut: a document that does not parse is the format's
    /// decode error.
    pub fn finish<F: FnMut(Frame<'_>)>(&mut self, mut on_frame: F) -> Result<StreamEnd, FramingError> {
        let body = std::mem::take(&mut self.body);
        let text = String::from_utf8_lossy(&body);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        if !text.trim().is_empty() {
            on_frame(Frame::Event { event: "", data: text, id: None });
        }
        Ok(StreamEnd::Clean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_one_frame_at_its_end_however_it_came() {
        let mut decoder = WholeDecoder::new(64);
        let mut frames = Vec::new();
        for piece in [&b"{\"a\":"[..], b" 1", b"}"] {
            decoder.feed(piece, |f| frames.push(format!("{f:?}"))).expect("within the limit");
        }
        assert!(frames.is_empty(), "nothing before the end");
        assert_eq!(decoder.finish(|f| frames.push(format!("{f:?}"))), Ok(StreamEnd::Clean));
        assert_eq!(frames, [r#"Event { event: "", data: "{\"a\": 1}", id: None }"#]);
    }

    #[test]
    fn a_body_past_the_limit_is_an_error_and_an_empty_one_no_frame() {
        let mut decoder = WholeDecoder::new(4);
        assert_eq!(decoder.feed(b"12345", |_| {}), Err(FramingError::EventTooLarge { limit: 4 }));
        let mut empty = WholeDecoder::new(4);
        let mut count = 0;
        assert_eq!(empty.finish(|_| count += 1), Ok(StreamEnd::Clean));
        assert_eq!(count, 0);
    }
}
