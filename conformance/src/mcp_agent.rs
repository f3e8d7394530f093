//! An agent's turn with an MCP server's tools, against the mock provider: the model calls
//! a tool that changes the server's list, the next step offers the new tool and the model
//! calls it; and an approval gate (`handle_tool_use`) that rejects an MCP tool keeps it
//! from ever reaching the server. Written for the async handles (omni-tokio, omni-smol)
//! and for omni-blocking's.

use omni_protocol::agent::{AgentCallbacks, AgentEvent, ToolDecision};
use omni_protocol::{Dialect, ToolUse};
use omni_shell::Driver;
use omni_testkit::{MockProvider, Turn};
use serde_json::{json, Value};

/// The tool that changes the list, and the one it adds, as the model names them.
const ADD: &str = "fake__add_tool";
const FRESH: &str = "fake__fresh";

/// A mock provider answering: call `add_tool`, then call the new tool, then "done".
pub fn scripted_mock() -> MockProvider {
    let mock = MockProvider::start(Dialect::AnthropicMessages).expect("the mock provider");
    mock.push(Turn::tool_call(ADD, json!({"name": "fresh"})));
    mock.push(Turn::tool_call(FRESH, json!({})));
    mock.push(Turn::text("done"));
    mock
}

/// The names of the tools a request offered.
fn offered(body: &Value) -> Vec<String> {
    body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str().map(String::from)).collect()
}

/// The mock's requests show the list followed between steps and the new tool's answer.
pub fn check_requests(mock: &MockProvider) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "three steps");
    let first = requests[0].json().expect("JSON");
    let second = requests[1].json().expect("JSON");
    let third = requests[2].json().expect("JSON");
    assert!(offered(&first).contains(&ADD.to_string()) && !offered(&first).contains(&FRESH.to_string()));
    assert!(offered(&second).contains(&FRESH.to_string()), "the next step offers the new tool: {:?}", offered(&second));
    assert!(third.to_string().contains("I am fresh"), "the new tool ran on the server: {third}");
}

/// Rejects the MCP tool that would change the server's list.
#[derive(Debug, Default)]
pub struct RejectAddTool;

impl AgentCallbacks for RejectAddTool {
    fn handle_tool_use(&mut self, tool_use: &ToolUse) -> ToolDecision {
        if tool_use.name == ADD {
            ToolDecision::Reject("not approved".into())
        } else {
            ToolDecision::Execute
        }
    }
}

/// A mock for the approval check: the model calls `add_tool`, then says "ok".
pub fn approval_mock() -> MockProvider {
    let mock = MockProvider::start(Dialect::AnthropicMessages).expect("the mock provider");
    mock.push(Turn::tool_call(ADD, json!({"name": "never"})));
    mock.push(Turn::text("ok"));
    mock
}

/// The rejection went to the model, and the server never added the tool.
pub fn check_rejected(mock: &MockProvider, listed: &[String]) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].json().expect("JSON").to_string().contains("not approved"));
    assert!(!listed.iter().any(|n| n == "never"), "the rejected call never reached the server: {listed:?}");
}

/// Both checks through an async driver's client (built by `client` for a mock's provider).
pub async fn async_agent<D: Driver>(make_client: impl Fn(&MockProvider) -> omni_shell::Client<D>, fake: &str) {
    let mock = scripted_mock();
    let client = make_client(&mock);
    let server =
        client.mcp_stdio("fake", fake).arg("normal").prefix_tools(true).connect().await.expect("the fake server");
    let agent = client.agent(mock.model()).mcp(&server).start().expect("agent");
    let (_, mut events) = agent.subscribe().await.expect("subscribed");
    agent.prompt("go").await.expect("prompted");
    while let Some(event) = events.next_event().await {
        if matches!(event, AgentEvent::Turn { .. }) {
            break;
        }
    }
    check_requests(&mock);

    let mock = approval_mock();
    let client = make_client(&mock);
    let agent = client.agent(mock.model()).mcp(&server).callbacks(RejectAddTool).start().expect("agent");
    let (_, mut events) = agent.subscribe().await.expect("subscribed");
    agent.prompt("go").await.expect("prompted");
    while let Some(event) = events.next_event().await {
        if matches!(event, AgentEvent::Turn { .. }) {
            break;
        }
    }
    server.refresh_tools().await.expect("listed again");
    let listed: Vec<String> = server.list_tools().iter().map(|t| t.name.clone()).collect();
    check_rejected(&mock, &listed);
    server.close().await;

    // A session follows its servers' lists as an agent does (a server of its own: the
    // first one has `fresh` already).
    let mock = scripted_mock();
    let client = make_client(&mock);
    let server =
        client.mcp_stdio("fake", fake).arg("normal").prefix_tools(true).connect().await.expect("the fake server");
    let store = std::sync::Arc::new(omni_store::MemoryStore::new());
    let session = client.agent(mock.model()).mcp(&server).session(store).create().await.expect("session");
    let (_, mut events) = session.subscribe().await.expect("subscribed");
    session.prompt("go").await.expect("prompted");
    while let Some(event) = events.next_event().await {
        if matches!(event, omni_protocol::session::SessionEvent::Agent(AgentEvent::Turn { .. })) {
            break;
        }
    }
    check_requests(&mock);
    server.close().await;
}
