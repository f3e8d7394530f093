//! The MCP client machine against scripted servers on a virtual clock: both eras, both
//! transports, and every error path. (Here, not in omni-protocol, because the core never
//! reads a clock, even in its tests.)
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use omni_protocol::mcp::*;
use serde_json::{json, Value};

/// A client and a virtual clock; what the client writes is collected, what the server
/// says is fed in.
struct Script {
    client: McpClient,
    start: Instant,
    now: Instant,
    effects: Vec<McpEffect>,
    events: Vec<McpEvent>,
}

impl Script {
    fn new(config: McpConfig) -> Self {
        let start = Instant::now();
        let client = McpClient::new(config, start);
        let mut script = Self { client, start, now: start, effects: Vec::new(), events: Vec::new() };
        script.drain();
        script
    }

    fn stdio() -> Self {
        Self::new(McpConfig::new(McpTransport::Stdio))
    }

    fn stdio_with(change: impl FnOnce(&mut McpConfig)) -> Self {
        let mut config = McpConfig::new(McpTransport::Stdio);
        change(&mut config);
        Self::new(config)
    }

    fn drain(&mut self) {
        while let Some(effect) = self.client.poll_effect() {
            self.effects.push(effect);
        }
        while let Some(event) = self.client.poll_event() {
            self.events.push(event);
        }
    }

    /// The stdio messages written since the last look.
    fn written(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        for effect in std::mem::take(&mut self.effects) {
            match effect {
                McpEffect::WriteLine(bytes) => {
                    assert_eq!(bytes.last(), Some(&b'\n'));
                    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1, "one message, one line");
                    out.push(serde_json::from_slice(&bytes).unwrap());
                }
                other => self.effects.push(other),
            }
        }
        out
    }

    /// The one message written since the last look.
    fn wrote(&mut self) -> Value {
        let mut written = self.written();
        assert_eq!(written.len(), 1, "{written:#?}");
        written.remove(0)
    }

    fn events(&mut self) -> Vec<McpEvent> {
        std::mem::take(&mut self.events)
    }

    fn say(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.bytes(&line);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.client.handle_input(McpInput::Stdout(bytes), self.now);
        self.drain();
    }

    fn answer(&mut self, request: &Value, result: Value) {
        self.say(json!({ "jsonrpc": "2.0", "id": request["id"], "result": result }));
    }

    fn fail(&mut self, request: &Value, code: i64, message: &str) {
        self.say(json!({ "jsonrpc": "2.0", "id": request["id"], "error": { "code": code, "message": message } }));
    }

    /// Jumps to `at` (seconds since the start), waking the client at every deadline on
    /// the way, as a driver would.
    fn advance_to(&mut self, secs: f64) {
        let until = self.start + Duration::from_secs_f64(secs);
        while let Some((at, _)) = self.client.poll_timeout().filter(|&(at, _)| at <= until) {
            self.now = self.now.max(at);
            self.client.handle_timeout(self.now);
            self.drain();
        }
        self.now = until;
    }

    fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Connects a modern server whose discover result has these capabilities; the first
    /// tool listing is answered with `tools`.
    fn modern(capabilities: Value, tools: Value) -> Self {
        let mut s = Self::stdio();
        let discover = s.wrote();
        s.answer(
            &discover,
            json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": capabilities }),
        );
        let mut written = s.written();
        let list = written.remove(0);
        assert_eq!(list["method"], "tools/list");
        s.answer(&list, json!({ "resultType": "complete", "tools": tools }));
        s.effects.extend(written.into_iter().map(|m| McpEffect::WriteLine(line(&m))));
        s
    }

    /// Connects a legacy server (probe refused) with a tools capability.
    fn legacy(tools: Value) -> Self {
        let mut s = Self::stdio();
        let discover = s.wrote();
        s.fail(&discover, -32601, "Method not found");
        let init = s.wrote();
        s.answer(&init, json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": { "listChanged": true } }, "serverInfo": { "name": "old", "version": "1" } }));
        let written = s.written();
        assert_eq!(written[0]["method"], "notifications/initialized");
        assert_eq!(written[1]["method"], "tools/list");
        s.answer(&written[1], json!({ "tools": tools }));
        s.events();
        s
    }
}

fn line(message: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap();
    bytes.push(b'\n');
    bytes
}

fn tool(name: &str) -> Value {
    json!({ "name": name, "description": format!("the {name} tool"), "inputSchema": { "type": "object", "properties": {} } })
}

fn tool_names(events: &[McpEvent]) -> Option<Vec<String>> {
    events.iter().rev().find_map(|e| match e {
        McpEvent::Tools { tools, .. } => Some(tools.iter().map(|t| t.name.clone()).collect()),
        _ => None,
    })
}

fn call_done(events: &[McpEvent]) -> Option<&Result<ToolCallResult, CallError>> {
    events.iter().find_map(|e| match e {
        McpEvent::CallDone { result, .. } => Some(result),
        _ => None,
    })
}

fn warnings(events: &[McpEvent]) -> Vec<&McpWarning> {
    events.iter().filter_map(|e| if let McpEvent::Warning(w) = e { Some(w) } else { None }).collect()
}

// ---- the eras ----------------------------------------------------------------------------

#[test]
fn a_modern_server_answers_the_probe_and_every_request_carries_its_metadata() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    assert_eq!(discover["method"], "server/discover");
    let meta = &discover["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "omni");
    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({}));
    s.answer(
        &discover,
        json!({
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": { "tools": { "listChanged": true } },
            "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "ExampleServer", "version": "1.0.0" } },
            "instructions": "weather",
        }),
    );
    let events = s.events();
    let Some(McpEvent::Connected(info)) = events.first() else { panic!("{events:#?}") };
    assert_eq!(info.era, Era::Modern);
    assert_eq!(info.implementation.as_ref().unwrap()["name"], "ExampleServer");
    assert_eq!(info.instructions.as_deref(), Some("weather"));
    assert_eq!(s.client.era(), Some(Era::Modern));
    let written = s.written();
    assert_eq!(written.len(), 2, "{written:#?}");
    assert_eq!(written[0]["method"], "tools/list");
    assert_eq!(written[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(written[1]["method"], "subscriptions/listen");
    assert_eq!(written[1]["params"]["notifications"]["toolsListChanged"], true);
    s.answer(&written[0], json!({ "resultType": "complete", "tools": [tool("weather")] }));
    assert_eq!(tool_names(&s.events()), Some(vec!["weather".to_string()]));
    // No handshake was ever sent.
    assert!(s.written().is_empty());
}

#[test]
fn a_refused_probe_falls_back_to_the_legacy_handshake() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    s.fail(&discover, -32602, "Invalid params: not initialized");
    let init = s.wrote();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["params"]["clientInfo"]["name"], "omni");
    assert!(init["params"].get("_meta").is_none(), "legacy requests carry no era metadata");
    assert_ne!(init["id"], discover["id"]);
    s.answer(&init, json!({ "protocolVersion": "2025-06-18", "capabilities": { "tools": {} }, "serverInfo": { "name": "old", "version": "1" } }));
    let written = s.written();
    assert_eq!(written[0]["method"], "notifications/initialized");
    assert!(written[0].get("id").is_none());
    assert_eq!(written[1]["method"], "tools/list");
    assert!(written[1]["params"].get("_meta").is_none());
    assert_eq!(written.len(), 2, "no subscription in the legacy era: {written:#?}");
    let events = s.events();
    assert!(
        matches!(&events[0], McpEvent::Connected(info) if info.era == Era::Legacy && info.protocol_version == "2025-06-18")
    );
    assert_eq!(s.client.era(), Some(Era::Legacy));
}

