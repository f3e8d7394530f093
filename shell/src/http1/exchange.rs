//! One request and its response on one connection, through ureq-proto's `Call` states:
//! the head written (the key and a query secret spliced in here, never given to
//! ureq-proto, which logs what it writes at trace level), the body sent, the response head
//! read (1xx skipped), the body decoded into the sink as it arrives; then whether the
//! connection may carry another request.

use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use omni_protocol::dialect::{HttpRequest, Method};
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::QuerySecrets;
use ureq_proto::client::state::{Cleanup, Prepare, RecvBody, RecvResponse};
use ureq_proto::client::{Call, RecvBodyResult, RecvResponseResult, SendRequestResult};
use ureq_proto::http::{self, HeaderName, HeaderValue, Uri};
use ureq_proto::BodyMode;

use super::{failure, Connector, Target};
use crate::ResponseSink;

/// How much is read from the socket at a time (the shell's choice for every transport).
const READ_SIZE: usize = crate::delivery::BODY_CHUNK;
/// Largest request or response head accepted (a header line longer than the buffer grows it).
const MAX_HEAD: usize = 1024 * 1024;
/// The first buffer a request head is written into (doubled up to [`MAX_HEAD`]).
const HEAD_BUFFER: usize = 4 * 1024;
/// A body up to this size goes out in the head's write.
const COALESCE_BODY: usize = 64 * 1024;

type Head = (u16, Vec<(String, String)>, Call<RecvResponse>);

pub(super) async fn exchange<C: Connector>(
    connector: &C,
    request: HttpRequest,
    sink: &ResponseSink,
) -> Result<(), TransportError> {
    let mut fresh = false;
    let (mut connection, (status, headers, call), mut carry, target) = loop {
        let (call, target, query) = prepare(&request)?;
        let (mut connection, reused) = connector.connect(&target, fresh).await?;
        // Bytes read past the part being parsed (the head's tail is the body's start).
        let mut carry = Vec::with_capacity(READ_SIZE);
        let mut heard = false;
        let head = match write_request(&mut connection, call, &request, &query).await {
            Ok(call) => read_head(&mut connection, call, &mut carry, &mut heard).await,
            Err(e) => Err(e),
        };
        match head {
            Ok(head) => break (connection, head, carry, target),
            // A kept connection the server closed (its keep-alive timeout racing this
            // request) fails before any response byte: the request was never answered,
            // so it goes out again at once on a fresh connection rather than through the
            // core's retry and its backoff. Once only.
            Err(e) if reused && !heard && e.kind == TransportErrorKind::Connect => fresh = true,
            Err(e) => return Err(e),
        }
    };
    if !sink.head(status, headers).await {
        return Ok(());
    }
    let finished = match call.proceed() {
        Some(RecvResponseResult::RecvBody(call)) => read_body(&mut connection, call, &mut carry, sink).await?,
        // No body (e.g. 204): the core decides what the status means.
        Some(RecvResponseResult::Cleanup(cleanup)) => Some(cleanup),
        // A redirect: the core sees the status and decides (omni_protocol::transport); the
        // connection is not kept.
        Some(RecvResponseResult::Redirect(_)) => None,
        None => return Err(failure(TransportErrorKind::Other, "incomplete response head")),
    };
    // Kept before the core hears of the end, so the request it sends next finds it.
    if finished.is_some_and(|cleanup| !cleanup.must_close_connection()) && carry.is_empty() {
        connector.keep(target, connection);
    }
    Ok(())
}

/// The ureq-proto call for `request`: the core's headers and a content-length for the
/// body. ureq-proto adds the Host header from the URL. A key in the query is not given to
/// ureq-proto either: its URL holds placeholders, and `write_request` puts the values back.
fn prepare(request: &HttpRequest) -> Result<(Call<Prepare>, Target, QuerySecrets), TransportError> {
    let invalid =
        |what: &str, e: &dyn std::fmt::Display| failure(TransportErrorKind::Other, format_args!("{what}: {e}"));
    let mut url = request.url.clone();
    let query = QuerySecrets::take(&mut url).map_err(|e| failure(TransportErrorKind::Other, e))?;
    let uri: Uri = url.parse().map_err(|e| invalid("invalid URL", &e))?;
    let target = Target::of(&uri)?;
    let method = match request.method {
        Method::Get => http::Method::GET,
        Method::Post => http::Method::POST,
        Method::Delete => http::Method::DELETE,
    };
    let mut builder = http::Request::builder().method(method).uri(uri);
    // Sensitive headers (keys) are added to the written head by `write_request`.
    for header in request.headers.iter().filter(|h| !h.sensitive) {
        let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|e| invalid("header name", &e))?;
        // The message names the header only: the value may be a key.
        let value = HeaderValue::from_str(&header.value).map_err(|e| invalid(&header.name, &e))?;
        builder = builder.header(name, value);
    }
    if !request.body.is_empty() || request.method == Method::Post {
        builder = builder.header(http::header::CONTENT_LENGTH, request.body.len());
    }
    let built = builder.body(()).map_err(|e| invalid("request", &e))?;
    let call = Call::new(built).map_err(|e| invalid("request", &e))?;
    Ok((call, target, query))
}

