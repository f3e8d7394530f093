//! What the async drivers' loops share to stay bounded: the capacities of their channels
//! and the budget of inputs per wake-up (decided in [`crate::machine`]), and the
//! [`Outbox`] that hands a call's events to the application without ever waiting on it
//! while something else is due.
//!
//! ```text
//!  transport / tool tasks ─► inputs (bounded: INPUT_CAPACITY) ─► loop ─► Outbox ─► batches of events (bounded: EVENT_CAPACITY) ─► TextStream
//!                    ▲ a full channel makes them wait,                  │ full: the loop takes no more input,
//!                    └ so the socket is not read and TCP pushes back    └ but still wakes for a deadline or a cancel
//! ```
//!
//! One input can make many events (a body chunk of many SSE events): the events of one
//! input wait in the outbox however many there are, so what is held beyond the channels is
//! bounded by the largest chunk the transport reads, not by how long the application
//! leaves the stream unread.

use std::collections::VecDeque;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;

pub use crate::machine::{BODY_CHUNK, COMMAND_CAPACITY, EVENT_CAPACITY, INPUT_BUDGET, INPUT_CAPACITY, SPARE_BUFFERS};
use async_channel::{Sender, TrySendError};

/// How much of the outbox went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Everything is in the channel.
    Done,
    /// The channel is full: some events wait (see [`Outbox::room`]).
    Full,
    /// The application dropped the stream.
    Gone,
}

/// A send waiting for room; it owns its event, so dropping the loop's wait loses nothing.
type Sending = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The loop's end of a bounded event channel: events wait here, in order, while the
/// channel is full, and [`Outbox::room`] waits for the application to read without
/// losing an event when the loop wakes for something else instead (a deadline, a cancel).
pub struct Outbox<T> {
    tx: Sender<T>,
    pending: VecDeque<T>,
    /// The oldest waiting event, being sent (kept across the loop's wake-ups).
    sending: Option<Sending>,
}

impl<T> fmt::Debug for Outbox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("pending", &self.pending.len())
            .field("sending", &self.sending.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Outbox<T> {
    /// An outbox over `tx` (a bounded channel, e.g. of [`EVENT_CAPACITY`]).
    pub fn new(tx: Sender<T>) -> Self {
        Self { tx, pending: VecDeque::new(), sending: None }
    }

    /// Queues an event (delivered by [`Outbox::flush`], [`Outbox::room`] or [`Outbox::close`]).
    pub fn push(&mut self, event: T) {
        self.pending.push_back(event);
    }

    /// Puts into the channel what fits now, in order, without waiting.
    pub fn flush(&mut self) -> Delivery {
        if self.tx.is_closed() {
            return Delivery::Gone;
        }
        if self.sending.is_some() {
            return Delivery::Full;
        }
        while let Some(event) = self.pending.pop_front() {
            match self.tx.try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Full(event)) => {
                    self.pending.push_front(event);
                    return Delivery::Full;
                }
                Err(TrySendError::Closed(_)) => return Delivery::Gone,
            }
        }
        Delivery::Done
    }

    /// Whether events wait beside the channel (the last [`Outbox::flush`] found it full).
    pub fn is_waiting(&self) -> bool {
        self.sending.is_some() || !self.pending.is_empty()
    }

    /// Waits until the oldest waiting event is in the channel (the application read one);
    /// false once the application dropped the stream. Cancel-safe: a loop that wakes for
    /// something else and calls it again later continues the same send.
    pub async fn room(&mut self) -> bool {
        if self.sending.is_none() {
            let Some(event) = self.pending.pop_front() else { return !self.tx.is_closed() };
            let tx = self.tx.clone();
            self.sending = Some(Box::pin(async move { tx.send(event).await.is_ok() }));
        }
        let sent = match self.sending.as_mut() {
            Some(sending) => poll_fn(|cx| sending.as_mut().poll(cx)).await,
            None => true,
        };
        self.sending = None;
        sent
    }

    /// Delivers everything left, waiting as long as the application takes to read it (or
    /// until it drops the stream). For the end of a call: its work is stopped already, so
    /// nothing else is due, and the terminal event reaches the application whenever it reads.
    pub async fn close(mut self) {
        while self.is_waiting() && self.room().await {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(future: F) -> F::Output {
        // A tiny executor: these futures are woken by the channel from this same thread.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
        }
    }

    #[test]
    fn a_full_channel_keeps_events_in_order_and_a_dropped_wait_loses_none() {
        let (tx, rx) = async_channel::bounded(2);
        let mut outbox = Outbox::new(tx);
        (1..=5).for_each(|n| outbox.push(n));
        assert_eq!(outbox.flush(), Delivery::Full);
        assert_eq!(rx.len(), 2);
        // A wait that is dropped before there is room (the loop woke for a deadline).
        {
            let mut wait = std::pin::pin!(outbox.room());
            let waker = std::task::Waker::noop();
            assert!(wait.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_pending());
        }
        assert_eq!(rx.try_recv(), Ok(1));
        assert!(block_on(outbox.room()), "the send in flight completes");
        assert_eq!(outbox.flush(), Delivery::Full);
        assert_eq!((rx.try_recv(), rx.try_recv()), (Ok(2), Ok(3)));
        assert_eq!(outbox.flush(), Delivery::Done);
        let received: Vec<i32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(received, [4, 5], "every event, in order");
    }

    #[test]
    fn a_dropped_stream_is_seen() {
        let (tx, rx) = async_channel::bounded(1);
        let mut outbox = Outbox::new(tx);
        outbox.push(1);
        outbox.push(2);
        assert_eq!(outbox.flush(), Delivery::Full);
        drop(rx);
        assert_eq!(outbox.flush(), Delivery::Gone);
        assert!(!block_on(outbox.room()));
    }
}
