//! Tools: a name, a description, an input schema and (usually) a plain closure run on
//! its own thread, with panics caught.
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

use omni_core::data::schema::Validator;
use omni_core::data::tool::{panic_message, typed_input, ToolError, ToolOutput};
use omni_core::ToolSpec;
use omni_shell::AsyncTool;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool_pool;

type Handler = Arc<dyn Fn(Value) -> Result<ToolOutput, ToolError> + Send + Sync>;

/// A tool the model may call.
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
#[derive(Clone)]
pub struct Tool(AsyncTool);

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Tool {
    /// A tool whose handler gets the call's input as JSON and returns anything that
    /// becomes a [`ToolOutput`] (a `String`, a `&str`, a JSON `Value`, a `ToolOutput`).
    pub fn new<O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: impl Fn(Value) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        let handler: Handler = Arc::new(move |input| handler(input).map(Into::into));
        Self(AsyncTool::new(name, description, input_schema, pooled(handler)))
    }

    /// A tool whose handler gets the input decoded as `T`; input that does not decode
    /// becomes an error result for the model naming the problem.
    pub fn typed<T: DeserializeOwned + 'static, O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: impl Fn(T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, description, input_schema, move |input| handler(typed_input::<T>(input)?))
    }

    /// A tool whose input schema is `T`'s ([`omni_core::data::schema::for_type`]) and whose
    /// handler gets a `T`. The model's input is checked against the schema before the
    /// handler runs; what fails goes back to the model as an error result.
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
    #[cfg(feature = "schemars")]
    pub fn from_type<T: DeserializeOwned + omni_core::schemars::JsonSchema + 'static, O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        Self::typed(name, description, omni_core::data::schema::for_type::<T>(), handler)
    }

    /// [`Tool::from_type`] for a handler that needs state (a store, a client): the tool
    /// keeps `state` and lends it to every call. Build the description from the state
    /// first when it should tell the model what the state holds.
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
    #[cfg(feature = "schemars")]
    pub fn from_type_with_state<S, T, O>(
        state: S,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(&S, T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self
    where
        S: Send + Sync + 'static,
        T: DeserializeOwned + omni_core::schemars::JsonSchema + 'static,
        O: Into<ToolOutput>,
    {
        Self::from_type(name, description, move |input: T| handler(&state, input))
    }

    /// A tool checked by `validator` instead of a schema: its
    /// [`schema`](Validator::schema) is what the model is told, and its
    /// [`validate`](Validator::validate) decides (and may normalise) the input before
    /// the handler gets it, decoded as `T` (`serde_json::Value` for the raw input). A
    /// rejection goes back to the model as an error result naming the problem.
    pub fn with_validator<T: DeserializeOwned + 'static, O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        validator: Arc<dyn Validator>,
        handler: impl Fn(T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        let handler: Handler = Arc::new(move |input| handler(typed_input::<T>(input)?).map(Into::into));
        Self(AsyncTool::with_validator::<Value, _, _, _>(name, description, validator, pooled(handler)))
    }

    /// A tool without a handler: when the model calls it, the loop stops and the calls
    /// are returned to the caller in the response.
    pub fn schema_only(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        Self(AsyncTool::schema_only(name, description, input_schema))
    }

    /// Time limit for one call of this tool, overriding the `tool_timeout` option.
    pub fn timeout(self, limit: Duration) -> Self {
        Self(self.0.timeout(limit))
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// Name, description and input schema.
    pub fn spec(&self) -> &ToolSpec {
        self.0.spec()
    }

    /// The tool as the shell's executor runs it: its handler a future over a pool run.
    pub(crate) fn as_async(&self) -> &AsyncTool {
        &self.0
    }
}

impl From<Tool> for AsyncTool {
    fn from(tool: Tool) -> Self {
        tool.0
    }
}

/// A blocking handler as the shell's executor runs it: a future that submits the run to
/// the process's tool pool and awaits its answer. Dropped before the answer (the run was
/// cancelled or timed out, or the call ended), it trips the run's [`CancelToken`]: a
/// queued run never starts, a running one no longer counts against the pool's limit.
fn pooled(handler: Handler) -> impl Fn(Value) -> RunFuture + Send + Sync + 'static {
    move |input| {
        let (done, answer) = async_channel::bounded(1);
        let token = CancelToken::default();
        let run = Run { answer, token: token.clone() };
        // Tripped at once when the run's task is stopped, on the thread that stops it (the
        // loop's): the places a batch of cancels frees (all of one poll of the loop) are
        // given out once the whole batch is done (see `tool_pool::hold`).
        let hook = token.clone();
        crate::runtime::on_stop(move || give_up(&hook));
        spawn(handler.clone(), input, token, move |result| {
            // The run's future may be gone (cancelled): nobody needs the answer.
            let _ = done.send_blocking(result);
        });
        Box::pin(async move { run.finish().await })
    }
}

/// What a pool run answers: the handler's result, or the message of its panic.
type Answer = Result<Result<ToolOutput, ToolError>, String>;
type RunFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<ToolOutput, ToolError>> + Send>>;

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
    fn drop(&mut self) {
        if !self.token.is_cancelled() && self.answer.is_empty() && self.answer.sender_count() > 0 {
            give_up(&self.token);
        }
    }
}