/// Writes the head (with the query's secrets put back and the sensitive headers spliced
/// in), then the body straight from the core's buffer.
async fn write_request(
    connection: &mut (impl AsyncWrite + Unpin),
    call: Call<Prepare>,
    request: &HttpRequest,
    query: &QuerySecrets,
) -> Result<Call<RecvResponse>, TransportError> {
    let io = |e: std::io::Error| failure(TransportErrorKind::Connect, format_args!("sending the request: {e}"));
    let protocol = |e: ureq_proto::Error| failure(TransportErrorKind::Other, format_args!("request: {e}"));
    let mut call = call.proceed();
    // A request head is a few hundred bytes: a small buffer, doubled when one is longer.
    // Zeroing a read-sized one cost a fresh process's first call as much as its parsing.
    let mut buffer = vec![0u8; HEAD_BUFFER];
    let mut head = Vec::with_capacity(HEAD_BUFFER);
    while !call.can_proceed() {
        match call.write(&mut buffer) {
            Ok(0) => return Err(failure(TransportErrorKind::Other, "the request head could not be written")),
            Ok(n) => head.extend_from_slice(buffer.get(..n).unwrap_or_default()),
            Err(ureq_proto::Error::OutputOverflow) if buffer.len() < MAX_HEAD => buffer.resize(buffer.len() * 2, 0),
            Err(e) => return Err(protocol(e)),
        }
    }
    if !query.restore(&mut head) {
        return Err(failure(TransportErrorKind::Other, "the request line did not hold the query as written"));
    }
    splice_sensitive_headers(&mut head, request)?;
    let body = &request.body;
    let receiving = match call.proceed().map_err(protocol)? {
        Some(SendRequestResult::SendBody(mut sending)) => {
            // With a content-length the body goes out as is, not through ureq-proto's
            // buffer: in the head's write when small (one segment, one TLS record), else
            // after it uncopied.
            sending.consume_direct_write(body.len()).map_err(protocol)?;
            if body.len() <= COALESCE_BODY {
                head.extend_from_slice(body);
                connection.write_all(&head).await.map_err(io)?;
            } else {
                connection.write_all(&head).await.map_err(io)?;
                connection.write_all(body).await.map_err(io)?;
            }
            sending.proceed().ok_or_else(|| failure(TransportErrorKind::Other, "the request body was not complete"))?
        }
        // Only a header of the application's own asks for this: the body would wait.
        Some(SendRequestResult::Await100(_)) => {
            return Err(failure(TransportErrorKind::Other, "`expect: 100-continue` is not supported"))
        }
        None => return Err(failure(TransportErrorKind::Other, "the request head was not complete")),
        Some(SendRequestResult::RecvResponse(receiving)) => {
            connection.write_all(&head).await.map_err(io)?;
            receiving
        }
    };
    connection.flush().await.map_err(io)?;
    Ok(receiving)
}

/// Adds the request's sensitive headers before the blank line that ends `head`. Their
/// values are checked like any header's: no CR, LF or other control byte.
fn splice_sensitive_headers(head: &mut Vec<u8>, request: &HttpRequest) -> Result<(), TransportError> {
    if !head.ends_with(b"\r\n\r\n") {
        return Err(failure(TransportErrorKind::Other, "the request head did not end as expected"));
    }
    let end = head.len() - 2;
    let mut lines = Vec::new();
    for header in request.headers.iter().filter(|h| h.sensitive) {
        HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|e| failure(TransportErrorKind::Other, format_args!("header name: {e}")))?;
        // The message names the header only: the value is a key.
        HeaderValue::from_str(&header.value)
            .map_err(|e| failure(TransportErrorKind::Other, format_args!("{}: {e}", header.name)))?;
        lines.extend_from_slice(header.name.as_bytes());
        lines.extend_from_slice(b": ");
        lines.extend_from_slice(header.value.as_bytes());
        lines.extend_from_slice(b"\r\n");
    }
    head.splice(end..end, lines);
    Ok(())
}

