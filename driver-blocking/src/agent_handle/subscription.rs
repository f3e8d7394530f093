//! A subscriber's end: a bounded queue of events, so a subscriber that stops reading
//! costs bounded memory; when it is full the subscriber is dropped and told so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use omni_core::agent::AgentEvent;
use omni_shell::EventSink;

/// The agent's events after a subscription, as a blocking [`Iterator`]: `next` waits for
/// the next event. It ends when the agent stops, or when this subscriber fell behind by
/// more than the agent's subscriber capacity ([`Subscription::lagged`]); events queued
/// before that point are still delivered. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    events: Receiver<AgentEvent>,
    lagged: Arc<AtomicBool>,
}

impl Subscription {
    /// A subscription whose queue holds up to `capacity` unread events, and the agent's
    /// end of it, for the agent builder's `subscriber`:
    /// `let (subscriber, events) = Subscription::channel(1_000);`
    pub fn channel(capacity: usize) -> (Subscriber, Self) {
        let capacity = capacity.max(1);
        let (tx, rx) = mpsc::sync_channel(capacity);
        let lagged = Arc::new(AtomicBool::new(false));
        (Subscriber { events: tx, lagged: lagged.clone() }, Self { events: rx, lagged })
    }

    /// Waits at most `limit` for the next event. `Err(Timeout)` when none came in time,
    /// `Err(Disconnected)` once the subscription ended.
    pub fn recv_timeout(&self, limit: Duration) -> Result<AgentEvent, RecvTimeoutError> {
        self.events.recv_timeout(limit)
    }

    /// The next event if one is queued, without waiting.
    pub fn try_recv(&self) -> Result<AgentEvent, TryRecvError> {
        self.events.try_recv()
    }

    /// True when the subscription ended because this subscriber fell behind (events
    /// after that point were not delivered to it).
    pub fn lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }
}

impl Iterator for Subscription {
    type Item = AgentEvent;

    /// Blocks until the next event; `None` once the subscription ended.
    fn next(&mut self) -> Option<AgentEvent> {
        self.events.recv().ok()
    }
}

/// The agent's end of a subscription: given to the agent by `subscribe`, or by the
/// builder's `subscriber` for a subscription from the start.
#[derive(Debug)]
pub struct Subscriber {
    events: SyncSender<AgentEvent>,
    lagged: Arc<AtomicBool>,
}

impl EventSink for Subscriber {
    fn offer(&mut self, event: &AgentEvent) -> bool {
        match self.events.try_send(event.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                // Set before the sink is dropped, so a reader that sees the end sees the flag.
                self.lagged.store(true, Ordering::Release);
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use omni_core::agent::Status;

    #[test]
    fn a_full_queue_drops_the_subscriber_and_says_so() {
        let (mut sink, subscription) = Subscription::channel(2);
        let event = AgentEvent::Status(Status::Busy);
        assert!(sink.offer(&event) && sink.offer(&event));
        assert!(!subscription.lagged());
        assert!(!sink.offer(&event), "the third event does not fit");
        assert!(subscription.lagged());
        drop(sink);
        assert_eq!(subscription.count(), 2, "what was queued is still delivered, then it ends");
    }

    #[test]
    fn a_dropped_subscription_drops_the_sink_without_lag() {
        let (mut sink, subscription) = Subscription::channel(2);
        let lagged = subscription.lagged.clone();
        drop(subscription);
        assert!(!sink.offer(&AgentEvent::Status(Status::Idle)));
        assert!(!lagged.load(Ordering::Acquire));
    }
}