/// Cancels a run whose answer is no longer wanted. The place it frees in the pool is given
/// out once the poll that cancels it ends, after the other cancels of the same batch.
fn give_up(token: &CancelToken) {
    tool_pool::hold();
    token.cancel();
    crate::runtime::after_poll(tool_pool::release);
}

/// Runs `handler` on a tool thread of the process's bounded pool ([`crate::tool_pool`]:
/// queued while the pool is full, dropped unrun if `token` is cancelled before it
/// starts); `done` gets its result or the message of its panic. `token` is the run's
/// [`CancelToken::current`].
fn spawn(handler: Handler, input: Value, token: CancelToken, done: impl FnOnce(Answer) + Send + 'static) {
    let run_token = token.clone();
    let work = move || {
        CURRENT.with(|current| *current.borrow_mut() = Some(run_token));
        let result = catch_unwind(AssertUnwindSafe(|| handler(input)));
        // A pool thread runs the next job with its own token.
        CURRENT.with(|current| *current.borrow_mut() = None);
        done(result.map_err(|payload| panic_message(payload.as_ref())));
    };
    tool_pool::submit(tool_pool::Job { token, work: Box::new(work) });
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use futures_lite::future::block_on;
    use omni_core::data::tool::outcome;
    use omni_core::machines::generate::ToolOutcome;

    use super::*;
    use serde_json::json;

    /// Runs the tool as the shell's executor does: its async handler awaited, a panic caught.
    fn run(tool: &Tool, input: Value) -> ToolOutcome {
        let handler = tool.as_async().handler().expect("a handler").clone();
        match catch_unwind(AssertUnwindSafe(|| block_on(handler(input)))) {
            Ok(result) => outcome(result),
            Err(payload) => ToolOutcome::Panicked(panic_message(payload.as_ref())),
        }
    }

    #[test]
    fn handlers_run_on_pool_threads_and_panics_become_outcomes() {
        let ok = Tool::new("ok", "", json!({}), |input| Ok(ToolOutput::json(&input)));
        assert_eq!(run(&ok, json!({"a": 1})), ToolOutcome::Ok(ToolOutput::text(r#"{"a":1}"#).0));
        let boom = Tool::new("boom", "", json!({}), |_| -> Result<String, ToolError> { panic!("kaboom") });
        assert_eq!(run(&boom, json!({})), ToolOutcome::Panicked("kaboom".into()));
    }

    #[test]
    fn typed_input_that_does_not_decode_is_an_error_for_the_model() {
        #[derive(serde::Deserialize)]
        struct City {
            city: String,
        }
        let tool = Tool::typed("w", "", json!({}), |c: City| Ok(c.city));
        assert_eq!(run(&tool, json!({"city": "Paris"})), ToolOutcome::Ok(ToolOutput::text("Paris").0));
        let ToolOutcome::Err(message) = run(&tool, json!({"town": "Paris"})) else { panic!("an error") };
        assert!(message.contains("city"), "{message}");
    }

    #[test]
    fn a_dropped_run_wakes_its_sleeping_handler() {
        let (tx, rx) = mpsc::sync_channel(1);
        let (entered, inside) = mpsc::sync_channel(1);
        let tool = Tool::new("hang", "", json!({}), move |_| {
            let _ = entered.send(());
            let cancelled = CancelToken::current().sleep(Duration::from_secs(600));
            let _ = tx.send(cancelled);
            Ok(ToolOutput::text("late"))
        });
        let handler = tool.as_async().handler().expect("a handler").clone();
        let run = handler(json!({}));
        // Once the pool runs it, give up on it as the executor does on a cancel.
        inside.recv_timeout(Duration::from_secs(5)).expect("the pool runs the handler");
        drop(run);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true), "the handler saw its token tripped");
        assert!(!CancelToken::current().sleep(Duration::from_millis(1)), "outside a run nothing cancels");
    }
}
