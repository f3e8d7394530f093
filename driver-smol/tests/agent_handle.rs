//! The smol agent handle's own behaviour: a chat turn through the public API, commands
//! refused with typed errors, and dropping the last handle stopping the agent's work.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omni_conformance::agent_sim::transcript_line;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use omni_conformance::sim::{BodyStep, Reply};
use omni_smol::{AgentError, AgentEvent, Client, Error, StateChange, Status, Tool, ToolError, TurnEnd};
use serde_json::json;

fn client(server: &ReplayServer) -> Client {
    Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client")
}

#[test]
fn a_chat_turn_through_the_handle() {
    smol::block_on(async {
        let server = ReplayServer::start(vec![paced(&text_events(&["Hello", " there."]), Duration::from_millis(5))])
            .expect("replay server");
        let agent = client(&server).agent(scenarios::model()).system("Be brief.").start().expect("agent starts");
        let (snapshot, mut events) = agent.subscribe().await.expect("subscribe");
        assert_eq!(snapshot.status, Status::Idle);
        assert!(snapshot.committed.is_empty());
        agent.prompt("Hi").await.expect("prompt accepted");
        let mut lines = Vec::new();
        while let Some(event) = events.next_event().await {
            lines.push(transcript_line(&event));
            if matches!(event, AgentEvent::Turn { .. }) {
                break;
            }
        }
        let skeleton: Vec<&str> = lines.iter().map(String::as_str).filter(|l| !l.starts_with("  ")).collect();
        assert_eq!(
            skeleton,
            [
                "status busy",
                r#"message user["Hi"]"#,
                r#"message assistant["Hello there."]"#,
                r#"step stop user=user["Hi"] assistant=assistant["Hello there."]"#,
                "status idle",
                "turn stop stop messages=2 usage=20/2",
            ]
        );
        assert_eq!(agent.messages().await.expect("state").len(), 2);
        assert!(matches!(agent.cancel().await, Err(Error::Agent(AgentError::Idle))));
        // Refused while idle-only rules hold: a history ending with a user message.
        let bad = StateChange::new().messages(vec![omni_smol::Message::user("dangling")]);
        assert!(matches!(agent.set_state(bad).await, Err(Error::Agent(AgentError::InvalidMessages(_)))));
        let state = agent.state().await.expect("state");
        assert_eq!(state.system.as_deref(), Some("Be brief."));
        assert_eq!(state.messages.len(), 2, "a refused change changes nothing");
    })
}

// The agents run on smol's global executor: the blocking disconnect check does not hold them up.
#[test]
fn dropping_the_last_handle_stops_the_request_and_the_tools() {
    smol::block_on(async {
        // First request: a tool call; the tool hangs. Second agent: a stream that hangs.
        let server = ReplayServer::start(vec![
            paced(&tool_events(&[("toolu_1", "slow", r#"{}"#)]), Duration::from_millis(1)),
            Reply::Http {
                status: 200,
                headers: vec![("content-type".into(), "text/event-stream".into())],
                // message_start, content_block_start, one delta, then nothing.
                body: vec![BodyStep::Bytes(text_events(&["Hel"])[..3].concat().into_bytes()), BodyStep::Hang],
            },
        ])
        .expect("replay server");
        let started = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let (s, f) = (started.clone(), finished.clone());
        let slow = Tool::new("slow", "Takes forever", json!({"type": "object"}), move |_| {
            let (s, f) = (s.clone(), f.clone());
            async move {
                s.store(true, Ordering::SeqCst);
                smol::Timer::after(Duration::from_secs(30)).await;
                f.store(true, Ordering::SeqCst);
                Ok::<_, ToolError>("done")
            }
        });
        let client = client(&server);
        let agent = client.agent(scenarios::model()).tool(slow).start().expect("agent starts");
        let (_, mut events) = agent.subscribe().await.expect("subscribe");
        let second = agent.clone();
        agent.prompt("Go").await.expect("prompt");
        while !started.load(Ordering::SeqCst) {
            smol::Timer::after(Duration::from_millis(5)).await;
        }
        drop(agent);
        assert_eq!(second.status().await.expect("a clone keeps it alive"), Status::Busy);
        drop(second);
        // The subscription ends without a turn: the agent stopped.
        let mut ended_with_turn = false;
        while let Some(event) = events.next_event().await {
            ended_with_turn |= matches!(event, AgentEvent::Turn { end: TurnEnd::Stop, .. });
        }

        assert!(!ended_with_turn);
        assert!(!events.lagged());
        smol::Timer::after(Duration::from_millis(50)).await;
        assert!(!finished.load(Ordering::SeqCst), "the tool run was aborted");

        // A request in flight is closed when the agent goes.
        let agent = client.agent(scenarios::model()).start().expect("agent starts");
        let (_, mut events) = agent.subscribe().await.expect("subscribe");
        agent.prompt("Hi").await.expect("prompt");
        while let Some(event) = events.next_event().await {
            if matches!(event, AgentEvent::Stream(_)) {
                break;
            }
        }
        drop(agent);
        assert!(server.wait_for_disconnects(1, Duration::from_secs(5)), "the connection was closed");
    })
}

#[test]
fn a_subscriber_that_falls_behind_is_dropped_and_told() {
    smol::block_on(async {
        let words: Vec<String> = (0..50).map(|i| format!("w{i} ")).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        // One event per chunk: a reader that keeps up never has more than a few queued.
        let server =
            ReplayServer::start(vec![paced(&text_events(&words), Duration::from_millis(1))]).expect("replay server");
        let agent = client(&server).agent(scenarios::model()).subscriber_capacity(32).start().expect("agent starts");
        let (_, slow) = agent.subscribe().await.expect("subscribe");
        let (_, mut reader) = agent.subscribe().await.expect("subscribe");
        agent.prompt("Count").await.expect("prompt");
        let mut seen = 0;
        while let Some(event) = reader.next_event().await {
            seen += 1;
            if matches!(event, AgentEvent::Turn { .. }) {
                break;
            }
            futures_lite::future::yield_now().await;
        }
        assert!(!reader.lagged(), "a reader that keeps up is not dropped ({seen} events)");
        assert!(slow.lagged(), "the subscriber that never read was dropped");
    })
}