#[test]
fn a_silent_probe_falls_back_after_its_timeout_and_its_late_answer_is_dropped_quietly() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    let (at, reason) = s.client.poll_timeout().unwrap();
    assert_eq!(at - s.start, DEFAULT_PROBE_TIMEOUT);
    assert_eq!(reason, omni_protocol::machine::Timer::McpRequest);
    s.advance_to(9.9);
    assert!(s.written().is_empty());
    s.advance_to(10.0);
    let init = s.wrote();
    assert_eq!(init["method"], "initialize");
    s.fail(&discover, -32601, "late");
    assert_eq!(s.client.stats().unknown_responses, 0);
    assert!(warnings(&s.events()).is_empty());
    s.answer(&init, json!({ "protocolVersion": "2025-11-25", "capabilities": {} }));
    let events = s.events();
    assert!(matches!(&events[0], McpEvent::Connected(info) if info.era == Era::Legacy));
    assert_eq!(tool_names(&events), Some(vec![]), "no tools capability: an empty list, nothing asked");
}

#[test]
fn an_unsupported_version_error_keeps_a_modern_server_modern() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    s.say(json!({ "jsonrpc": "2.0", "id": discover["id"], "error": {
        "code": -32022, "message": "Unsupported protocol version",
        "data": { "supported": ["2027-03-01"], "requested": "2026-07-28" } } }));
    let events = s.events();
    assert!(
        matches!(events.last(), Some(McpEvent::Closed(Some(ConnectionError::NoCommonVersion { supported }))) if supported == &["2027-03-01"]),
        "{events:#?}"
    );
    assert!(s.written().is_empty(), "no initialize to a modern server");
    assert!(s.effects.contains(&McpEffect::Shutdown));
    assert_eq!(s.client.call_tool("x", Value::Null, s.now), Err(McpError::Closed));
}

#[test]
fn a_dual_era_server_without_our_modern_version_is_spoken_to_in_its_legacy_one() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    s.say(json!({ "jsonrpc": "2.0", "id": discover["id"], "error": {
        "code": -32022, "message": "Unsupported protocol version",
        "data": { "supported": ["2027-03-01", "2025-11-25"], "requested": "2026-07-28" } } }));
    assert_eq!(s.wrote()["method"], "initialize");
}

#[test]
fn a_legacy_server_answering_an_unknown_version_is_left() {
    let mut s = Script::stdio_with(|c| c.era = Some(Era::Legacy));
    let init = s.wrote();
    assert_eq!(init["method"], "initialize", "a remembered era skips the probe");
    s.answer(&init, json!({ "protocolVersion": "2023-01-01", "capabilities": {} }));
    let events = s.events();
    assert!(
        matches!(events.last(), Some(McpEvent::Closed(Some(ConnectionError::NoCommonVersion { .. })))),
        "{events:#?}"
    );
}

#[test]
fn calls_made_while_connecting_wait_and_go_out_in_the_era_s_shape() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    let op = s.client.call_tool("echo", json!({ "text": "hi" }), s.now).unwrap();
    s.drain();
    assert!(s.written().is_empty(), "nothing goes out before the era is known");
    s.fail(&discover, -32601, "Method not found");
    let init = s.wrote();
    s.answer(&init, json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": {} } }));
    let written = s.written();
    let call = written.iter().find(|m| m["method"] == "tools/call").unwrap();
    assert_eq!(call["id"], op.0);
    assert_eq!(call["params"]["arguments"]["text"], "hi");
    assert_eq!(call["params"]["_meta"], json!({ "progressToken": op.0 }));
}

// ---- tools -------------------------------------------------------------------------------

