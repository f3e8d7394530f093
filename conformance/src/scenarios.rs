//! The generate scenarios every driver must pass, defined once: the pure simulation
//! runs them on a virtual clock, the drivers against the replay server, and both must
//! produce the same transcript.
//!
//! Bodies are Anthropic Messages streams, written as the API documents them.

use std::collections::BTreeMap;
use std::time::Duration;

use omni_protocol::generate::{GenerateConfig, Report, RequestId, RetryPolicy, ToolDecl, ToolOutcome};
use omni_protocol::text_tools::ToolProtocol;
use omni_protocol::{Auth, Context, Dialect, Model, Options, Provider, Quirks, ToolResultContent, ToolSpec};
use serde_json::json;

use crate::sim::{BodyStep, Reply, Scenario, ToolScript};

/// A named scenario: what the provider and tools do, and the call's options.
#[derive(Debug, Clone)]
pub struct NamedScenario {
    /// Short name.
    pub name: &'static str,
    /// Script.
    pub scenario: Scenario,
    /// Options of the call.
    pub options: Options,
    /// Stall timeout of the call.
    pub stall_timeout: Duration,
}

/// The model used by every scenario.
pub fn model() -> Model {
    let mut m = Model::new("anthropic", "claude-sonnet-4-5", Dialect::AnthropicMessages);
    m.max_output_tokens = 1024;
    m
}

/// A call of one prompt ("Hi") to [`model`], with a key, at a host that is never reached:
/// for feeding the generate machine a response by hand (benchmarks, allocation counts).
pub fn offline_call() -> GenerateConfig {
    let mut config = GenerateConfig::new(
        model(),
        provider("http://bench.invalid/v1"),
        Context::from_prompt("Hi"),
        Options::default(),
    );
    config.api_key = Some("sk-bench".into());
    config
}

/// The head of a successful streaming response to request `id`, as a machine's report.
pub fn stream_head(id: RequestId) -> Report<'static> {
    Report::ResponseHead { id, status: 200, headers: vec![("content-type".into(), "text/event-stream".into())] }
}

/// A provider at `base_url` speaking Anthropic Messages.
pub fn provider(base_url: &str) -> Provider {
    Provider {
        id: "anthropic".into(),
        name: "Anthropic (replay)".into(),
        base_url: base_url.into(),
        dialect: Dialect::AnthropicMessages,
        auth: Auth::Header { name: "x-api-key".into() },
        api_key_env: None,
        headers: Vec::new(),
        secret_headers: Vec::new(),
        quirks: Quirks::default(),
        hooks: Default::default(),
        tool_protocol: None,
    }
}

/// The tools of the scenarios: `get_weather` and `get_time`, both with handlers.
pub fn tools() -> Vec<ToolDecl> {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    ["get_weather", "get_time"]
        .into_iter()
        .map(|name| {
            let description = format!("{name} for a city");
            ToolDecl::new(ToolSpec { name: name.into(), description, input_schema: schema.clone() }, true)
        })
        .collect()
}

/// The configuration of `scenario` against a provider at `base_url`.
pub fn config(scenario: &NamedScenario, base_url: &str) -> GenerateConfig {
    let mut config = GenerateConfig::new(
        model(),
        provider(base_url),
        Context::from_prompt("What is the weather and the time in Paris?"),
        scenario.options.clone(),
    );
    config.api_key = Some("sk-replay".into());
    config.tools = tools();
    config.retry = RetryPolicy { seed: 7, ..RetryPolicy::default() };
    config.stall_timeout = scenario.stall_timeout;
    config
}

fn sse(event: &str, data: serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn message_start() -> String {
    sse(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_replay","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}),
    )
}

fn message_end(stop: &str, output_tokens: u64) -> String {
    sse(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":output_tokens}}),
    ) + &sse("message_stop", json!({"type":"message_stop"}))
}

