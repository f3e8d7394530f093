//! The era: the probe's verdict, the legacy handshake, becoming ready, and the end.

use std::time::Instant;

use serde_json::{json, Map, Value};

use super::io::{CallError, ConnectionError, Era, ExchangeId, McpEffect, McpEvent, McpTransport, ServerInfo};
use super::modern::ProbeVerdict;
use super::{http, legacy, modern, Kind, McpClient, State};

impl McpClient {
    pub(super) fn on_probe(&mut self, outcome: Result<Map<String, Value>, CallError>, now: Instant) {
        let verdict = match &outcome {
            Ok(result) => modern::judge_discover(result),
            Err(CallError::Rpc(error)) => modern::judge_error(error),
            // An HTTP 4xx without a JSON-RPC error body, an exchange that ended without an
            // answer, an oversized answer: not a modern server's answer.
            Err(_) => ProbeVerdict::Legacy,
        };
        match verdict {
            ProbeVerdict::Modern => {
                let result = outcome.unwrap_or_default();
                let info = ServerInfo {
                    era: Era::Modern,
                    protocol_version: modern::VERSION.into(),
                    implementation: modern::server_info(&result).cloned(),
                    capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
                    instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
                };
                self.become_ready(info, now);
            }
            // A modern server without our modern version. The spec says not to fall back
            // to `initialize` from a modern error; but when the server itself lists a
            // legacy version we speak, it is dual-era and `initialize` is what it asks for.
            ProbeVerdict::ModernWithout { supported } => {
                if supported.iter().any(|v| legacy::ACCEPTED.contains(&v.as_str())) {
                    self.start_legacy(now);
                } else {
                    self.shut(Some(ConnectionError::NoCommonVersion { supported }), CallError::Closed, now);
                }
            }
            ProbeVerdict::ModernRefused(error) => {
                self.shut(Some(ConnectionError::Refused(error)), CallError::Closed, now)
            }
            ProbeVerdict::Legacy => self.start_legacy(now),
        }
    }

    pub(super) fn start_legacy(&mut self, now: Instant) {
        self.state = State::Initializing;
        self.session = None;
        let Value::Object(params) = legacy::initialize_params(&self.config.client.name, &self.config.client.version)
        else {
            return;
        };
        let timeout = self.config.request_timeout;
        self.request(Kind::Initialize, legacy::INITIALIZE, params, now, Some(timeout));
    }

    pub(super) fn on_initialized(&mut self, outcome: Result<Map<String, Value>, CallError>, now: Instant) {
        let result = match outcome {
            Ok(result) => result,
            Err(error) if self.may_reprobe(&error) => return self.reprobe(now),
            Err(error) => return self.shut(Some(ConnectionError::Handshake(error)), CallError::Closed, now),
        };
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !legacy::ACCEPTED.contains(&version.as_str()) {
            // "If the client does not support the version in the server's response, it
            // SHOULD disconnect" (2025-11-25 `lifecycle.mdx`).
            let error = ConnectionError::NoCommonVersion { supported: vec![version] };
            return self.shut(Some(error), CallError::Closed, now);
        }
        let info = ServerInfo {
            era: Era::Legacy,
            protocol_version: version,
            implementation: result.get("serverInfo").cloned(),
            capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
        };
        // Ready first, so that the notification carries the negotiated version's header;
        // it goes out before anything queued, as the handshake requires.
        self.state = State::Ready { era: Era::Legacy, version: info.protocol_version.clone() };
        self.notify(legacy::INITIALIZED, json!({}));
        self.become_ready(info, now);
    }

    pub(super) fn become_ready(&mut self, info: ServerInfo, now: Instant) {
        self.state = State::Ready { era: info.era, version: info.protocol_version.clone() };
        let tools = info.capabilities.get("tools").cloned();
        self.events.push_back(McpEvent::Connected(info.clone()));
        // Requests made while connecting go out now, in the order they were made.
        let queued: Vec<u64> = self.pending.iter().filter(|(_, p)| !p.sent).map(|(&id, _)| id).collect();
        for id in queued {
            self.send(id);
        }
        match tools {
            Some(tools) => {
                self.start_listing(now);
                let follows = tools.get("listChanged").and_then(Value::as_bool) == Some(true);
                if info.era == Era::Modern && follows && self.config.watch_tools && self.listen.is_none() {
                    let Value::Object(params) = modern::listen_params() else { return };
                    self.listen = Some(self.request(Kind::Listen, modern::LISTEN, params, now, None));
                }
                if info.era == Era::Legacy && follows && self.config.watch_tools {
                    self.open_stream(&info.protocol_version);
                }
            }
            // No tools capability: nothing to list, and a `tools/list` would be an error.
            None => self.events.push_back(McpEvent::Tools { tools: std::sync::Arc::from([]), dropped: 0 }),
        }
    }

    /// Opens a legacy HTTP session's standalone GET stream, where the server sends what it
    /// says unasked (a list change not caused by a call of ours). Once: a stream the
    /// server ends is not opened again (calls' streams and `refresh_tools` remain).
    fn open_stream(&mut self, version: &str) {
        let (McpTransport::Http { url, headers }, Some(session)) = (&self.config.transport, &self.session) else {
            return;
        };
        let request = http::get_stream(url, headers, version, session);
        self.open_exchange(http::Exchange::new(http::Purpose::Stream, request.clone()), request);
    }

    /// Ends the connection.
    pub(super) fn shut(&mut self, error: Option<ConnectionError>, pending_error: CallError, now: Instant) {
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            if let Some(p) = self.pending.remove(&id) {
                if let Some(at) = p.deadline {
                    self.deadlines.remove(&(at, id));
                }
                if matches!(p.kind, Kind::Call | Kind::Ping) {
                    self.finish(id, p.kind, Err(pending_error.clone()), now);
                }
            }
        }
        let exchanges: Vec<ExchangeId> = self.exchanges.keys().copied().collect();
        for exchange in exchanges {
            self.abort_exchange(exchange);
        }
        // A legacy HTTP session the client closes is ended on the server too.
        if let (None, State::Ready { era: Era::Legacy, version }, McpTransport::Http { url, headers }, Some(session)) =
            (&error, &self.state, &self.config.transport, &self.session)
        {
            let request = http::end_session(url, headers, version, session);
            self.effects.push_back(McpEffect::HttpForget { request });
        }
        self.state = State::Closed;
        self.listing = None;
        self.events.push_back(McpEvent::Closed(error));
        self.effects.push_back(McpEffect::Shutdown);
    }

    /// Whether a failure in a remembered era (never a probed one) is the server saying it
    /// now speaks the other: the spec lets a client persist the era, "re-probing if the
    /// cached assumption later fails" (`basic/versioning.mdx`). An answer is such a failure
    /// when it is a JSON-RPC error or an HTTP 4xx, and it counts only before anything
    /// succeeded in that era, and only once.
    pub(super) fn may_reprobe(&self, error: &CallError) -> bool {
        let refused = match error {
            CallError::Rpc(_) => true,
            CallError::Http { status, .. } => (400..500).contains(status),
            _ => false,
        };
        refused && self.config.era.is_some() && !self.reprobed && !self.confirmed
    }

    /// Probes again: calls made meanwhile wait for the verdict.
    pub(super) fn reprobe(&mut self, now: Instant) {
        self.reprobed = true;
        self.state = State::Probing;
        self.session = None;
        self.listing = None;
        let timeout = self.config.probe_timeout;
        self.request(Kind::Probe, modern::DISCOVER, Map::new(), now, Some(timeout));
    }
}
