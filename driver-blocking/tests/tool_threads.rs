//! Tool threads are bounded for the whole process: a model asking for hundreds of
//! parallel calls whose handlers hang (ignoring their cancel token) never costs more than
//! MAX_RUNNING_TOOLS threads per call at once nor MAX_TOOL_THREADS in all, and each call
//! still ends by its tool timeout. In a binary of its own: the pool is per process.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, clocks

mod proc;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use omni_blocking::GenerateEvent;
use omni_blocking::{live_tool_threads, Client, Options, Tool, ToolOutput, MAX_RUNNING_TOOLS, MAX_TOOL_THREADS};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use serde_json::json;

/// Parallel calls the model asks for in each response.
const CALLS: usize = 300;
/// The tool timeout of every call.
const TOOL_TIMEOUT: Duration = Duration::from_millis(300);

/// Threads of this process named `omni-tool`.
fn tool_threads_in_proc() -> usize {
    proc::threads_named("omni-tool")
}

/// Handlers that block until released, ignoring their cancel token (a hung handler).
#[derive(Default)]
struct Gate {
    released: Mutex<bool>,
    wake: Condvar,
    inside: AtomicUsize,
    most_inside: AtomicUsize,
}

impl Gate {
    fn hang(&self) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_inside.fetch_max(now, Ordering::SeqCst);
        let mut released = self.released.lock().expect("a tool thread panicked holding the gate");
        while !*released {
            released = self.wake.wait(released).expect("a tool thread panicked holding the gate");
        }
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    fn release(&self) {
        *self.released.lock().expect("a tool thread panicked holding the gate") = true;
        self.wake.notify_all();
    }
}

#[test]
fn hanging_parallel_tool_calls_cost_bounded_threads_and_end_by_their_timeout() {
    let gate = Arc::new(Gate::default());
    let ids: Vec<String> = (0..CALLS).map(|i| format!("toolu_{i}")).collect();
    let calls: Vec<(&str, &str, &str)> = ids.iter().map(|id| (id.as_str(), "hang", "{}")).collect();
    // Enough calls that hung handlers fill MAX_TOOL_THREADS, and one more after that.
    let rounds = MAX_TOOL_THREADS / MAX_RUNNING_TOOLS + 1;
    let mut replies = Vec::new();
    for _ in 0..rounds {
        replies.push(paced(&tool_events(&calls), Duration::ZERO));
        replies.push(paced(&text_events(&["done"]), Duration::ZERO));
    }
    let server = ReplayServer::start(replies).expect("server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client");
    let (handler_gate, entered) = (gate.clone(), Arc::new(AtomicUsize::new(0)));
    let counter = entered.clone();
    let tool = Tool::new("hang", "hangs", json!({"type": "object"}), move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        handler_gate.hang();
        Ok(ToolOutput::text("late"))
    });
    let options = Options { tool_timeout: Some(TOOL_TIMEOUT), ..Options::default() };
    for round in 1..=rounds {
        let started = Instant::now();
        let before = entered.load(Ordering::SeqCst);
        let mut stream = client
            .call(scenarios::model(), "hang")
            .tool(tool.clone())
            .options(options.clone())
            .stream()
            .expect("stream");
        let (mut most_in_proc, mut most_in_pool) = (0, 0);
        let mut timed_out = 0;
        for event in stream.by_ref() {
            most_in_pool = most_in_pool.max(live_tool_threads());
            if let GenerateEvent::ToolResult { result, .. } = &event {
                // Reading /proc costs a file per thread: once, when the runs time out.
                if timed_out == 0 {
                    most_in_proc = tool_threads_in_proc();
                }
                timed_out += usize::from(result.is_error);
            }
        }
        let response = stream.response().expect("the call ends");
        assert_eq!(response.text(), "done", "round {round}: the model answered the timed-out calls");
        assert_eq!(timed_out, CALLS, "round {round}: every hung call ended as a timeout result");
        let elapsed = started.elapsed();
        assert!(
            elapsed < TOOL_TIMEOUT + Duration::from_secs(5),
            "round {round}: ended by the tool timeout ({elapsed:?})"
        );
        let started_now = entered.load(Ordering::SeqCst) - before;
        let expected = MAX_RUNNING_TOOLS.min(MAX_TOOL_THREADS - (round - 1) * MAX_RUNNING_TOOLS);
        assert_eq!(started_now, expected, "round {round}: handlers started (the rest were dropped unrun)");
        assert!(most_in_proc <= MAX_TOOL_THREADS, "round {round}: {most_in_proc} tool threads");
        assert!(most_in_pool <= MAX_TOOL_THREADS, "round {round}: {most_in_pool} tool threads");
        assert_eq!(
            tool_threads_in_proc(),
            gate.inside.load(Ordering::SeqCst),
            "round {round}: one thread per hung handler"
        );
        assert_eq!(live_tool_threads(), gate.inside.load(Ordering::SeqCst));
    }
    assert_eq!(gate.most_inside.load(Ordering::SeqCst), MAX_TOOL_THREADS, "hung handlers filled the pool, no more");
    // Released, the hung handlers return and their threads end (no queued run is left).
    gate.release();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tool_threads_in_proc() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(tool_threads_in_proc(), 0, "every tool thread ended");
    assert_eq!(live_tool_threads(), 0);
}
