//! `sleep_until` for task threads without a timer thread.
//!
//! A task's thread runs one future and parks while it is pending, so it can as well
//! park until the earliest deadline its sleeps are waiting for: a [`Sleep`] polled by a
//! task thread's own loop (its waker is the thread's) notes its deadline in the thread's
//! [`NEXT_WAKE`], and the loop parks no longer than that (see [`block_on`]). Nothing
//! else is needed, so a call's watchdog sleeps without async-io's reactor thread, which
//! a fresh process would otherwise start for its first call's first deadline (issue 25:
//! a thread is a tenth of a one-shot call's whole cost).
//!
//! A sleep polled anywhere else (the application's thread, a `block_on` nested inside a
//! task's poll, another executor) is woken by an async-io timer, made then.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

thread_local! {
    /// The waker of the task loop running on this thread, while it polls.
    static LOOP_WAKER: RefCell<Option<Waker>> = const { RefCell::new(None) };
    /// The earliest deadline a sleep polled by this thread's loop waits for.
    static NEXT_WAKE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Wakes a parked task thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on this thread, parking while it is pending, at most until
/// the earliest deadline of the sleeps it polled. `after_poll` runs after every poll.
pub(crate) fn block_on<T>(future: impl Future<Output = T>, mut after_poll: impl FnMut()) -> T {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    // Nested loops (none today) put the outer one's back.
    let outer = LOOP_WAKER.with(|slot| slot.replace(Some(waker.clone())));
    let outer_wake = NEXT_WAKE.with(Cell::get);
    let output = loop {
        NEXT_WAKE.with(|next| next.set(None));
        let poll = future.as_mut().poll(&mut cx);
        after_poll();
        if let Poll::Ready(output) = poll {
            break output;
        }
        // A wake that came during the poll left the thread's token: the park returns at once.
        match NEXT_WAKE.with(Cell::get) {
            Some(deadline) => thread::park_timeout(deadline.saturating_duration_since(Instant::now())),
            None => thread::park(),
        }
    };
    LOOP_WAKER.with(|slot| *slot.borrow_mut() = outer);
    NEXT_WAKE.with(|next| next.set(outer_wake));
    output
}

/// A sleep until a deadline (see the module's doc).
pub(crate) struct Sleep {
    deadline: Instant,
    /// Made the first time it is polled outside a task thread's loop.
    timer: Option<async_io::Timer>,
}

impl Sleep {
    pub(crate) fn until(deadline: Instant) -> Self {
        Self { deadline, timer: None }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let by_the_loop = LOOP_WAKER.with(|slot| slot.borrow().as_ref().is_some_and(|own| own.will_wake(cx.waker())));
        if by_the_loop {
            let deadline = self.deadline;
            NEXT_WAKE.with(|next| next.set(Some(next.get().map_or(deadline, |at| at.min(deadline)))));
            return Poll::Pending;
        }
        let deadline = self.deadline;
        let timer = self.timer.get_or_insert_with(|| async_io::Timer::at(deadline));
        Pin::new(timer).poll(cx).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_loop_parks_until_the_earliest_deadline() {
        let start = Instant::now();
        let later = Sleep::until(start + Duration::from_secs(30));
        let soon = Sleep::until(start + Duration::from_millis(20));
        let which = block_on(
            futures_lite::future::or(
                async {
                    later.await;
                    "later"
                },
                async {
                    soon.await;
                    "soon"
                },
            ),
            || {},
        );
        assert_eq!(which, "soon");
        assert!(start.elapsed() >= Duration::from_millis(20), "not before its deadline");
    }

    #[test]
    fn a_sleep_polled_elsewhere_falls_back_to_a_timer() {
        // Polled by futures-lite's loop (not a task thread's): its waker is not the loop's.
        let start = Instant::now();
        futures_lite::future::block_on(Sleep::until(start + Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
        // Nested inside a task loop's poll: the inner loop's waker is not the outer one's.
        block_on(
            async { futures_lite::future::block_on(Sleep::until(Instant::now() + Duration::from_millis(10))) },
            || {},
        );
    }

    #[test]
    fn a_wake_from_another_thread_ends_the_park() {
        let (sender, receiver) = async_channel::bounded::<()>(1);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            let _ = sender.send_blocking(());
        });
        let start = Instant::now();
        let got = block_on(receiver.recv(), || {});
        assert_eq!(got, Ok(()));
        assert!(start.elapsed() < Duration::from_secs(20), "woken by the send, not a timeout");
    }
}