#[test]
fn pages_are_followed_by_cursor_and_a_repeated_cursor_ends_the_listing() {
    let mut s = Script::stdio();
    let discover = s.wrote();
    s.answer(&discover, json!({ "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} } }));
    let first = s.wrote();
    assert!(first["params"].get("cursor").is_none());
    s.answer(&first, json!({ "tools": [tool("a"), tool("b")], "nextCursor": "p2" }));
    assert_eq!(tool_names(&s.events()), None, "no list before the last page");
    let second = s.wrote();
    assert_eq!(second["params"]["cursor"], "p2");
    s.answer(&second, json!({ "tools": [tool("c")], "nextCursor": "p3" }));
    let third = s.wrote();
    assert_eq!(third["params"]["cursor"], "p3");
    s.answer(&third, json!({ "tools": [tool("d")], "nextCursor": "p2" }));
    let events = s.events();
    assert_eq!(tool_names(&events), Some(vec!["a".into(), "b".into(), "c".into(), "d".into()]));
    assert!(warnings(&events).contains(&&McpWarning::ToolsTruncated { kept: 4 }));
    assert!(s.written().is_empty(), "the repeated cursor is not followed");
    assert_eq!(s.client.tools().len(), 4);
}

#[test]
fn a_bad_tool_is_dropped_with_a_warning_and_the_rest_kept() {
    let tools = json!([tool("good"), { "name": "bad", "inputSchema": "nope" }, tool("good"), 7, tool("fine")]);
    let mut s = Script::stdio();
    let discover = s.wrote();
    s.answer(&discover, json!({ "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} } }));
    let list = s.wrote();
    s.answer(&list, json!({ "tools": tools }));
    let events = s.events();
    assert_eq!(tool_names(&events), Some(vec!["good".into(), "fine".into()]));
    let w = warnings(&events);
    assert!(w.contains(&&McpWarning::ToolDropped { name: Some("bad".into()), reason: ToolRejection::BadInputSchema }));
    assert!(w.contains(&&McpWarning::ToolDropped { name: Some("good".into()), reason: ToolRejection::Duplicate }));
    assert!(w.contains(&&McpWarning::ToolDropped { name: None, reason: ToolRejection::NoName }));
    assert!(matches!(
        events.iter().find(|e| matches!(e, McpEvent::Tools { .. })),
        Some(McpEvent::Tools { dropped: 3, .. })
    ));
}

#[test]
fn a_hundred_thousand_tools_are_bounded() {
    let tools: Vec<Value> = (0..100_000).map(|i| tool(&format!("t{i}"))).collect();
    let mut s = Script::stdio();
    let discover = s.wrote();
    s.answer(&discover, json!({ "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} } }));
    let list = s.wrote();
    s.answer(&list, json!({ "tools": tools, "nextCursor": "more" }));
    let events = s.events();
    let Some(McpEvent::Tools { tools, dropped }) = events.iter().find(|e| matches!(e, McpEvent::Tools { .. })) else {
        panic!("no list");
    };
    assert_eq!(tools.len(), McpLimits::default().max_tools);
    assert_eq!(*dropped, 90_000);
    assert!(warnings(&events).contains(&&McpWarning::ToolsTruncated { kept: 10_000 }));
    assert!(warnings(&events).len() < 10, "one warning for the truncation, not one per tool");
    assert!(s.written().is_empty(), "no page is asked for past the limit");
}

#[test]
fn a_legacy_list_change_lists_again_and_a_change_during_a_listing_lists_once_more() {
    let mut s = Script::legacy(json!([tool("a")]));
    assert_eq!(s.client.tools().len(), 1);
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" }));
    let list = s.wrote();
    assert_eq!(list["method"], "tools/list");
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" }));
    assert!(s.written().is_empty(), "one listing at a time");
    s.answer(&list, json!({ "tools": [tool("a"), tool("b")] }));
    assert_eq!(tool_names(&s.events()), Some(vec!["a".into(), "b".into()]));
    let again = s.wrote();
    assert_eq!(again["method"], "tools/list");
    s.answer(&again, json!({ "tools": [tool("b")] }));
    assert_eq!(tool_names(&s.events()), Some(vec!["b".into()]));
}

#[test]
fn a_modern_list_change_counts_only_on_the_subscription() {
    let mut s = Script::modern(json!({ "tools": { "listChanged": true } }), json!([tool("a")]));
    let listen = s.wrote();
    assert_eq!(listen["method"], "subscriptions/listen");
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": { "_meta": { "io.modelcontextprotocol/subscriptionId": listen["id"] }, "notifications": { "toolsListChanged": true } } }));
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" }));
    assert!(s.written().is_empty(), "not on the subscription: ignored");
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed",
        "params": { "_meta": { "io.modelcontextprotocol/subscriptionId": listen["id"] } } }));
    let list = s.wrote();
    assert_eq!(list["method"], "tools/list");
    // The subscription has no deadline: a day passes without it timing out.
    s.answer(&list, json!({ "tools": [] }));
    s.advance_to(86_400.0);
    assert!(warnings(&s.events()).is_empty());
    // The server ends it gracefully.
    s.answer(&listen, json!({ "resultType": "complete" }));
    assert!(warnings(&s.events()).contains(&&McpWarning::SubscriptionEnded));
}

#[test]
fn without_list_changed_no_subscription_is_opened() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    assert!(s.written().is_empty());
}

// ---- calls -------------------------------------------------------------------------------

#[test]
fn a_call_s_result_is_typed_and_an_is_error_result_is_a_result() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([tool("weather")]));
    let op = s.client.call_tool("weather", json!({ "city": "Oslo" }), s.now).unwrap();
    s.drain();
    let call = s.wrote();
    assert_eq!(call["params"]["name"], "weather");
    assert_eq!(call["params"]["_meta"]["progressToken"], op.0);
    assert_eq!(call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    s.answer(&call, json!({ "resultType": "complete", "content": [{ "type": "text", "text": "3°C" }], "structuredContent": { "c": 3 } }));
    let events = s.events();
    let result = call_done(&events).unwrap().as_ref().unwrap();
    assert_eq!(result.content, vec![Content::Text("3°C".into())]);
    assert_eq!(result.structured, Some(json!({ "c": 3 })));
    assert!(!result.is_error);

    s.client.call_tool("weather", json!({}), s.now).unwrap();
    s.drain();
    let call = s.wrote();
    s.answer(&call, json!({ "resultType": "complete", "content": [{ "type": "text", "text": "city is required" }], "isError": true }));
    let events = s.events();
    assert!(call_done(&events).unwrap().as_ref().unwrap().is_error);
}

#[test]
fn a_json_rpc_error_is_a_call_error() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    s.client.call_tool("nope", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.wrote();
    assert!(call["params"].get("arguments").is_none());
    s.fail(&call, -32602, "Unknown tool: nope");
    let events = s.events();
    assert!(
        matches!(call_done(&events), Some(Err(CallError::Rpc(e))) if e.code == -32602 && e.message == "Unknown tool: nope")
    );
}

#[test]
fn input_required_and_unknown_result_types_are_typed() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    s.client.call_tool("ask", Value::Null, s.now).unwrap();
    s.client.call_tool("odd", Value::Null, s.now).unwrap();
    s.drain();
    let calls = s.written();
    s.answer(&calls[0], json!({ "resultType": "input_required", "inputRequests": {} }));
    s.answer(&calls[1], json!({ "resultType": "task" }));
    let events = s.events();
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| if let McpEvent::CallDone { result, .. } = e { Some(result) } else { None })
        .collect();
    assert_eq!(done[0], &Err(CallError::InputRequired));
    assert_eq!(done[1], &Err(CallError::UnknownResultType("task".into())));
}

#[test]
fn a_call_times_out_without_progress_and_is_cancelled() {
    let mut s = Script::stdio_with(|c| c.era = Some(Era::Modern));
    let list = s.wrote();
    s.answer(&list, json!({ "tools": [] }));
    s.client.call_tool("slow", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.written().into_iter().find(|m| m["method"] == "tools/call").unwrap();
    s.advance_to(59.0);
    assert!(call_done(&s.events()).is_none());
    s.advance_to(60.0);
    assert_eq!(s.elapsed(), DEFAULT_REQUEST_TIMEOUT);
    assert_eq!(call_done(&s.events()), Some(&Err(CallError::Timeout { hard: false })));
    let cancel = s.wrote();
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], call["id"]);
}

#[test]
fn progress_resets_the_timeout_but_not_the_hard_maximum() {
    let mut s = Script::stdio_with(|c| {
        c.era = Some(Era::Legacy);
        c.request_timeout = Duration::from_secs(10);
        c.max_request_time = Duration::from_secs(30);
    });
    let init = s.wrote();
    s.answer(&init, json!({ "protocolVersion": "2025-11-25", "capabilities": {} }));
    s.written();
    s.events();
    let op = s.client.call_tool("long", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.wrote();
    let token = call["params"]["_meta"]["progressToken"].clone();
    for (i, t) in [8.0, 16.0, 24.0].into_iter().enumerate() {
        s.advance_to(t);
        s.say(json!({ "jsonrpc": "2.0", "method": "notifications/progress",
            "params": { "progressToken": token, "progress": i + 1, "total": 10, "message": "working" } }));
        let events = s.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, McpEvent::Progress { op: o, progress, total: Some(total), message: Some(m) }
            if *o == op && *progress == (i + 1) as f64 && *total == 10.0 && m == "working")),
            "{events:#?}"
        );
        assert!(call_done(&events).is_none(), "alive at {t}s: progress pushed the timeout to {}s", t + 10.0);
    }
    // Past 24 + 10 = 34 s the timeout would run; the hard maximum comes first, at 30 s.
    assert_eq!(s.client.poll_timeout().unwrap().0 - s.start, Duration::from_secs(30));
    s.advance_to(40.0);
    let events = s.events();
    assert_eq!(call_done(&events), Some(&Err(CallError::Timeout { hard: true })));
    assert_eq!(s.wrote()["method"], "notifications/cancelled");
    // Progress for a finished call changes nothing.
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": token, "progress": 9 } }));
    assert!(s.events().is_empty());
}

