//! What the server sends: stdout lines and exchange bodies become messages; answers end
//! requests, notifications become events or refreshes, a legacy server's requests are
//! answered, and every unsolicited message counts against the per-second budget.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::http::{self, Exchange};
use super::io::{CallError, ConnectionError, Era, ExchangeId, McpEvent, McpWarning, OpId};
use super::jsonrpc::{self, Incoming, Malformed, WireId};
use super::lines::{Line, LineSplitter};
use super::{deadline, excerpt, legacy, modern, Kind, McpClient, State};

impl McpClient {
    pub(super) fn on_stdout(&mut self, bytes: &[u8], now: Instant) {
        // Each line is handled as it is split, so a chunk of a million tiny lines never
        // becomes a million parsed messages held at once. The splitter is moved out for the
        // call so the handler may borrow the machine; `LineSplitter::new` does not allocate.
        let mut lines = std::mem::replace(&mut self.lines, LineSplitter::new(0));
        lines.feed(bytes, |line| {
            if self.state == State::Closed {
                return;
            }
            match line {
                Line::Whole(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => {}
                Line::Whole(bytes) => {
                    self.on_message(jsonrpc::parse(bytes).map_err(|e| (e, excerpt(bytes))), None, now);
                }
                Line::TooLong => {
                    self.stats.too_long += 1;
                    if self.unsolicited(now) {
                        let limit = self.config.limits.max_message_bytes;
                        self.events.push_back(McpEvent::Warning(McpWarning::LineTooLong { limit }));
                    }
                }
            }
        });
        self.lines = lines;
    }

    pub(super) fn on_stdout_closed(&mut self, now: Instant) {
        if let Some(rest) = self.lines.finish() {
            match jsonrpc::parse(&rest) {
                Ok(message) => self.on_message(Ok(message), None, now),
                Err(_) => self.events.push_back(McpEvent::Warning(McpWarning::CutLine)),
            }
        }
        if self.state != State::Closed {
            self.shut(Some(ConnectionError::ServerClosed), CallError::Closed, now);
        }
    }

    /// One message, from stdout or an exchange's body.
    pub(super) fn on_message(
        &mut self,
        message: Result<Incoming, (Malformed, String)>,
        via: Option<ExchangeId>,
        now: Instant,
    ) {
        match message {
            Err((malformed, excerpt)) => {
                self.stats.malformed += 1;
                if self.unsolicited(now) {
                    let warning = match malformed {
                        Malformed::NotJson => McpWarning::NotJson { excerpt },
                        Malformed::NotJsonRpc(reason) => McpWarning::NotJsonRpc { reason },
                    };
                    self.events.push_back(McpEvent::Warning(warning));
                }
            }
            Ok(Incoming::Result { id, result }) => self.on_response(id, Ok(result), now),
            Ok(Incoming::Error { id: Some(id), error }) => self.on_response(id, Err(CallError::Rpc(error)), now),
            Ok(Incoming::Error { id: None, error }) => {
                // An error without an id answers the request whose exchange carried it, if
                // any (the spec allows it when the server could not read our id).
                match via.and_then(|e| self.exchanges.get(&e)).and_then(Exchange::request) {
                    Some(id) => self.on_response(WireId::Number(id), Err(CallError::Rpc(error)), now),
                    None => self.on_unknown_response(now),
                }
            }
            Ok(Incoming::Notification { method, params }) => {
                if self.unsolicited(now) {
                    self.on_notification(&method, params, now);
                }
            }
            Ok(Incoming::Request { id, method }) => {
                if self.unsolicited(now) {
                    self.on_server_request(id, method);
                }
            }
        }
    }

    pub(super) fn on_response(&mut self, id: WireId, outcome: Result<Map<String, Value>, CallError>, now: Instant) {
        let WireId::Number(id) = id else { return self.on_unknown_response(now) };
        let Some(p) = self.pending.remove(&id) else {
            if !self.forgotten.contains(&id) {
                self.on_unknown_response(now);
            }
            return;
        };
        if let Some(at) = p.deadline {
            self.deadlines.remove(&(at, id));
        }
        if !p.sent {
            // An answer to a request still queued is a guess at our next id, not an answer.
            self.pending.insert(id, p);
            return self.on_unknown_response(now);
        }
        if let Some(exchange) = p.exchange {
            if let Some(e) = self.exchanges.get_mut(&exchange) {
                e.answered();
            }
        }
        if outcome.is_ok() && p.kind != Kind::Probe {
            self.confirmed = true;
        }
        self.finish(id, p.kind, outcome, now);
    }

    pub(super) fn on_unknown_response(&mut self, now: Instant) {
        self.stats.unknown_responses += 1;
        if self.unsolicited(now) {
            self.events.push_back(McpEvent::Warning(McpWarning::UnknownResponse));
        }
    }

    pub(super) fn on_notification(&mut self, method: &str, params: Map<String, Value>, now: Instant) {
        match method {
            "notifications/progress" => self.on_progress(&params, now),
            "notifications/tools/list_changed" => {
                let ours = match self.era() {
                    Some(Era::Legacy) => self.config.watch_tools,
                    // Modern servers send it only on the subscription's stream; on stdio its
                    // `subscriptionId` tells it from anything else.
                    Some(Era::Modern) => self.listen.is_some() && modern::subscription_of(&params) == self.listen,
                    None => false,
                };
                if ours {
                    self.start_listing(now);
                }
            }
            "notifications/message" => {
                let level = params.get("level").and_then(Value::as_str).unwrap_or("info").to_owned();
                let data = params.get("data").cloned().unwrap_or(Value::Null);
                self.events.push_back(McpEvent::Log { level, data });
            }
            // A modern server tearing down our subscription.
            "notifications/cancelled" => {
                let id = params.get("requestId").and_then(Value::as_u64);
                if id.is_some() && id == self.listen {
                    if let Some(id) = id {
                        self.abandon_quietly(id);
                    }
                    self.listen = None;
                    self.events.push_back(McpEvent::Warning(McpWarning::SubscriptionEnded));
                }
            }
            // The subscription is open; whether the server agreed to `toolsListChanged` shows
            // in what it sends later, so the acknowledgement itself changes nothing.
            modern::ACKNOWLEDGED => {}
            // The rest (resource and prompt changes, ...) need nothing from a tools client.
            _ => {}
        }
    }

    pub(super) fn on_progress(&mut self, params: &Map<String, Value>, now: Instant) {
        let Some(id) = params.get("progressToken").and_then(Value::as_u64) else { return };
        let Some(p) = self.pending.get_mut(&id) else { return };
        if p.kind != Kind::Call {
            return;
        }
        // Progress shows the work goes on: the timeout restarts, capped by the hard
        // maximum from when the call was made.
        let next = deadline(p.made, now, self.config.request_timeout, self.config.max_request_time);
        if let Some(at) = std::mem::replace(&mut p.deadline, next) {
            self.deadlines.remove(&(at, id));
        }
        if let Some(next) = next {
            self.deadlines.insert((next, id));
        }
        let progress = params.get("progress").and_then(Value::as_f64).unwrap_or(0.0);
        let total = params.get("total").and_then(Value::as_f64);
        let message = params.get("message").and_then(Value::as_str).map(str::to_owned);
        self.events.push_back(McpEvent::Progress { op: OpId(id), progress, total, message });
    }

    pub(super) fn on_server_request(&mut self, id: WireId, method: String) {
        match self.era() {
            // Legacy servers may ask; `ping` must be answered, the rest are capabilities this
            // client did not declare.
            Some(Era::Legacy) | None => {
                let body = if method == legacy::PING {
                    jsonrpc::result(&id, json!({}))
                } else {
                    self.events.push_back(McpEvent::Warning(McpWarning::ServerRequestRefused { method }));
                    jsonrpc::error(&id, jsonrpc::METHOD_NOT_FOUND, "Method not found")
                };
                self.send_bytes(body, Era::Legacy, "", None, Vec::new(), http::Purpose::Notification);
            }
            // Modern servers "MUST NOT" send requests, and the client "MUST NOT" write
            // responses on stdio: set aside.
            Some(Era::Modern) => {
                self.events.push_back(McpEvent::Warning(McpWarning::ServerRequestRefused { method }));
            }
        }
    }

    /// Counts an unsolicited message against the per-second budget: true if it may be
    /// handled. The first drop of each window is warned about, with the running total.
    pub(super) fn unsolicited(&mut self, now: Instant) -> bool {
        let fresh =
            self.window.is_none_or(|start| start.checked_add(Duration::from_secs(1)).is_none_or(|end| now >= end));
        if fresh {
            self.window = Some(now);
            self.window_used = 0;
            self.warned_flood = false;
        }
        if self.window_used < self.config.limits.max_unsolicited_per_second {
            self.window_used += 1;
            return true;
        }
        self.stats.dropped += 1;
        if !self.warned_flood {
            self.warned_flood = true;
            self.events.push_back(McpEvent::Warning(McpWarning::Flood { dropped: self.stats.dropped }));
        }
        false
    }
}