/// Events of one text block at `index` streamed as `words`.
fn text_block(index: u32, words: &[&str]) -> Vec<String> {
    let mut out = vec![sse(
        "content_block_start",
        json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
    )];
    for w in words {
        out.push(sse(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":w}}),
        ));
    }
    out.push(sse("content_block_stop", json!({"type":"content_block_stop","index":index})));
    out
}

fn tool_block(index: u32, id: &str, name: &str, input: &str) -> Vec<String> {
    let (a, b) = input.split_at(input.len() / 2);
    vec![
        sse(
            "content_block_start",
            json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        ),
        sse(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":a}}),
        ),
        sse(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":b}}),
        ),
        sse("content_block_stop", json!({"type":"content_block_stop","index":index})),
    ]
}

/// A complete text answer, as events (one string per SSE event).
pub fn text_events(words: &[&str]) -> Vec<String> {
    let mut out = vec![message_start()];
    out.extend(text_block(0, words));
    out.push(message_end("end_turn", words.len() as u64));
    out
}

/// A complete answer calling `calls` (id, name, JSON input) after a short text.
pub fn tool_events(calls: &[(&str, &str, &str)]) -> Vec<String> {
    let mut out = vec![message_start()];
    out.extend(text_block(0, &["Let me check."]));
    for (i, (id, name, input)) in calls.iter().enumerate() {
        out.extend(tool_block(i as u32 + 1, id, name, input));
    }
    out.push(message_end("tool_use", 30));
    out
}

/// Events sent one per chunk, `gap` apart.
pub fn paced(events: &[String], gap: Duration) -> Reply {
    let mut body = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            body.push(BodyStep::Wait(gap));
        }
        body.push(BodyStep::Bytes(e.clone().into_bytes()));
    }
    Reply::Http { status: 200, headers: vec![("content-type".into(), "text/event-stream".into())], body }
}

fn answer(text: &str, delay_ms: u64) -> ToolScript {
    ToolScript::Answer {
        delay: Duration::from_millis(delay_ms),
        outcome: ToolOutcome::Ok(vec![ToolResultContent::Text { text: text.into() }]),
    }
}

const GAP: Duration = Duration::from_millis(5);

