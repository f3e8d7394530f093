//! Tool runs cost no task thread: the shell's executor polls the runs' futures on the
//! call's loop, and the handlers run on the tool pool, in parallel. A model asking for 4
//! calls at once gets 4 handlers running together, while the threads named `omni-task`
//! stay at the loop's and a request's. In a binary of its own: it counts the process's
//! threads.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, clocks

mod proc;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use omni_blocking::GenerateEvent;
use omni_blocking::{Client, Options, Tool, ToolError, ToolOutput};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use serde_json::json;

/// Calls the model asks for at once.
const CALLS: usize = 4;

/// Where the handlers meet: each waits until all have started.
#[derive(Default)]
struct Meeting {
    /// Handlers started, and the most `omni-task` threads any of them saw once all had.
    state: Mutex<(usize, usize)>,
    all_in: Condvar,
}

impl Meeting {
    /// Waits (10 s at most) until `CALLS` handlers are inside; false if they never were,
    /// which only handlers run one after another would cause.
    fn arrive(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut state = self.state.lock().expect("a handler panicked holding the meeting");
        state.0 += 1;
        self.all_in.notify_all();
        while state.0 < CALLS {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.all_in.wait_timeout(state, left).expect("a handler panicked holding the meeting").0;
        }
        // Every run is in flight now: the moment a thread per run would show.
        state.1 = state.1.max(proc::threads_named("omni-task"));
        true
    }
}

#[test]
fn parallel_tool_runs_cost_no_task_thread_each() {
    let ids: Vec<String> = (0..CALLS).map(|i| format!("toolu_{i}")).collect();
    let calls: Vec<(&str, &str, &str)> = ids.iter().map(|id| (id.as_str(), "meet", "{}")).collect();
    let server = ReplayServer::start(vec![
        paced(&tool_events(&calls), Duration::ZERO),
        paced(&text_events(&["done"]), Duration::ZERO),
    ])
    .expect("server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client");
    let meeting = Arc::new(Meeting::default());
    let at_meeting = meeting.clone();
    let tool = Tool::new("meet", "waits for the others", json!({"type": "object"}), move |_| {
        if at_meeting.arrive() {
            Ok(ToolOutput::text("met"))
        } else {
            Err(ToolError::new("the other runs never started alongside this one"))
        }
    });
    let baseline = proc::threads_named("omni-task");
    let options = Options { tool_timeout: Some(Duration::from_secs(30)), ..Options::default() };
    let mut stream = client.call(scenarios::model(), "meet").tool(tool).options(options).stream().expect("stream");
    let mut results = Vec::new();
    for event in stream.by_ref() {
        if let GenerateEvent::ToolResult { result, .. } = event {
            results.push(result);
        }
    }
    let response = stream.response().expect("the call ends");
    assert_eq!(response.text(), "done");
    assert_eq!(results.len(), CALLS);
    assert!(results.iter().all(|result| !result.is_error), "every handler met the others: {results:?}");
    let (started, most) = *meeting.state.lock().expect("the meeting");
    assert_eq!(started, CALLS);
    // The call's loop, and at most the first step's request still returning.
    assert!(most - baseline <= 2, "{most} omni-task threads (baseline {baseline}) while {CALLS} tools ran");
}