#[test]
fn a_cancelled_call_ends_at_once_and_its_late_answer_is_ignored() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    let op = s.client.call_tool("slow", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.wrote();
    s.client.cancel(op, s.now).unwrap();
    s.drain();
    assert_eq!(call_done(&s.events()), Some(&Err(CallError::Cancelled)));
    let cancel = s.wrote();
    assert_eq!(
        cancel,
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": op.0, "reason": "cancelled by the client" } })
    );
    assert_eq!(s.client.cancel(op, s.now), Err(McpError::UnknownOp(op)));
    s.answer(&call, json!({ "content": [] }));
    assert!(s.events().is_empty());
    assert_eq!(s.client.stats().unknown_responses, 0);
    assert_eq!(s.client.poll_timeout(), None, "its deadline went with it");
}

#[test]
fn pending_requests_are_bounded() {
    let mut s = Script::stdio_with(|c| {
        c.era = Some(Era::Modern);
        c.limits.max_pending = 3;
    });
    // The first listing is one pending request.
    s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.client.call_tool("b", Value::Null, s.now).unwrap();
    assert_eq!(s.client.call_tool("c", Value::Null, s.now), Err(McpError::TooManyPending { limit: 3 }));
    assert_eq!(s.client.call_tool("c", json!([1]), s.now), Err(McpError::TooManyPending { limit: 3 }));
    assert_eq!(s.client.ping(s.now), Err(McpError::TooManyPending { limit: 3 }));
}

#[test]
fn arguments_must_be_an_object_and_ping_needs_the_legacy_era() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    assert_eq!(s.client.call_tool("a", json!("text"), s.now), Err(McpError::ArgumentsNotObject));
    assert_eq!(s.client.ping(s.now), Err(McpError::PingUnsupported));
}

#[test]
fn pings_go_both_ways_in_the_legacy_era() {
    let mut s = Script::legacy(json!([]));
    s.say(json!({ "jsonrpc": "2.0", "id": "srv-1", "method": "ping" }));
    assert_eq!(s.wrote(), json!({ "jsonrpc": "2.0", "id": "srv-1", "result": {} }));
    s.say(json!({ "jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {} }));
    let refused = s.wrote();
    assert_eq!(refused["error"]["code"], -32601);
    assert!(
        warnings(&s.events()).contains(&&McpWarning::ServerRequestRefused { method: "sampling/createMessage".into() })
    );
    let op = s.client.ping(s.now).unwrap();
    s.drain();
    let ping = s.wrote();
    assert_eq!(ping["method"], "ping");
    s.answer(&ping, json!({}));
    assert_eq!(s.events(), vec![McpEvent::Pong { op, result: Ok(()) }]);
}

// ---- a hostile server --------------------------------------------------------------------

#[test]
fn an_answer_to_an_unknown_id_is_counted_and_warned_about() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    s.say(json!({ "jsonrpc": "2.0", "id": 4242, "result": {} }));
    s.say(json!({ "jsonrpc": "2.0", "id": "abc", "result": {} }));
    assert_eq!(warnings(&s.events()), vec![&McpWarning::UnknownResponse, &McpWarning::UnknownResponse]);
    assert_eq!(s.client.stats().unknown_responses, 2);
}

#[test]
fn non_json_is_a_warning_and_the_next_message_still_counts() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.wrote();
    let answer = json!({ "jsonrpc": "2.0", "id": call["id"], "result": { "content": [] } });
    let mut bytes = b"Server listening on stdio\n[1,2]\n".to_vec();
    bytes.extend(line(&answer));
    s.bytes(&bytes);
    let events = s.events();
    let w = warnings(&events);
    assert_eq!(w[0], &McpWarning::NotJson { excerpt: "Server listening on stdio".into() });
    assert!(matches!(w[1], McpWarning::NotJsonRpc { .. }));
    assert!(matches!(call_done(&events), Some(Ok(_))));
    assert_eq!(s.client.stats().malformed, 2);
}

#[test]
fn an_over_long_line_is_skipped_in_pieces_and_the_next_line_counts() {
    let mut s = Script::stdio_with(|c| {
        c.era = Some(Era::Modern);
        c.limits.max_message_bytes = 1024;
    });
    let list = s.written().into_iter().find(|m| m["method"] == "tools/list").unwrap();
    // A "1 GB line", in 64 KiB pieces; nothing of it is kept.
    let piece = vec![b'x'; 64 * 1024];
    for _ in 0..64 {
        s.bytes(&piece);
    }
    s.bytes(b"xxx\n");
    s.say(json!({ "jsonrpc": "2.0", "id": list["id"], "result": { "tools": [tool("a")] } }));
    let events = s.events();
    assert_eq!(warnings(&events), vec![&McpWarning::LineTooLong { limit: 1024 }]);
    assert_eq!(tool_names(&events), Some(vec!["a".into()]));
    assert_eq!(s.client.stats().too_long, 1);
}

#[test]
fn a_notification_flood_is_counted_and_dropped() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    let op = s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.drain();
    s.written();
    let progress = line(
        &json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": op.0, "progress": 1 } }),
    );
    let flood: Vec<u8> = progress.iter().copied().cycle().take(progress.len() * 5_000).collect();
    s.bytes(&flood);
    let events = s.events();
    let shown = events.iter().filter(|e| matches!(e, McpEvent::Progress { .. })).count();
    assert!(shown <= 1_000, "{shown}");
    assert!(shown >= 990, "{shown}");
    assert_eq!(warnings(&events).len(), 1, "one warning per window");
    assert_eq!(s.client.stats().dropped, 5_000 - shown as u64);
    // A second later the budget is back.
    s.advance_to(1.5);
    s.bytes(&progress);
    assert!(s.events().iter().any(|e| matches!(e, McpEvent::Progress { .. })));
}