/// Every scenario of the drivers issue.
pub fn all() -> Vec<NamedScenario> {
    let final_answer = text_events(&["It is ", "sunny and ", "noon."]);
    let two_tools = tool_events(&[
        ("toolu_1", "get_weather", r#"{"city":"Paris"}"#),
        ("toolu_2", "get_time", r#"{"city":"Paris"}"#),
    ]);
    let weather_tools = || {
        BTreeMap::from([
            ("get_weather".to_string(), answer("sunny", 20)),
            ("get_time".to_string(), answer("12:00", 10)),
        ])
    };
    let overloaded = r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#;
    let base = |name: &'static str, scenario: Scenario| NamedScenario {
        name,
        scenario,
        options: Options::default(),
        stall_timeout: Duration::from_secs(2),
    };
    let mut pings = vec![message_start()];
    pings.extend(std::iter::repeat_n(sse("ping", json!({"type":"ping"})), 3));
    let mut stall_body = Vec::new();
    for p in &pings {
        stall_body.push(BodyStep::Bytes(p.clone().into_bytes()));
        stall_body.push(BodyStep::Wait(Duration::from_millis(200)));
    }
    stall_body.push(BodyStep::Hang);
    let mut reset_body = Vec::new();
    for e in final_answer.iter().take(3) {
        reset_body.push(BodyStep::Bytes(e.clone().into_bytes()));
        reset_body.push(BodyStep::Wait(GAP));
    }
    reset_body.push(BodyStep::Reset);
    let mut tool_timeout = base(
        "tool_timeout",
        Scenario {
            replies: vec![paced(&two_tools, GAP), paced(&final_answer, GAP)],
            tools: BTreeMap::from([
                ("get_weather".to_string(), ToolScript::Hang),
                ("get_time".to_string(), answer("12:00", 10)),
            ]),
            cancel_at: None,
        },
    );
    tool_timeout.options.tool_timeout = Some(Duration::from_millis(300));
    vec![
        base("text_stream", Scenario { replies: vec![paced(&final_answer, GAP)], ..Scenario::default() }),
        base(
            "two_step_tool_loop",
            Scenario {
                replies: vec![paced(&two_tools, GAP), paced(&final_answer, GAP)],
                tools: weather_tools(),
                cancel_at: None,
            },
        ),
        tool_timeout,
        base(
            "unknown_tool",
            Scenario {
                replies: vec![
                    paced(&tool_events(&[("toolu_9", "get_stock_price", r#"{"ticker":"ACME"}"#)]), GAP),
                    paced(&final_answer, GAP),
                ],
                ..Scenario::default()
            },
        ),
        base(
            "rate_limited_then_ok",
            Scenario {
                replies: vec![
                    Reply::error(
                        429,
                        &[("retry-after", "1")],
                        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#,
                    ),
                    paced(&final_answer, GAP),
                ],
                ..Scenario::default()
            },
        ),
        base(
            "server_error_twice_then_ok",
            Scenario {
                replies: vec![
                    Reply::error(500, &[], overloaded),
                    Reply::error(500, &[], overloaded),
                    paced(&final_answer, GAP),
                ],
                ..Scenario::default()
            },
        ),
        base(
            "unauthorized",
            Scenario {
                replies: vec![Reply::error(
                    401,
                    &[],
                    r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
                )],
                ..Scenario::default()
            },
        ),
        base(
            "reset_after_content",
            Scenario {
                replies: vec![Reply::Http {
                    status: 200,
                    headers: vec![("content-type".into(), "text/event-stream".into())],
                    body: reset_body,
                }],
                ..Scenario::default()
            },
        ),
        {
            let mut stall = base(
                "stall_of_pings_then_ok",
                Scenario {
                    replies: vec![
                        Reply::Http {
                            status: 200,
                            headers: vec![("content-type".into(), "text/event-stream".into())],
                            body: stall_body,
                        },
                        paced(&final_answer, GAP),
                    ],
                    ..Scenario::default()
                },
            );
            stall.stall_timeout = Duration::from_millis(600);
            stall
        },
        base(
            "cancel_mid_stream",
            Scenario {
                replies: vec![paced(&final_answer, Duration::from_millis(100))],
                cancel_at: Some(Duration::from_millis(250)),
                ..Scenario::default()
            },
        ),
        base(
            "cancel_during_tool_call",
            Scenario {
                replies: vec![paced(&two_tools, GAP)],
                tools: BTreeMap::from([
                    ("get_weather".to_string(), ToolScript::Hang),
                    ("get_time".to_string(), answer("12:00", 10)),
                ]),
                cancel_at: Some(Duration::from_millis(500)),
            },
        ),
        text_protocol_loop("xml_tool_loop", ToolProtocol::Xml, &XML_CALL_DELTAS, weather_tools(), &final_answer),
        text_protocol_loop("json_tool_loop", ToolProtocol::Json, &JSON_CALL_DELTAS, weather_tools(), &final_answer),
        {
            // A call broken before its tool's name is no call at all: the model is told so,
            // with the layout, and its second try runs (issue 23, C).
            let mut corrected = text_protocol_loop(
                "xml_unread_call_corrected",
                ToolProtocol::Xml,
                &XML_UNREAD_DELTAS,
                weather_tools(),
                &final_answer,
            );
            corrected.scenario.replies.insert(1, paced(&text_events(&XML_CALL_DELTAS), GAP));
            corrected
        },
        text_protocol_loop(
            "hermes_tool_loop",
            ToolProtocol::Hermes,
            &HERMES_CALL_DELTAS,
            weather_tools(),
            &final_answer,
        ),
        text_protocol_loop(
            "xml_mentions_then_a_call",
            ToolProtocol::Xml,
            &XML_MENTION_DELTAS,
            weather_tools(),
            &final_answer,
        ),
        text_protocol_loop(
            "xml_malformed_call_never_runs",
            ToolProtocol::Xml,
            &XML_MALFORMED_DELTAS,
            weather_tools(),
            &final_answer,
        ),
        text_protocol_loop(
            "json_malformed_call_never_runs",
            ToolProtocol::Json,
            &JSON_MALFORMED_DELTAS,
            weather_tools(),
            &final_answer,
        ),
    ]
}

/// A call the `xml` parser rejects though its arguments read as a whole object: a closing
/// tag too many (issue 23, A). It must never run; the model is told the parser's reason
/// and what it wrote, and the next request shows the call as it was written.
pub const XML_MALFORMED_DELTAS: [&str; 3] = [
    "Let me check.\n<tool_call>\n<get_weather>\n<city>Paris</city>\n",
    "</get_weather>\n</get_wea",
    "ther>\n</tool_call>",
];

/// Mentions of the opener that are not calls (in a thinking block written in the text,
/// in inline code), then a real call, which must run (issue 23, D).
pub const XML_MENTION_DELTAS: [&str; 4] = [
    "<think>I could write <tool_",
    "call> here.</think>I'll write a `<tool_call>` block.\n<tool",
    "_call>\n<get_weather>\n<city>Paris</city>\n",
    "</get_weather>\n</tool_call>",
];

/// A call under `xml` that breaks before the tool's name: JSON where the tool's tag is due.
pub const XML_UNREAD_DELTAS: [&str; 2] = ["Checking.\n<tool_call>\n{\"name\": \"get_wea", "ther\"}\n</tool_call>"];

/// The same under `json`: two objects in one fenced block, of which the first is a whole
/// call (issue 23, A).
pub const JSON_MALFORMED_DELTAS: [&str; 3] = [
    "Let me check.\n```tool_call\n{\"tool\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n",
    "{\"tool\": \"get_weather\", \"arguments\": {\"ci",
    "ty\": \"Rome\"}}\n```",
];

/// A model without native tools calling `get_weather` through the `xml` protocol: plain
/// text deltas, cut inside the wrapper, a tag and a value.
pub const XML_CALL_DELTAS: [&str; 5] = [
    "Let me check the weather.\n<tool",
    "_call>\n<get_weather>\n<ci",
    "ty>Pa",
    "ris</city>\n</get_wea",
    "ther>\n</tool_call>",
];

/// The same call through the `json` protocol: cut inside the fence, a key and a value.
pub const JSON_CALL_DELTAS: [&str; 4] = [
    "Let me check the weather.\n```tool",
    "_call\n{\"tool\": \"get_wea",
    "ther\", \"arguments\": {\"city\": \"Pa",
    "ris\"}}\n```",
];

/// The same call through the `hermes` protocol, laid out as the Hermes/Qwen templates
/// write it: cut inside the opening tag, the name, a value and the closing tag.
pub const HERMES_CALL_DELTAS: [&str; 5] = [
    "Let me check the weather.\n<tool",
    "_call>\n{\"name\": \"get_wea",
    "ther\", \"arguments\": {\"city\": \"Pa",
    "ris\"}}\n</tool_",
    "call>",
];

/// A two-step tool turn on a model whose replies are plain text: the first reply's text
/// calls `get_weather` in `protocol`'s format (split into `deltas`), the second answers.
/// The transcript must show the same `tool_use` events, run and result as a native call.
fn text_protocol_loop(
    name: &'static str,
    protocol: ToolProtocol,
    deltas: &[&str],
    tools: BTreeMap<String, ToolScript>,
    final_answer: &[String],
) -> NamedScenario {
    NamedScenario {
        name,
        scenario: Scenario {
            replies: vec![paced(&text_events(deltas), GAP), paced(final_answer, GAP)],
            tools,
            cancel_at: None,
        },
        options: Options { tool_protocol: Some(protocol), ..Options::default() },
        stall_timeout: Duration::from_secs(2),
    }
}
