//! Keys stay out of ureq's logs: ureq-proto logs the bytes of the request head it writes
//! at trace level, so the sensitive headers (the key) are not given to ureq at all, nor a
//! key in the query (ureq is given the URL with placeholders, `QuerySecrets`). A
//! connector at the end of ureq's chain (after TLS wrapping, so on plaintext) puts them
//! into each request head as it goes out: the query's values back into the request line,
//! the headers before the blank line that ends the head. The first write after the
//! connection opened or after a response was read is a head (ureq writes a whole head at
//! once), and a kept connection carries one request after another.

use std::fmt;
use std::sync::Arc;

use omni_protocol::dialect::HttpRequest;
use omni_protocol::transport::QuerySecrets;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};
use ureq::Error;

/// What is kept from ureq and put into each request head as it goes out. `Debug` shows
/// no value.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    /// The sensitive headers, as header lines (`name: value\r\n`).
    pub(crate) lines: Vec<u8>,
    /// The secret query values of the URL ureq was given.
    pub(crate) query: QuerySecrets,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets").field("lines", &"<redacted>").field("query", &self.query).finish()
    }
}

impl Secrets {
    /// True when there is nothing to put in.
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.query.is_empty()
    }

    /// The secrets as bytes, for the idle agents' key: an agent puts its own in.
    pub(crate) fn key(&self) -> Vec<u8> {
        let mut key = self.lines.clone();
        for value in self.query.values() {
            key.extend_from_slice(b"\n?");
            key.extend_from_slice(value.as_bytes());
        }
        key
    }
}

/// Takes the secrets out of `request`: the sensitive headers as header lines, checked as
/// any header is (the error names the header only), and the query's (its URL is left
/// with placeholders).
pub(crate) fn take_sensitive(request: &mut HttpRequest) -> Result<Secrets, String> {
    let query = QuerySecrets::take(&mut request.url)?;
    let mut lines = Vec::new();
    for header in request.headers.iter().filter(|h| h.sensitive) {
        ureq::http::HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| format!("header {} has a name that cannot be sent", header.name))?;
        ureq::http::HeaderValue::from_str(&header.value)
            .map_err(|_| format!("header {} has a value that cannot be sent", header.name))?;
        lines.extend_from_slice(format!("{}: {}\r\n", header.name, header.value).as_bytes());
    }
    request.headers.retain(|h| !h.sensitive);
    Ok(Secrets { lines, query })
}

/// The connector that wraps each connection in a [`Splicing`] transport.
pub(crate) struct SpliceHeaders {
    secrets: Arc<Secrets>,
}

impl SpliceHeaders {
    pub(crate) fn new(secrets: Secrets) -> Self {
        Self { secrets: Arc::new(secrets) }
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
        Ok(chained.map(|inner| {
            Box::new(Splicing { inner, secrets: self.secrets.clone(), at_head: true }) as Box<dyn Transport>
        }))
    }
}

/// A transport that puts the secrets into every request head it sends.
struct Splicing {
    inner: Box<dyn Transport>,
    secrets: Arc<Secrets>,
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
        let mut head = output.get(..amount).unwrap_or_default().to_vec();
        // The query's values go back into the request line, at the start of the head.
        if !self.secrets.query.restore(&mut head) {
            return Err(Error::Io(std::io::Error::other("the request line did not hold the query as written")));
        }
        // Only the head's own write is searched: a body may contain a blank line too.
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            // Up to and including the last header line's CRLF; then ours; then the blank
            // line and whatever body followed in this write.
            let split = end + 2;
            head.splice(split..split, self.secrets.lines.iter().copied());
        }
        // One write for the whole head (one segment, one TLS record), not three.
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