#[test]
fn the_server_closing_mid_call_fails_the_call_and_the_connection() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.drain();
    s.written();
    s.bytes(b"{\"jsonrpc\":\"2.0\",\"id\":");
    s.client.handle_input(McpInput::StdoutClosed, s.now);
    s.drain();
    let events = s.events();
    assert_eq!(call_done(&events), Some(&Err(CallError::Closed)));
    assert!(warnings(&events).contains(&&McpWarning::CutLine));
    assert_eq!(events.last(), Some(&McpEvent::Closed(Some(ConnectionError::ServerClosed))));
    assert!(s.client.is_closed());
    assert_eq!(s.client.poll_timeout(), None);
    assert!(s.effects.contains(&McpEffect::Shutdown));
}

#[test]
fn close_cancels_what_is_pending() {
    let mut s = Script::modern(json!({ "tools": {} }), json!([]));
    s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.client.close(s.now);
    s.drain();
    let events = s.events();
    assert_eq!(call_done(&events), Some(&Err(CallError::Cancelled)));
    assert_eq!(events.last(), Some(&McpEvent::Closed(None)));
}

// ---- streamable HTTP ---------------------------------------------------------------------

use omni_protocol::dialect::HttpRequest;

const URL: &str = "https://mcp.example/mcp";

fn http() -> Script {
    let headers = vec![omni_protocol::dialect::Header::secret("authorization", "Bearer sk-secret")];
    Script::new(McpConfig::new(McpTransport::Http { url: URL.into(), headers }))
}

/// A POST the client sent: its exchange, request and body.
struct Post {
    exchange: ExchangeId,
    request: HttpRequest,
    body: Value,
}

impl Post {
    fn header(&self, name: &str) -> Option<&str> {
        self.request.header(name)
    }
}

impl Script {
    fn posts(&mut self) -> Vec<Post> {
        let mut out = Vec::new();
        for effect in std::mem::take(&mut self.effects) {
            match effect {
                McpEffect::HttpSend { exchange, request } => {
                    // A GET (the legacy session's stream) has no body.
                    let body = if request.body.is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_slice(&request.body).unwrap()
                    };
                    out.push(Post { exchange, request, body });
                }
                other => self.effects.push(other),
            }
        }
        out
    }

    fn post(&mut self) -> Post {
        let mut posts = self.posts();
        assert_eq!(posts.len(), 1, "{:#?}", posts.iter().map(|p| &p.body).collect::<Vec<_>>());
        posts.remove(0)
    }

    fn respond(&mut self, exchange: ExchangeId, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        self.client.handle_input(McpInput::HttpHead { exchange, status, headers }, self.now);
        if !body.is_empty() {
            self.client.handle_input(McpInput::HttpBody { exchange, bytes: body }, self.now);
        }
        self.client.handle_input(McpInput::HttpEnd { exchange }, self.now);
        self.drain();
    }

    fn respond_json(&mut self, post: &Post, headers: &[(&str, &str)], result: Value) {
        let body = serde_json::to_vec(&json!({ "jsonrpc": "2.0", "id": post.body["id"], "result": result })).unwrap();
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        self.respond(post.exchange, 200, &all, &body);
    }

    fn aborted(&mut self) -> Vec<ExchangeId> {
        let mut out = Vec::new();
        self.effects.retain(|e| match e {
            McpEffect::HttpAbort { exchange } => {
                out.push(*exchange);
                false
            }
            _ => true,
        });
        out
    }
}

#[test]
fn http_modern_requests_carry_the_era_s_headers_and_an_sse_answer_streams_progress() {
    let mut s = http();
    let discover = s.post();
    assert_eq!(discover.request.url, URL);
    assert_eq!(discover.header("accept"), Some("application/json, text/event-stream"));
    assert_eq!(discover.header("content-type"), Some("application/json"));
    assert_eq!(discover.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(discover.header("mcp-method"), Some("server/discover"));
    assert_eq!(discover.header("authorization"), Some("Bearer sk-secret"));
    assert!(!format!("{:?}", discover.request).contains("sk-secret"), "the token stays secret");
    s.respond_json(
        &discover,
        &[],
        json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} } }),
    );
    let list = s.post();
    assert_eq!(list.header("mcp-method"), Some("tools/list"));
    assert!(list.header("mcp-session-id").is_none());
    s.respond_json(&list, &[], json!({ "resultType": "complete", "tools": [tool("héllo wörld")] }));
    assert_eq!(tool_names(&s.events()), Some(vec!["héllo wörld".into()]));

    let op = s.client.call_tool("héllo wörld", json!({}), s.now).unwrap();
    s.drain();
    let call = s.post();
    assert_eq!(call.header("mcp-method"), Some("tools/call"));
    assert_eq!(call.header("mcp-name"), Some("=?base64?aMOpbGxvIHfDtnJsZA==?="));
    let stream = format!(
        ": keep-alive\n\nevent: message\ndata: {}\n\ndata: {}\n\n",
        json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": op.0, "progress": 0.5 } }),
        json!({ "jsonrpc": "2.0", "id": op.0, "result": { "resultType": "complete", "content": [{ "type": "text", "text": "ok" }] } }),
    );
    let (head, tail) = stream.as_bytes().split_at(30);
    // The answer is in the second piece; a server that then keeps the stream open has it
    // closed by the client.
    s.effects.clear();
    s.client.handle_input(
        McpInput::HttpHead { exchange: call.exchange, status: 200, headers: &[("content-type", "text/event-stream")] },
        s.now,
    );
    s.client.handle_input(McpInput::HttpBody { exchange: call.exchange, bytes: head }, s.now);
    s.client.handle_input(McpInput::HttpBody { exchange: call.exchange, bytes: tail }, s.now);
    s.drain();
    let events = s.events();
    assert!(matches!(events[0], McpEvent::Progress { progress, .. } if progress == 0.5), "{events:#?}");
    assert_eq!(call_done(&events).unwrap().as_ref().unwrap().content, vec![Content::Text("ok".into())]);
    assert_eq!(events.len(), 2);
    assert_eq!(s.aborted(), vec![call.exchange]);
}

