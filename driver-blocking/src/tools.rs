//! Tools: omni-shell's [`SyncTool`] (a name, a description, an input schema and usually a
//! plain closure), its handlers run on [`ToolPool`] with panics caught.
//!
//! Handlers run on a bounded pool of threads shared by the process ([`crate::tool_pool`]).
//! A Rust thread cannot be killed. When the core cancels a run (its tool timeout, or
//! the caller cancelling the call) the driver stops waiting for it, ignores its late
//! answer, and trips the run's [`CancelToken`]; a handler that may run long should
//! check [`CancelToken::current`] or sleep through [`CancelToken::sleep`] so its thread
//! ends too (a handler that never returns keeps one of the pool's threads for good).

use std::cell::RefCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use omni_protocol::tool::{panic_message, ToolError, ToolOutput};
use omni_shell::{RunSync, SyncHandler, SyncTool, ToolFuture};
use serde_json::Value;

use crate::tool_pool;

/// A tool the model may call: a name, a description, an input schema and (usually) a
/// plain closure, run on the process's pool of tool threads ([`ToolPool`]). Its
/// constructors are omni-shell's [`SyncTool`]'s.
///
/// ```
/// use omni_blocking::{Tool, ToolOutput};
/// use serde_json::json;
///
/// let weather = Tool::new(
///     "get_weather",
///     "The weather in a city",
///     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
///     |input| Ok(ToolOutput::text(format!("sunny in {}", input["city"]))),
/// );
/// assert_eq!(weather.name(), "get_weather");
/// ```
///
/// With the `schemars` feature, `Tool::from_type` takes the schema from a type, and the
/// handler gets the input decoded:
///
/// ```
/// use omni_blocking::{Tool, ToolError};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather {
///     /// City name.
///     city: String,
/// }
///
/// let tool = Tool::from_type("get_weather", "The weather in a city", |w: Weather| {
///     Ok::<_, ToolError>(format!("sunny in {}", w.city))
/// });
/// assert_eq!(tool.spec().input_schema["required"], serde_json::json!(["city"]));
/// ```
///
/// and `Tool::from_type_with_state` lends state to every call:
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use omni_blocking::{Tool, ToolError};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Lookup {
///     city: String,
/// }
///
/// let populations = Arc::new(BTreeMap::from([("Paris".to_string(), 2_102_650u64)]));
/// let known: Vec<&str> = populations.keys().map(String::as_str).collect();
/// let description = format!("The population of a city. Known cities: {}.", known.join(", "));
/// let tool = Tool::from_type_with_state(
///     populations.clone(),
///     "city_population",
///     description,
///     |populations: &Arc<BTreeMap<String, u64>>, query: Lookup| {
///         populations.get(&query.city).map(u64::to_string).ok_or(ToolError::from("unknown city"))
///     },
/// );
/// assert!(tool.spec().description.ends_with("Known cities: Paris."));
/// ```
pub type Tool = SyncTool<ToolPool>;

/// The process's bounded pool of tool threads ([`MAX_RUNNING_TOOLS`](crate::MAX_RUNNING_TOOLS)
/// at once), as the shell's runner of [`Tool`] handlers. A run's future submits the handler to the pool and awaits its
/// answer. Dropped before the answer (the run was cancelled or timed out, or the call
/// ended; the shell's executor drops it on the loop's thread, inside its poll), it trips
/// the run's [`CancelToken`]: a queued run never starts, a running one no longer counts
/// against the pool's limit, and the places a batch of cancels frees (all of one poll of
/// the loop) are given out once the whole batch is done (see `tool_pool::hold`).
#[derive(Debug)]
pub struct ToolPool;

impl RunSync for ToolPool {
    fn run(handler: &SyncHandler, input: Value) -> ToolFuture {
        let (done, answer) = async_channel::bounded(1);
        let token = CancelToken::default();
        let run = Run { answer, token: token.clone() };
        let (handler, run_token) = (handler.clone(), token.clone());
        let work = move || {
            CURRENT.with(|current| *current.borrow_mut() = Some(run_token));
            let result = catch_unwind(AssertUnwindSafe(|| handler(input)));
            // A pool thread runs the next job with its own token.
            CURRENT.with(|current| *current.borrow_mut() = None);
            // The run's future may be gone (cancelled): nobody needs the answer.
            let _ = done.send_blocking(result.map_err(|payload| panic_message(payload.as_ref())));
        };
        // Queued while the pool is full, dropped unrun if `token` is cancelled before it starts.
        tool_pool::submit(tool_pool::Job { token, work: Box::new(work) });
        Box::pin(async move { run.finish().await })
    }
}

/// What a pool run answers: the handler's result, or the message of its panic.
type Answer = Result<Result<ToolOutput, ToolError>, String>;

/// A submitted run, awaited by the shell's executor.
struct Run {
    answer: async_channel::Receiver<Answer>,
    token: CancelToken,
}

impl Run {
    async fn finish(&self) -> Result<ToolOutput, ToolError> {
        match self.answer.recv().await {
            Ok(Ok(result)) => result,
            // Raised again here, so the shell reports it as a panic like any handler's.
            Ok(Err(message)) => std::panic::resume_unwind(Box::new(message)),
            Err(_) => Err(ToolError::new("the tool run ended without an answer")),
        }
    }
}

impl Drop for Run {
    /// Gives up a run whose answer is no longer wanted. The place it frees in the pool is
    /// given out once the poll that drops it ends, after the other cancels of the same batch.
    fn drop(&mut self) {
        if !self.token.is_cancelled() && self.answer.is_empty() && self.answer.sender_count() > 0 {
            tool_pool::hold();
            self.token.cancel();
            crate::runtime::after_poll(tool_pool::release);
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

/// Tells a tool handler that its run was cancelled (timed out, or the call was
/// cancelled or dropped), so it can stop early.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<(Mutex<bool>, Condvar)>);

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CancelToken").field(&self.is_cancelled()).finish()
    }
}

impl CancelToken {
    /// The token of the tool run on this thread; outside a tool handler, a token that
    /// is never cancelled. Clone it into threads the handler starts.
    pub fn current() -> Self {
        CURRENT.with(|current| current.borrow().clone()).unwrap_or_default()
    }

    /// True once the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps for `duration` or until the run is cancelled; true when cancelled.
    pub fn sleep(&self, duration: Duration) -> bool {
        let deadline = Instant::now() + duration;
        let (lock, wake) = &*self.0;
        let mut cancelled = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !*cancelled {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            cancelled = wake.wait_timeout(cancelled, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        *cancelled
    }

    /// Cancels the run: wakes every [`CancelToken::sleep`]. Its place in the tool pool is
    /// freed once the batch of cancels it is part of is over ([`tool_pool::hold`]): a
    /// queued run never starts, a running one no longer counts against the runs allowed
    /// at once.
    pub(crate) fn cancel(&self) {
        let (lock, wake) = &*self.0;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }
}