/// Reads until the response head is complete (skipping any 1xx); `heard` is set once
/// any byte came back.
async fn read_head(
    connection: &mut (impl AsyncRead + Unpin),
    mut call: Call<RecvResponse>,
    carry: &mut Vec<u8>,
    heard: &mut bool,
) -> Result<Head, TransportError> {
    loop {
        if !carry.is_empty() {
            let (used, response) = call
                .try_response(carry, false)
                .map_err(|e| failure(TransportErrorKind::Other, format_args!("response head: {e}")))?;
            carry.drain(..used.min(carry.len()));
            if let Some(response) = response {
                let headers = response
                    .headers()
                    .iter()
                    .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                    .collect();
                return Ok((response.status().as_u16(), headers, call));
            }
            if used > 0 {
                continue; // an informational response was skipped; the real one may be here
            }
        }
        if carry.len() > MAX_HEAD {
            return Err(failure(TransportErrorKind::Other, "response head too large"));
        }
        match read_more(connection, carry).await {
            Ok(0) => return Err(failure(TransportErrorKind::Connect, "the connection closed before a response")),
            Ok(_) => *heard = true,
            Err(e) => return Err(failure(TransportErrorKind::Connect, format_args!("awaiting the response: {e}"))),
        }
    }
}

/// Decodes the body as it arrives and sends each decoded piece at once. The call's
/// cleanup state comes back when the body ended by its own framing (length or last
/// chunk) and was all delivered: only then may the connection carry another request.
async fn read_body(
    connection: &mut (impl AsyncRead + Unpin),
    mut call: Call<RecvBody>,
    carry: &mut Vec<u8>,
    sink: &ResponseSink,
) -> Result<Option<Call<Cleanup>>, TransportError> {
    let close_delimited = call.body_mode() == BodyMode::CloseDelimited;
    // Grown to what the socket gives (at most READ_SIZE): a short reply never zeroes a
    // whole read's worth, a long stream reaches READ_SIZE at its first full read.
    let mut decoded = Vec::new();
    loop {
        if decoded.len() < carry.len().min(READ_SIZE) {
            decoded.resize(carry.len().min(READ_SIZE), 0);
        }
        let mut start = 0;
        while start < carry.len() {
            let rest = carry.get(start..).unwrap_or_default();
            let (used, produced) = call
                .read(rest, &mut decoded)
                .map_err(|e| failure(TransportErrorKind::Other, format_args!("response body: {e}")))?;
            start += used;
            if produced > 0 {
                let mut bytes = sink.buffers().take();
                bytes.extend_from_slice(decoded.get(..produced).unwrap_or_default());
                // Bounded: while the loop is behind, the socket is not read (TCP pushes back).
                if !sink.body(bytes).await {
                    return Ok(None);
                }
            }
            if used == 0 && produced == 0 {
                break; // a partial chunk header: wait for more bytes
            }
        }
        // Only the unparsed tail stays (at most a partial chunk line), so this is linear.
        carry.drain(..start.min(carry.len()));
        if !close_delimited && call.can_proceed() {
            return Ok(match call.proceed() {
                Some(RecvBodyResult::Cleanup(cleanup)) => Some(cleanup),
                _ => None,
            });
        }
        match read_more(connection, carry).await {
            Ok(0) if close_delimited || call.is_ended_chunked() => return Ok(None),
            Ok(0) => return Err(failure(TransportErrorKind::Reset, "the connection closed before the body ended")),
            Ok(_) => {}
            Err(e) => return Err(failure(TransportErrorKind::Reset, format_args!("reading the body: {e}"))),
        }
    }
}

/// Appends what the socket has (up to [`READ_SIZE`]) to `carry`; 0 means the peer closed.
async fn read_more(connection: &mut (impl AsyncRead + Unpin), carry: &mut Vec<u8>) -> std::io::Result<usize> {
    let filled = carry.len();
    carry.resize(filled + READ_SIZE, 0);
    let read = connection.read(carry.get_mut(filled..).unwrap_or_default()).await;
    carry.truncate(filled + *read.as_ref().unwrap_or(&0));
    read
}
