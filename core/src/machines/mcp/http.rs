//! Streamable HTTP: every message a POST, every answer a JSON body or an SSE stream of
//! that request's notifications and its response (`basic/transports/streamable-http.mdx`
//! of both revisions). The driver sends [`McpEffect::HttpSend`] and reports the head, the
//! body in pieces and the end; everything else is decided here: the headers each era
//! requires, how a body is framed, what an error status means (the era probe's fallback
//! is read from a 400's body), the legacy session.

use std::time::Instant;

use serde_json::Value;

use super::io::{CallError, Era, ExchangeId, McpEffect};
use super::jsonrpc::{self, Incoming};
use super::{excerpt, legacy, modern, Kind, McpClient};
use crate::wire::framing::{Frame, SseDecoder};
use crate::wire::http::{Header, HttpRequest, Method};
use crate::wire::redirect::{is_redirect, Redirects};

/// How much of an error status's body is read: enough for a JSON-RPC error, as the
/// request machine reads provider error pages.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why an exchange was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A request with this id.
    Request(u64),
    /// A notification or an answer to the server: a `202 Accepted` is all that comes.
    Notification,
    /// The legacy session's standalone GET stream: the server's own notifications (list
    /// changes) for as long as it stays open; a `405` says the server offers none.
    Stream,
}

#[derive(Debug)]
enum Body {
    /// No head yet.
    Waiting,
    Json(Vec<u8>),
    Sse(Box<SseDecoder>),
    /// An error status: its body, bounded.
    Error {
        status: u16,
        bytes: Vec<u8>,
    },
    /// Nothing to read (a 202, a notification's answer).
    Ignored,
}

/// One POST and its response.
#[derive(Debug)]
pub(super) struct Exchange {
    purpose: Purpose,
    body: Body,
    /// The request's answer came (the rest of its stream does not matter).
    answered: bool,
    /// The request as first sent, and the redirects followed since: omni's one rule
    /// (same origin only, method kept, a bounded number), as for a model's requests.
    original: HttpRequest,
    redirects: Redirects,
}

impl Exchange {
    pub(super) fn new(purpose: Purpose, original: HttpRequest) -> Self {
        Self { purpose, body: Body::Waiting, answered: false, original, redirects: Redirects::default() }
    }

    /// The request this exchange carries, if any.
    pub(super) fn request(&self) -> Option<u64> {
        match self.purpose {
            Purpose::Request(id) => Some(id),
            Purpose::Notification | Purpose::Stream => None,
        }
    }

    pub(super) fn answered(&mut self) {
        self.answered = true;
    }
}

/// The legacy session's standalone GET stream (`Accept: text/event-stream` only, no body).
pub(super) fn get_stream(url: &str, extra: &[Header], version: &str, session: &str) -> HttpRequest {
    let mut request = session_request(Method::Get, url, extra, version, session);
    request.set_header(Header::new("accept", "text/event-stream"));
    request
}

/// The `DELETE` that ends a legacy session.
pub(super) fn end_session(url: &str, extra: &[Header], version: &str, session: &str) -> HttpRequest {
    let mut request = session_request(Method::Delete, url, extra, version, session);
    request.headers.retain(|h| h.name != "accept");
    request
}

/// A request about the legacy session itself, without a body: a POST's headers but
/// its content type.
fn session_request(method: Method, url: &str, extra: &[Header], version: &str, session: &str) -> HttpRequest {
    let mut request = post(url, extra, Vec::new(), Era::Legacy, Some(version), "", None, Some(session));
    request.method = method;
    request.headers.retain(|h| h.name != "content-type");
    request
}

/// A POST of one message with the headers its era requires.
#[allow(clippy::too_many_arguments)] // each is a distinct header's source
pub(super) fn post(
    url: &str,
    extra: &[Header],
    body: Vec<u8>,
    era: Era,
    version: Option<&str>,
    method: &str,
    name: Option<&str>,
    session: Option<&str>,
) -> HttpRequest {
    let mut headers = vec![
        Header::new("content-type", "application/json"),
        // "MUST include an Accept header listing both" (both revisions).
        Header::new("accept", "application/json, text/event-stream"),
    ];
    match era {
        Era::Modern => {
            headers.push(Header::new(modern::HEADER_PROTOCOL_VERSION, version.unwrap_or(modern::VERSION)));
            if !method.is_empty() {
                headers.push(Header::new(modern::HEADER_METHOD, method));
            }
            if let Some(name) = name {
                headers.push(Header::new(modern::HEADER_NAME, modern::header_value(name)));
            }
        }
        Era::Legacy => {
            // On every request after `initialize` (none during it: `version` is unset).
            if let Some(version) = version {
                headers.push(Header::new(modern::HEADER_PROTOCOL_VERSION, version));
            }
            if let Some(session) = session {
                // The session id grants access to the session: a credential.
                headers.push(Header::secret(legacy::HEADER_SESSION, session));
            }
        }
    }
    let mut request = HttpRequest { method: Method::Post, url: url.to_owned(), headers, body };
    for header in extra {
        request.set_header(header.clone());
    }
    request
}

