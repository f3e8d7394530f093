//! The threads a call costs: its loop and its request, whatever the number of events (the
//! runtime gives every task a thread, never one per event), and none once the call is
//! over. In a binary of its own: it counts the process's threads.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, clocks

mod proc;

use std::time::{Duration, Instant};

use omni_blocking::Client;
use omni_blocking::GenerateEvent;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events};

/// Threads of this process named `omni-task`.
fn task_threads() -> usize {
    proc::threads_named("omni-task")
}

#[test]
fn a_call_costs_a_loop_thread_and_a_request_thread_however_many_events() {
    let words: Vec<String> = (0..2_000).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let server = ReplayServer::start(vec![paced(&text_events(&words), Duration::ZERO)]).expect("server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client");
    assert_eq!(task_threads(), 0);
    let mut stream = client.stream_text(scenarios::model(), "count").expect("stream");
    let (mut events, mut most) = (0, 0);
    for event in stream.by_ref() {
        events += 1;
        // Reading /proc costs a file per thread: every 50th event.
        if events % 50 == 0 {
            most = most.max(task_threads());
        }
        if matches!(event, GenerateEvent::Failed { .. }) {
            panic!("the call failed: {event:?}");
        }
    }
    assert!(events > 2_000, "{events} events");
    assert!((1..=2).contains(&most), "{most} task threads while {events} events went by");
    let response = stream.response().expect("the call finished");
    assert_eq!(response.text().split_whitespace().count(), 2_000);
    // Its threads end with it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while task_threads() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(task_threads(), 0, "every thread of the call ended");
}