#[test]
fn http_a_400_without_a_modern_error_falls_back_to_a_legacy_session() {
    let mut s = http();
    let discover = s.post();
    s.respond(discover.exchange, 400, &[("content-type", "text/plain")], b"Bad Request: No valid session ID provided");
    let init = s.post();
    assert_eq!(init.body["method"], "initialize");
    assert!(init.header("mcp-protocol-version").is_none(), "the header comes after initialization");
    assert!(init.header("mcp-method").is_none(), "a legacy request");
    s.respond_json(
        &init,
        &[("Mcp-Session-Id", "sess-1234")],
        json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": { "listChanged": true } } }),
    );
    let posts = s.posts();
    assert_eq!(posts[0].body["method"], "notifications/initialized");
    assert_eq!(posts[1].body["method"], "tools/list");
    // The session's standalone stream, for what the server says unasked.
    assert_eq!(posts.len(), 3);
    assert_eq!(posts[2].request.method, omni_protocol::dialect::Method::Get);
    assert_eq!(posts[2].header("accept"), Some("text/event-stream"));
    assert!(posts[2].header("content-type").is_none());
    for post in &posts {
        assert_eq!(post.header("mcp-session-id"), Some("sess-1234"));
        assert_eq!(post.header("mcp-protocol-version"), Some("2025-11-25"));
        assert!(
            post.request.headers.iter().any(|h| h.name == "mcp-session-id" && h.sensitive),
            "the session id is a credential"
        );
    }
    s.respond(posts[0].exchange, 202, &[], b"");
    s.respond_json(&posts[1], &[], json!({ "tools": [tool("a")] }));
    let events = s.events();
    assert!(matches!(&events[0], McpEvent::Connected(info) if info.era == Era::Legacy));
    assert_eq!(tool_names(&events), Some(vec!["a".into()]));
    assert!(warnings(&events).is_empty(), "{events:#?}");
    // A list change on that stream lists again.
    let stream = posts[2].exchange;
    s.client.handle_input(
        McpInput::HttpHead { exchange: stream, status: 200, headers: &[("content-type", "text/event-stream")] },
        s.now,
    );
    let change = format!("data: {}\n\n", json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" }));
    s.client.handle_input(McpInput::HttpBody { exchange: stream, bytes: change.as_bytes() }, s.now);
    s.drain();
    let again = s.post();
    assert_eq!(again.body["method"], "tools/list");
    s.respond_json(&again, &[], json!({ "tools": [tool("a"), tool("b")] }));
    assert_eq!(tool_names(&s.events()), Some(vec!["a".into(), "b".into()]));
}

#[test]
fn http_a_legacy_server_without_a_stream_is_not_asked_again() {
    let headers = vec![omni_protocol::dialect::Header::secret("authorization", "Bearer sk-secret")];
    let config = McpConfig::new(McpTransport::Http { url: URL.into(), headers });
    let mut s = Script::new(McpConfig { era: Some(Era::Legacy), ..config });
    let init = s.post();
    s.respond_json(
        &init,
        &[("Mcp-Session-Id", "sess-1")],
        json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": { "listChanged": true } } }),
    );
    let posts = s.posts();
    let get = posts.iter().find(|p| p.request.method == omni_protocol::dialect::Method::Get).expect("the GET");
    // 404 on the stream is no lost session: no new initialize.
    s.respond(get.exchange, 404, &[], b"");
    let after = s.posts();
    assert!(
        after.iter().all(|p| p.body["method"] != "initialize"),
        "{:?}",
        after.iter().map(|p| &p.body).collect::<Vec<_>>()
    );
}

#[test]
fn http_a_400_with_a_modern_error_is_no_reason_to_fall_back() {
    let mut s = http();
    let discover = s.post();
    let body = json!({ "jsonrpc": "2.0", "id": discover.body["id"], "error": { "code": -32022, "message": "Unsupported protocol version",
        "data": { "supported": ["2027-03-01"], "requested": "2026-07-28" } } });
    s.respond(discover.exchange, 400, &[("content-type", "application/json")], &serde_json::to_vec(&body).unwrap());
    assert!(s.posts().is_empty(), "no initialize");
    assert!(matches!(s.events().last(), Some(McpEvent::Closed(Some(ConnectionError::NoCommonVersion { .. })))));

    let mut s = http();
    let discover = s.post();
    let body = json!({ "jsonrpc": "2.0", "id": discover.body["id"], "error": { "code": -32020, "message": "Header mismatch" } });
    s.respond(discover.exchange, 400, &[], &serde_json::to_vec(&body).unwrap());
    assert!(s.posts().is_empty());
    assert!(matches!(s.events().last(), Some(McpEvent::Closed(Some(ConnectionError::Refused(e)))) if e.code == -32020));
}

fn http_legacy() -> Script {
    let mut s = Script::new(McpConfig {
        era: Some(Era::Legacy),
        ..McpConfig::new(McpTransport::Http { url: URL.into(), headers: Vec::new() })
    });
    let init = s.post();
    s.respond_json(
        &init,
        &[("mcp-session-id", "s1")],
        json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": {} } }),
    );
    let posts = s.posts();
    s.respond(posts[0].exchange, 202, &[], b"");
    s.respond_json(&posts[1], &[], json!({ "tools": [] }));
    s.events();
    s
}

#[test]
fn http_a_legacy_session_the_server_forgot_is_started_again() {
    let mut s = http_legacy();
    s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.post();
    s.respond(call.exchange, 404, &[], b"");
    assert_eq!(call_done(&s.events()), Some(&Err(CallError::SessionExpired)));
    let init = s.post();
    assert_eq!(init.body["method"], "initialize");
    assert!(init.header("mcp-session-id").is_none(), "a new session starts without the old id");
    s.respond_json(&init, &[("mcp-session-id", "s2")], json!({ "protocolVersion": "2025-11-25", "capabilities": {} }));
    let posts = s.posts();
    assert_eq!(posts[0].header("mcp-session-id"), Some("s2"));
}

#[test]
fn http_cancelling_closes_the_stream_and_tells_a_legacy_server() {
    let mut s = http_legacy();
    let op = s.client.call_tool("slow", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.post();
    s.client.cancel(op, s.now).unwrap();
    s.drain();
    assert_eq!(s.aborted(), vec![call.exchange]);
    let note = s.post();
    assert_eq!(note.body["method"], "notifications/cancelled");
    assert_eq!(note.body["params"]["requestId"], op.0);

    // A modern server takes the closed stream for the cancellation: no notification.
    let mut s = Script::new(McpConfig {
        era: Some(Era::Modern),
        ..McpConfig::new(McpTransport::Http { url: URL.into(), headers: Vec::new() })
    });
    s.posts();
    let op = s.client.call_tool("slow", Value::Null, s.now).unwrap();
    s.drain();
    let call = s.post();
    s.client.cancel(op, s.now).unwrap();
    s.drain();
    assert_eq!(s.aborted(), vec![call.exchange]);
    assert!(s.posts().is_empty());
}

#[test]
fn http_an_oversized_answer_a_failed_exchange_and_a_stream_without_an_answer_are_typed() {
    let mut s = Script::new(McpConfig {
        era: Some(Era::Modern),
        limits: McpLimits { max_message_bytes: 256, ..McpLimits::default() },
        ..McpConfig::new(McpTransport::Http { url: URL.into(), headers: Vec::new() })
    });
    s.posts();
    let big = s.client.call_tool("big", Value::Null, s.now).unwrap();
    let failed = s.client.call_tool("fail", Value::Null, s.now).unwrap();
    let cut = s.client.call_tool("cut", Value::Null, s.now).unwrap();
    let error = s.client.call_tool("err", Value::Null, s.now).unwrap();
    s.drain();
    let posts = s.posts();
    let sse = [("content-type", "text/event-stream")];
    s.client.handle_input(McpInput::HttpHead { exchange: posts[0].exchange, status: 200, headers: &sse }, s.now);
    let huge = format!("data: {}\n\n", "x".repeat(1000));
    s.client.handle_input(McpInput::HttpBody { exchange: posts[0].exchange, bytes: huge.as_bytes() }, s.now);
    s.client.handle_input(McpInput::HttpFailed { exchange: posts[1].exchange, reason: "connection reset" }, s.now);
    s.respond(posts[2].exchange, 200, &sse, b": only a comment\n\n");
    s.respond(posts[3].exchange, 500, &[], b"Internal Server Error");
    s.drain();
    let events = s.events();
    let result = |op: OpId| {
        events.iter().find_map(|e| match e {
            McpEvent::CallDone { op: o, result } if *o == op => Some(result.clone()),
            _ => None,
        })
    };
    assert_eq!(result(big), Some(Err(CallError::TooLarge { limit: 256 })));
    assert_eq!(result(failed), Some(Err(CallError::NoAnswer("connection reset".into()))));
    assert!(matches!(result(cut), Some(Err(CallError::NoAnswer(_)))));
    assert_eq!(result(error), Some(Err(CallError::Http { status: 500, body: "Internal Server Error".into() })));
    assert_eq!(s.aborted(), vec![posts[0].exchange]);
    // Input for exchanges that are over is ignored.
    s.client.handle_input(McpInput::HttpBody { exchange: posts[0].exchange, bytes: b"data: {}\n\n" }, s.now);
    s.drain();
    assert!(s.events().is_empty());
}

#[test]
fn http_x_mcp_header_parameters_are_mirrored_and_a_bad_annotation_drops_its_tool() {
    let sql = json!({ "name": "execute_sql", "inputSchema": { "type": "object", "properties": {
        "region": { "type": "string", "x-mcp-header": "Region" }, "query": { "type": "string" } } } });
    let bad = json!({ "name": "bad", "inputSchema": { "type": "object", "properties": {
        "ratio": { "type": "number", "x-mcp-header": "Ratio" } } } });
    let mut s = Script::new(McpConfig {
        era: Some(Era::Modern),
        ..McpConfig::new(McpTransport::Http { url: URL.into(), headers: Vec::new() })
    });
    let list = s.post();
    s.respond_json(&list, &[], json!({ "tools": [sql.clone(), bad.clone()] }));
    let events = s.events();
    assert_eq!(tool_names(&events), Some(vec!["execute_sql".into()]));
    assert!(
        matches!(warnings(&events)[..], [McpWarning::ToolDropped { name: Some(n), reason: ToolRejection::BadHeaderAnnotation(_) }] if n == "bad")
    );
    s.client.call_tool("execute_sql", json!({ "region": "us-west1", "query": "SELECT 1" }), s.now).unwrap();
    s.drain();
    let call = s.post();
    assert_eq!(call.header("mcp-param-region"), Some("us-west1"));
    assert_eq!(call.header("mcp-name"), Some("execute_sql"));
    s.client.call_tool("execute_sql", json!({ "query": "SELECT 1" }), s.now).unwrap();
    s.drain();
    assert_eq!(s.post().header("mcp-param-region"), None, "no value, no header");

    // Over stdio the annotations mean nothing: both tools stay.
    let s = Script::modern(json!({ "tools": {} }), json!([sql, bad]));
    assert_eq!(s.client.tools().len(), 2);
}

// ---- any bytes, any chunking -------------------------------------------------------------

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// A server's stdout after the client connected (modern, no list yet answered): the
    /// listing's answer, a log line, progress and the call's answer, junk in between.
    fn transcript() -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(line(&json!({ "jsonrpc": "2.0", "id": 1, "result": { "tools": [tool("a")] } })));
        out.extend(b"not json at all\r\n\n");
        out.extend(line(&json!({ "jsonrpc": "2.0", "method": "notifications/message", "params": { "level": "info", "data": "hi ✓" } })));
        out.extend(line(&json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": 2, "progress": 1 } })));
        out.extend(line(
            &json!({ "jsonrpc": "2.0", "id": 2, "result": { "content": [{ "type": "text", "text": "done" }] } }),
        ));
        out
    }

    fn run(chunks: &[&[u8]]) -> Vec<McpEvent> {
        let mut s = Script::stdio_with(|c| c.era = Some(Era::Modern));
        s.client.call_tool("a", Value::Null, s.now).unwrap();
        s.drain();
        s.events();
        for chunk in chunks {
            s.bytes(chunk);
        }
        s.events()
    }

    proptest! {
        #[test]
        fn events_do_not_depend_on_how_stdout_is_chunked(cuts in proptest::collection::vec(0usize..1000, 0..8)) {
            let bytes = transcript();
            let whole = run(&[&bytes]);
            prop_assert_eq!(whole.len(), 5, "{:#?}", whole);
            let answered = matches!(whole.last(), Some(McpEvent::CallDone { result: Ok(_), .. }));
            prop_assert!(answered, "the call's answer comes last");
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % bytes.len()).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for cut in cuts {
                chunks.push(&bytes[at..cut]);
                at = cut;
            }
            chunks.push(&bytes[at..]);
            prop_assert_eq!(run(&chunks), whole);
        }

        #[test]
        fn any_stdout_bytes_are_an_outcome_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut s = Script::stdio();
            s.bytes(&bytes);
            s.client.handle_input(McpInput::StdoutClosed, s.now);
            s.drain();
            prop_assert!(s.client.is_closed());
        }

        #[test]
        fn any_http_answer_is_an_outcome_never_a_panic(
            status in 100u16..600,
            sse in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..2000),
        ) {
            let mut s = http();
            let discover = s.post();
            let content_type = if sse { "text/event-stream" } else { "application/json" };
            s.respond(discover.exchange, status, &[("content-type", content_type)], &body);
            // Whatever came back, the client either knows the era, is initializing, or gave up.
            let next = s.posts();
            prop_assert!(s.client.era().is_some() || s.client.is_closed() || next.iter().any(|p| p.body["method"] == "initialize"));
        }
    }
}