fn header<'a>(headers: &[(&str, &'a str)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, v)| v)
}

impl McpClient {
    /// Sends `request` as a new exchange carrying `exchange` (its purpose, its original
    /// request and redirects so far): the one place exchange ids are handed out.
    pub(super) fn open_exchange(&mut self, exchange: Exchange, request: HttpRequest) -> ExchangeId {
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        self.exchanges.insert(id, exchange);
        self.effects.push_back(McpEffect::HttpSend { exchange: id, request });
        id
    }

    pub(super) fn abort_exchange(&mut self, exchange: ExchangeId) {
        if self.exchanges.remove(&exchange).is_some() {
            self.effects.push_back(McpEffect::HttpAbort { exchange });
        }
    }

    pub(super) fn on_head(&mut self, id: ExchangeId, status: u16, headers: &[(&str, &str)], now: Instant) {
        let max = self.config.limits.max_message_bytes;
        let Some(exchange) = self.exchanges.get_mut(&id) else { return };
        if !matches!(exchange.body, Body::Waiting) {
            return;
        }
        let request = exchange.request();
        let exchange_purpose = exchange.purpose;
        let kind = request.and_then(|r| self.pending.get(&r)).map(|p| p.kind.clone());
        if is_redirect(status) {
            return self.on_redirect(id, status, headers, now);
        }
        // A GET stream the server does not offer (405, or anything else): no stream, and
        // nothing else follows from it (a 404 here is no lost session).
        if exchange_purpose == Purpose::Stream && !(200..300).contains(&status) {
            if let Some(exchange) = self.exchanges.get_mut(&id) {
                exchange.body = Body::Ignored;
            }
            return;
        }
        if (200..300).contains(&status) {
            if kind == Some(Kind::Initialize) {
                // The legacy session, assigned with the `InitializeResult`.
                self.session =
                    header(headers, legacy::HEADER_SESSION).filter(|s| legacy::valid_session_id(s)).map(str::to_owned);
            }
            let content_type = header(headers, "content-type").unwrap_or_default().to_ascii_lowercase();
            let stream = exchange_purpose == Purpose::Stream && content_type.starts_with("text/event-stream");
            let body = match (request, status) {
                _ if stream => Body::Sse(Box::new(SseDecoder::new(max))),
                (None, _) | (Some(_), 202) => Body::Ignored,
                _ if content_type.starts_with("text/event-stream") => Body::Sse(Box::new(SseDecoder::new(max))),
                _ => Body::Json(Vec::new()),
            };
            if let Some(exchange) = self.exchanges.get_mut(&id) {
                exchange.body = body;
            }
            return;
        }
        if let Some(exchange) = self.exchanges.get_mut(&id) {
            exchange.body = Body::Error { status, bytes: Vec::new() };
        }
        // A legacy session the server forgot: "MUST start a new session" (2025-11-25).
        if status == 404 && self.session.is_some() && self.era() == Some(Era::Legacy) {
            if let Some(request) = request {
                self.abandon_quietly(request);
                if let Some(kind) = kind {
                    self.finish(request, kind, Err(CallError::SessionExpired), now);
                }
            }
            // Requests sent in the dead session will not be answered: they fail the same.
            let stale: Vec<u64> = self.pending.iter().filter(|(_, p)| p.sent).map(|(&i, _)| i).collect();
            for request in stale {
                if let Some(p) = self.pending.get(&request) {
                    let kind = p.kind.clone();
                    self.abandon_quietly(request);
                    self.finish(request, kind, Err(CallError::SessionExpired), now);
                }
            }
            self.start_legacy(now);
        }
    }

