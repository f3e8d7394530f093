//! The channel on which the work in flight reports to its loop, bounded by
//! [`INPUT_CAPACITY`], with a *low-water mark*: a report that finds the channel full
//! waits until the loop has taken it down to half, not merely for one free place.
//!
//! Why: when the loop is the slower side (decoding is most of a stream's cost) the
//! channel stays full. With a wake-up per free place, the transport's thread would sleep
//! and be woken again for every piece of body it reads, each time across cores (a futex
//! wake-up and a context switch). Woken at half, it reads and sends half a channel of
//! pieces in one go, and sleeps once per half channel: omni-blocking's request thread is
//! woken 20 times for 100,000 streamed deltas instead of 160 (the CPU saved is a few
//! percent: bench/README.md).
//! Nothing changes for the bound: a full channel still stops the transport (TCP pushes
//! back), and a report is never lost (a send that finds the loop gone says so).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_channel::{Receiver, Sender, TrySendError};
use event_listener::Event;
use futures_lite::Stream;

use crate::executor::Report;
use crate::machine::INPUT_CAPACITY;

/// Below this many waiting reports, the loop wakes the reports that wait for room.
const LOW_WATER: usize = INPUT_CAPACITY / 2;

/// The reporting end, one per request (cloned).
#[derive(Debug, Clone)]
pub(crate) struct ReportSender {
    tx: Sender<Report>,
    /// Notified when the loop has taken the channel down to [`LOW_WATER`], or is gone.
    drained: Arc<Event>,
}

/// The loop's end.
#[derive(Debug)]
pub(crate) struct ReportReceiver {
    /// Pinned: it is polled as a stream, keeping its listener between polls.
    rx: Pin<Box<Receiver<Report>>>,
    drained: Arc<Event>,
}

/// A report channel of [`INPUT_CAPACITY`].
pub(crate) fn channel() -> (ReportSender, ReportReceiver) {
    let (tx, rx) = async_channel::bounded(INPUT_CAPACITY);
    let drained = Arc::new(Event::new());
    (ReportSender { tx, drained: drained.clone() }, ReportReceiver { rx: Box::pin(rx), drained })
}

impl ReportSender {
    /// Whether the loop is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Puts `report` in the channel, waiting while it is full until the loop has taken it
    /// down to the low-water mark; false once the loop is gone.
    pub(crate) async fn send(&self, mut report: Report) -> bool {
        loop {
            match self.tx.try_send(report) {
                Ok(()) => return true,
                Err(TrySendError::Closed(_)) => return false,
                Err(TrySendError::Full(back)) => report = back,
            }
            // Listen before looking again, so a drain between the look and the wait is
            // not missed.
            let drained = self.drained.listen();
            if self.tx.len() > LOW_WATER && !self.tx.is_closed() {
                drained.await;
            }
        }
    }
}

impl ReportReceiver {
    /// The next report, or pending (woken when one comes). Cancel-safe.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Report> {
        match self.rx.as_mut().poll_next(cx) {
            Poll::Ready(Some(report)) => Poll::Ready(self.taken(report)),
            // The executor holds a sender while it lives: the channel never ends, in fact.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    /// The next report if one is there.
    pub(crate) fn try_recv(&mut self) -> Option<Report> {
        self.rx.try_recv().ok().map(|report| self.taken(report))
    }

    /// Wakes the reports waiting for room once the channel is down to the low-water mark.
    fn taken(&self, report: Report) -> Report {
        if self.rx.len() == LOW_WATER {
            self.drained.notify(usize::MAX);
        }
        report
    }
}

impl ReportReceiver {
    /// Takes no more reports: those waiting for room learn it now (their sends fail, and
    /// a transport blocked on one returns and closes its connection).
    pub(crate) fn close(&mut self) {
        self.rx.close();
        self.drained.notify(usize::MAX);
    }
}

impl Drop for ReportReceiver {
    fn drop(&mut self) {
        // The loop is gone.
        self.close();
    }
}
