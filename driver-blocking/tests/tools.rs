//! omni-blocking's tools as the shell's executor runs them: a handler on the pool, its
//! panic caught, typed input decoded, a dropped run's token tripped.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, clocks

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use futures_lite::future::block_on;
use omni_blocking::protocol::generate::ToolOutcome;
use omni_blocking::protocol::tool::{outcome, panic_message};
use omni_blocking::{CancelToken, Tool, ToolError, ToolOutput};
use omni_shell::AsyncTool;
use serde_json::{json, Value};

/// Runs the tool as the shell's executor does: its async handler awaited, a panic caught.
fn run(tool: &Tool, input: Value) -> ToolOutcome {
    let handler = AsyncTool::from(tool.clone()).handler().expect("a handler").clone();
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
    let handler = AsyncTool::from(tool.clone()).handler().expect("a handler").clone();
    let run = handler(json!({}));
    // Once the pool runs it, give up on it as the executor does on a cancel.
    inside.recv_timeout(Duration::from_secs(5)).expect("the pool runs the handler");
    drop(run);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true), "the handler saw its token tripped");
    assert!(!CancelToken::current().sleep(Duration::from_millis(1)), "outside a run nothing cancels");
}