    pub(super) fn on_body(&mut self, id: ExchangeId, bytes: &[u8], now: Instant) {
        let max = self.config.limits.max_message_bytes;
        let Some(exchange) = self.exchanges.get_mut(&id) else { return };
        let mut events = Vec::new();
        let overflow = match &mut exchange.body {
            Body::Json(buf) => {
                buf.extend_from_slice(bytes);
                buf.len() > max
            }
            Body::Sse(decoder) => decoder
                .feed(bytes, |frame| {
                    if let Frame::Event { data, .. } = frame {
                        if !data.trim().is_empty() {
                            events.push(data.as_bytes().to_vec());
                        }
                    }
                })
                .is_err(),
            Body::Error { bytes: buf, .. } => {
                let room = MAX_ERROR_BODY.saturating_sub(buf.len());
                buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
                false
            }
            Body::Waiting | Body::Ignored => false,
        };
        for data in events {
            self.on_message(jsonrpc::parse(&data).map_err(|e| (e, excerpt(&data))), Some(id), now);
        }
        if overflow {
            self.fail_exchange(id, CallError::TooLarge { limit: max }, now);
        } else if self.exchanges.get(&id).is_some_and(|e| e.answered) {
            // The final response "SHOULD terminate the stream"; a server that keeps it open
            // gets it closed, so that a connection is not held for nothing.
            self.abort_exchange(id);
        }
    }

    pub(super) fn on_end(&mut self, id: ExchangeId, now: Instant) {
        let Some(exchange) = self.exchanges.remove(&id) else { return };
        let request = exchange.request();
        match exchange.body {
            Body::Json(bytes) => {
                self.on_message(jsonrpc::parse(&bytes).map_err(|e| (e, excerpt(&bytes))), Some(id), now)
            }
            Body::Sse(mut decoder) => {
                let mut events = Vec::new();
                let _ = decoder.finish(|frame| {
                    if let Frame::Event { data, .. } = frame {
                        events.push(data.as_bytes().to_vec());
                    }
                });
                // The map no longer holds the exchange; an id-less error still answers it.
                let (purpose, original) = (exchange.purpose, exchange.original);
                let ignored = Exchange { body: Body::Ignored, ..Exchange::new(purpose, original) };
                self.exchanges.insert(id, ignored);
                for data in events {
                    self.on_message(jsonrpc::parse(&data).map_err(|e| (e, excerpt(&data))), Some(id), now);
                }
                self.exchanges.remove(&id);
            }
            Body::Error { status, bytes } => {
                if let Some(request) = request {
                    let error = match jsonrpc::parse(&bytes) {
                        Ok(Incoming::Error { error, .. }) => CallError::Rpc(error),
                        _ => CallError::Http { status, body: excerpt(&bytes) },
                    };
                    self.answer(request, Err(error), now);
                }
                return;
            }
            Body::Waiting | Body::Ignored => {}
        }
        // The exchange ended without an answer to its request.
        if let Some(request) = request.filter(|r| self.pending.contains_key(r)) {
            self.answer(request, Err(CallError::NoAnswer("the response ended without an answer".into())), now);
        }
    }

    pub(super) fn on_failed(&mut self, id: ExchangeId, reason: &str, now: Instant) {
        // The transport is done with it already: nothing to abort.
        let request = self.exchanges.remove(&id).and_then(|e| e.request());
        if let Some(request) = request {
            self.answer(request, Err(CallError::NoAnswer(reason.to_owned())), now);
        }
    }

    /// A redirect: the same request goes out again as a new exchange, or (to another
    /// origin, changing the method, too many) the request fails with why.
    fn on_redirect(&mut self, id: ExchangeId, status: u16, headers: &[(&str, &str)], now: Instant) {
        let Some(mut exchange) = self.exchanges.remove(&id) else { return };
        // The response is dropped: its connection closed, its body never read.
        self.effects.push_back(McpEffect::HttpAbort { exchange: id });
        let owned: Vec<(String, String)> = headers.iter().map(|&(n, v)| (n.to_owned(), v.to_owned())).collect();
        match exchange.redirects.on_head(&exchange.original, status, &owned) {
            Some(Ok(next)) => {
                let request = exchange.request();
                exchange.body = Body::Waiting;
                let again = self.open_exchange(exchange, next);
                if let Some(p) = request.and_then(|r| self.pending.get_mut(&r)) {
                    p.exchange = Some(again);
                }
            }
            Some(Err(error)) => {
                if let Some(request) = exchange.request() {
                    self.answer(request, Err(CallError::NoAnswer(error.to_string())), now);
                }
            }
            None => {}
        }
    }

    /// Ends an exchange and its request with `error`.
    fn fail_exchange(&mut self, id: ExchangeId, error: CallError, now: Instant) {
        let request = self.exchanges.get(&id).and_then(Exchange::request);
        self.abort_exchange(id);
        if let Some(request) = request {
            self.answer(request, Err(error), now);
        }
    }

    /// Ends request `id` with `outcome`, as if the server had answered.
    fn answer(&mut self, id: u64, outcome: Result<serde_json::Map<String, Value>, CallError>, now: Instant) {
        if let Some(p) = self.pending.remove(&id) {
            if let Some(at) = p.deadline {
                self.deadlines.remove(&(at, id));
            }
            self.forget(id);
            self.finish(id, p.kind, outcome, now);
        }
    }
}
