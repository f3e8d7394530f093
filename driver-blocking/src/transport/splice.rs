//! Keys stay out of ureq's logs: ureq-proto logs the bytes of the request head it writes
//! at trace level, so the sensitive headers (the key) are not given to ureq at all. A
//! connector at the end of ureq's chain (after TLS wrapping, so on plaintext) splices
//! them into each request head as it goes out, before the blank line that ends it: the
//! first write after the connection opened or after a response was read is a head (ureq
//! writes a whole head at once), and a kept connection carries one request after another.

use std::fmt;
use std::sync::Arc;

use omni_core::HttpRequest;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};
use ureq::Error;

/// Takes the sensitive headers out of `request` and returns them as header lines
/// (`name: value\r\n`), checked as any header is (the error names the header only).
pub(crate) fn take_sensitive(request: &mut HttpRequest) -> Result<Vec<u8>, String> {
    let mut lines = Vec::new();
    for header in request.headers.iter().filter(|h| h.sensitive) {
        ureq::http::HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| format!("header {} has a name that cannot be sent", header.name))?;
        ureq::http::HeaderValue::from_str(&header.value)
            .map_err(|_| format!("header {} has a value that cannot be sent", header.name))?;
        lines.extend_from_slice(format!("{}: {}\r\n", header.name, header.value).as_bytes());
    }
    request.headers.retain(|h| !h.sensitive);
    Ok(lines)
}

/// The connector that wraps each connection in a [`Splicing`] transport.
pub(crate) struct SpliceHeaders {
    lines: Arc<[u8]>,
}

impl SpliceHeaders {
    pub(crate) fn new(lines: Vec<u8>) -> Self {
        Self { lines: lines.into() }
    }
}

impl fmt::Debug for SpliceHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SpliceHeaders(<redacted>)")
    }
}

impl Connector<Box<dyn Transport>> for SpliceHeaders {
    type Out = Box<dyn Transport>;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<Box<dyn Transport>>,
    ) -> Result<Option<Self::Out>, Error> {
        Ok(chained
            .map(|inner| Box::new(Splicing { inner, lines: self.lines.clone(), at_head: true }) as Box<dyn Transport>))
    }
}

/// A transport that adds header lines to every request head it sends.
struct Splicing {
    inner: Box<dyn Transport>,
    lines: Arc<[u8]>,
    /// The next write starts a request head.
    at_head: bool,
}

impl fmt::Debug for Splicing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Splicing").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl Splicing {
    /// Sends `bytes` through the output buffer, a buffer-full at a time.
    fn send(&mut self, bytes: &[u8], timeout: NextTimeout) -> Result<(), Error> {
        let room = self.inner.buffers().output().len().max(1);
        for piece in bytes.chunks(room) {
            if let Some(target) = self.inner.buffers().output().get_mut(..piece.len()) {
                target.copy_from_slice(piece);
            }
            self.inner.transmit_output(piece.len(), timeout)?;
        }
        Ok(())
    }
}

impl Transport for Splicing {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        if !std::mem::replace(&mut self.at_head, false) {
            return self.inner.transmit_output(amount, timeout);
        }
        let output = self.inner.buffers().output();
        // Only the head's own write is searched: a body may contain a blank line too.
        let Some(end) = output.get(..amount).and_then(|sent| sent.windows(4).position(|w| w == b"\r\n\r\n")) else {
            return self.inner.transmit_output(amount, timeout);
        };
        let lines = self.lines.clone();
        // Up to and including the last header line's CRLF; then ours; then the blank line
        // and whatever body followed in this write.
        let split = end + 2;
        // One write for the whole head (one segment, one TLS record), not three.
        let mut head = Vec::with_capacity(amount + lines.len());
        head.extend_from_slice(output.get(..split).unwrap_or_default());
        head.extend_from_slice(&lines);
        head.extend_from_slice(output.get(split..amount).unwrap_or_default());
        self.send(&head, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        // Reading means the request went out: whatever is written next is a new head.
        self.at_head = true;
        self.inner.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}
