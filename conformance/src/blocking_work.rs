//! What every driver's [`Runtime::run_blocking`] must do, checked once for all: blocking
//! work holds up none of the runtime's tasks, and its panic comes back as an error. A
//! driver's test runs [`holds_up_no_task`] on an executor of a single thread, where work
//! run inline would hold up the timer beside it.
#![allow(clippy::disallowed_methods)] // a check of timing: it reads the clock

use std::time::{Duration, Instant};

use omni_shell::{off_executor, Runtime};

/// Runs 400 ms of blocking work beside a 50 ms timer of `runtime`: the timer fires on time
/// and the work's result arrives; then a panicking work's message comes back as an error.
pub async fn holds_up_no_task<R: Runtime>(runtime: &R) {
    let started = Instant::now();
    let work = off_executor(runtime, || {
        std::thread::sleep(Duration::from_millis(400));
        7
    });
    let timer = async {
        runtime.sleep_until(started + Duration::from_millis(50)).await;
        started.elapsed()
    };
    let (value, fired) = futures_lite::future::zip(work, timer).await;
    assert_eq!(value, Ok(7));
    assert!(fired < Duration::from_millis(300), "the timer waited for the work: {fired:?}");
    let panicked = off_executor(runtime, || -> u8 { panic!("the store broke") }).await;
    assert_eq!(panicked, Err("the store broke".to_string()));
}
