//! Tests of the shell on a runtime made of plain threads, as the [`Runtime`] docs describe
//! it (omni-blocking's shape): each task a thread running `block_on`, stopped through a
//! channel its future races against; each sleep a timer thread. They show that the
//! traits fit such a runtime, and check the executor's decisions that no driver makes:
//! a panicking tool, a tool without a handler, a cancelled request.
// This file is a Runtime (made of threads), so it spawns and sleeps itself; the shell's own
// code does neither (shell/clippy.toml).
#![allow(clippy::disallowed_methods)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_protocol::generate::{Effect, RequestId, ToolOutcome, ToolRunId};
use omni_protocol::tool::ToolError;
use omni_protocol::transport::ProxyRules;
use omni_protocol::{
    dialect::{HttpRequest, Method},
    ToolUse,
};
use serde_json::json;

use crate::executor::{Executor, Report};
use crate::runtime::{ResponseSink, Runtime, Task, Transport};
use crate::{handlers_by_name, AsyncTool, Client, Driver, Error};

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Threads;

/// Dropping it tells the thread's future to stop; detaching it does not.
pub(crate) struct ThreadTask(Option<Sender<()>>);

impl Runtime for Threads {
    type Task = ThreadTask;

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, future: F) -> Result<ThreadTask, Error> {
        let (stop, stopped): (Sender<()>, Receiver<()>) = async_channel::bounded(1);
        // Only a stop sent stops the future: a detached task's sender is dropped unsent.
        let stop_signal = async move {
            if stopped.recv().await.is_err() {
                future::pending::<()>().await;
            }
        };
        std::thread::Builder::new()
            .spawn(move || future::block_on(future::or(future, stop_signal)))
            .map_err(|e| Error::Setup(crate::SetupError::Thread(e)))?;
        Ok(ThreadTask(Some(stop)))
    }

    fn run_blocking(&self, work: crate::runtime::BlockingWork) -> impl Future<Output = ()> + Send + 'static {
        crate::runtime::run_on_a_thread(work)
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        let (ring, rung) = async_channel::bounded::<()>(1);
        std::thread::spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            let _ = ring.try_send(());
        });
        async move {
            let _ = rung.recv().await;
        }
    }
}

impl Task for ThreadTask {
    fn detach(mut self) {
        self.0.take();
    }
}

impl Drop for ThreadTask {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            let _ = stop.try_send(());
        }
    }
}

/// Answers every request with one Anthropic SSE reply, or holds it open forever after
/// the head (every request when `hold`, or one whose body asks for it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Canned {
    hold: bool,
    /// Requests whose future was dropped before it finished.
    stopped: Arc<AtomicUsize>,
}

const REPLY: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",",
    "\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,",
    "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,",
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,",
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"On threads.\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},",
    "\"usage\":{\"output_tokens\":2}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

/// A prompt that makes [`Canned`] hold the reply open.
const HOLD: &str = "hold the reply";

/// Counts the requests stopped before their end.
struct Stopped(Arc<AtomicUsize>, bool);

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Transport for Canned {
    fn send(&self, request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
        let asked = request.body.windows(HOLD.len()).any(|w| w == HOLD.as_bytes());
        let (hold, stopped) = (self.hold || asked, self.stopped.clone());
        async move {
            let mut guard = Stopped(stopped, false);
            let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
            if !sink.head(200, headers).await {
                return;
            }
            // Held open after the first event (`message_start`): the head goes with it.
            let (first, rest) = REPLY.split_at(REPLY.find("\n\n").map_or(0, |at| at + 2));
            if !sink.body(first.as_bytes().to_vec()).await {
                return;
            }
            if hold {
                future::pending::<()>().await;
            }
            if sink.body(rest.as_bytes().to_vec()).await {
                sink.end().await;
            }
            guard.1 = true;
        }
    }
}

impl Driver for Threads {
    type Runtime = Self;
    type Transport = Canned;

    fn transport(_roots: &[Vec<u8>], _proxies: ProxyRules) -> Result<Canned, Error> {
        Ok(Canned::default())
    }
}

fn client() -> Client<Threads> {
    Client::<Threads>::builder().api_key("anthropic", "sk-test").no_proxy().build().expect("client")
}

/// `future`'s output, or a failed test after 5 s rather than a hung one.
pub(crate) fn within<T: Send>(future: impl Future<Output = T> + Send) -> T {
    let timeout = async {
        Threads.sleep_until(Instant::now() + Duration::from_secs(5)).await;
        panic!("no answer within 5 s");
    };
    future::block_on(future::or(future, timeout))
}

#[test]
fn a_call_runs_to_its_end_on_a_thread_runtime() {
    let stream = client().stream_text("anthropic:claude-sonnet-4-5", "hi").expect("started");
    let response = within(stream.response()).expect("a response");
    assert_eq!(response.text(), "On threads.");
}

#[test]
fn a_cancel_handle_from_another_thread_cancels_the_call_and_its_stream_says_so() {
    let stream = client().stream_text("anthropic:claude-sonnet-4-5", HOLD).expect("started");
    let handle = stream.cancel_handle();
    let canceller = std::thread::spawn(move || handle.cancel());
    let response = within(stream.response()).expect("a cancelled call still finishes");
    assert_eq!(response.stop_reason, Some(omni_protocol::StopReason::Cancelled));
    canceller.join().expect("the canceller ran");
}

fn run(id: u64, name: &str) -> Effect {
    let call =
        ToolUse { invalid: None, id: format!("call_{id}"), name: name.into(), input: json!({}), signature: None };
    Effect::RunTool { id: ToolRunId(id), call }
}

#[test]
fn a_panicking_tool_and_a_tool_without_handler_are_answered_not_lost() {
    let panics = AsyncTool::new("boom", "panics", json!({"type": "object"}), |_| async {
        if true {
            panic!("tool exploded");
        }
        Ok::<_, ToolError>("never")
    });
    let mut executor = Executor::new(Threads, Canned::default(), handlers_by_name(&[panics]));
    executor.execute(run(1, "boom"));
    executor.execute(run(2, "missing"));
    let mut outcomes: Vec<(ToolRunId, ToolOutcome)> = (0..2)
        .map(|_| match within(executor.next_report()) {
            Report::Tool { id, outcome } => (id, outcome),
            other => panic!("not a tool report: {other:?}"),
        })
        .collect();
    outcomes.sort_by_key(|(id, _)| *id);
    assert_eq!(outcomes[0], (ToolRunId(1), ToolOutcome::Panicked("tool exploded".into())));
    assert_eq!(outcomes[1], (ToolRunId(2), ToolOutcome::Err("tool \"missing\" has no handler".into())));
}

#[test]
fn a_cancelled_request_is_stopped_at_its_next_await() {
    let transport = Canned { hold: true, ..Canned::default() };
    let mut executor = Executor::new(Threads, transport.clone(), Default::default());
    let request =
        HttpRequest { method: Method::Post, url: "http://test.invalid/".into(), headers: vec![], body: vec![] };
    executor.execute(Effect::SendRequest { id: RequestId(7), request });
    assert!(matches!(within(executor.next_report()), Report::Head { id: RequestId(7), status: 200, .. }));
    executor.execute(Effect::CancelRequest { id: RequestId(7) });
    let deadline = Instant::now() + Duration::from_secs(5);
    while transport.stopped.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the request still runs 5 s after its cancel");
        std::thread::sleep(Duration::from_millis(5));
    }
}