#[test]
fn a_remembered_era_that_fails_is_probed_again_once() {
    // Remembered legacy, now modern: `initialize` is refused, the probe finds the era.
    let mut s = Script::stdio_with(|c| c.era = Some(Era::Legacy));
    let init = s.wrote();
    s.fail(&init, -32601, "Method not found");
    let discover = s.wrote();
    assert_eq!(discover["method"], "server/discover");
    s.answer(&discover, json!({ "supportedVersions": ["2026-07-28"], "capabilities": {} }));
    assert!(matches!(s.events().first(), Some(McpEvent::Connected(info)) if info.era == Era::Modern));

    // Remembered modern, now legacy: the first listing is refused, the probe is too, and
    // the handshake follows; a call made meanwhile goes out in the legacy shape.
    let mut s = Script::stdio_with(|c| c.era = Some(Era::Modern));
    let list = s.wrote();
    s.fail(&list, -32600, "Server not initialized");
    let discover = s.wrote();
    assert_eq!(discover["method"], "server/discover");
    let op = s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.drain();
    assert!(s.written().is_empty());
    s.fail(&discover, -32601, "Method not found");
    let init = s.wrote();
    assert_eq!(init["method"], "initialize");
    s.answer(&init, json!({ "protocolVersion": "2025-11-25", "capabilities": {} }));
    let written = s.written();
    let call = written.iter().find(|m| m["method"] == "tools/call").unwrap();
    assert_eq!(call["id"], op.0);
    assert!(call["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_none());

    // Once only: a legacy server that refuses `initialize` after the re-probe is left.
    let mut s = Script::stdio_with(|c| c.era = Some(Era::Legacy));
    let init = s.wrote();
    s.fail(&init, -32603, "broken");
    let discover = s.wrote();
    s.fail(&discover, -32601, "Method not found");
    let init = s.wrote();
    s.fail(&init, -32603, "broken");
    assert!(matches!(s.events().last(), Some(McpEvent::Closed(Some(ConnectionError::Handshake(CallError::Rpc(_)))))));
    assert!(s.written().is_empty());
}

#[test]
fn durations_too_large_for_the_clock_mean_no_limit_not_a_panic() {
    let mut s = Script::stdio_with(|c| {
        c.era = Some(Era::Modern);
        c.request_timeout = Duration::MAX;
        c.max_request_time = Duration::MAX;
        c.probe_timeout = Duration::MAX;
    });
    let list = s.wrote();
    assert_eq!(s.client.poll_timeout(), None);
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": list["id"], "progress": 1 } }));
    let op = s.client.call_tool("a", Value::Null, s.now).unwrap();
    s.drain();
    s.say(json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": op.0, "progress": 1 } }));
    assert_eq!(s.client.poll_timeout(), None);
    // Only the soft limit too large: the hard maximum still holds.
    let mut s = Script::stdio_with(|c| {
        c.era = Some(Era::Modern);
        c.request_timeout = Duration::MAX;
        c.max_request_time = Duration::from_secs(5);
    });
    assert_eq!(s.client.poll_timeout().map(|(at, _)| at - s.start), Some(Duration::from_secs(5)));
    s.advance_to(5.0);
    assert!(matches!(warnings(&s.events())[..], [McpWarning::ToolsRefreshFailed(CallError::Timeout { hard: true })]));
}

#[test]
fn http_redirects_follow_omni_s_one_rule() {
    let mut s = http();
    let discover = s.post();
    // A same-origin 307: the same POST again at the new path, its headers kept.
    s.respond(discover.exchange, 307, &[("location", "/v2/mcp")], b"");
    assert_eq!(s.aborted(), vec![discover.exchange], "the redirect's own response is dropped");
    let again = s.post();
    assert_eq!(again.request.url, "https://mcp.example/v2/mcp");
    assert_eq!(again.body, discover.body);
    assert_eq!(again.header("authorization"), Some("Bearer sk-secret"));
    let discovered =
        json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} } });
    s.respond_json(&again, &[], discovered);
    // Another origin is never followed (the token would go with it): the listing fails.
    let list = s.post();
    s.respond(list.exchange, 308, &[("location", "https://elsewhere.example/mcp")], b"");
    assert!(s.posts().is_empty(), "nothing is sent to another origin");
    let events = s.events();
    let refused = warnings(&events).into_iter().any(
        |w| matches!(w, McpWarning::ToolsRefreshFailed(CallError::NoAnswer(why)) if why.contains("elsewhere.example")),
    );
    assert!(refused, "{events:#?}");
    // A POST is never turned into a GET (303).
    let op = s.client.call_tool("a", json!({}), s.now).unwrap();
    s.drain();
    let call = s.post();
    s.respond(call.exchange, 303, &[("location", "/other")], b"");
    assert!(s.posts().is_empty());
    assert!(matches!(call_done(&s.events()), Some(Err(CallError::NoAnswer(_)))), "call {op:?} failed");
}
