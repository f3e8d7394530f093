//! A subscriber's end: a bounded queue of events, so a subscriber that stops reading
//! costs bounded memory; when it is full the subscriber is dropped and told so. The same
//! queue carries an agent's events and a session's (`E`).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::EventSink;
use async_channel::{Receiver, Sender, TrySendError};
use omni_protocol::agent::AgentEvent;

/// The agent's (or a session's) events after a subscription, as a
/// [`Stream`](futures_core::Stream). It ends when the agent stops, or when this
/// subscriber fell behind by more than the agent's subscriber capacity
/// ([`Subscription::lagged`]). Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription<E = AgentEvent> {
    // Boxed: async-channel's receiver is not `Unpin`.
    events: Pin<Box<Receiver<E>>>,
    lagged: Arc<AtomicBool>,
    /// Poked when this subscription is dropped: a session counts its controllers again.
    on_drop: Option<async_channel::Sender<()>>,
}

impl<E> Drop for Subscription<E> {
    fn drop(&mut self) {
        if let Some(poke) = self.on_drop.take() {
            // The receiver goes first, so that the session sees this subscriber gone.
            self.events.close();
            // Full: a poke waits already, and the count will see this one gone too.
            let _ = poke.try_send(());
        }
    }
}

impl<E> Subscription<E> {
    /// A subscription whose queue holds up to `capacity` unread events, and the agent's
    /// end of it, for the agent builder's `subscriber`:
    /// `let (subscriber, events) = Subscription::channel(1_000);`
    pub fn channel(capacity: usize) -> (Subscriber<E>, Self) {
        let capacity = capacity.max(1);
        let (tx, rx) = async_channel::bounded(capacity);
        let lagged = Arc::new(AtomicBool::new(false));
        (Subscriber { events: tx, lagged: lagged.clone() }, Self { events: Box::pin(rx), lagged, on_drop: None })
    }

    /// This subscription, poking `poke` when it is dropped.
    pub(crate) fn poking(mut self, poke: async_channel::Sender<()>) -> Self {
        self.on_drop = Some(poke);
        self
    }

    /// The next event, or `None` once the subscription ended.
    pub async fn next_event(&mut self) -> Option<E> {
        self.events.recv().await.ok()
    }

    /// True when the subscription ended because this subscriber fell behind (events
    /// after that point were not delivered to it).
    pub fn lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }
}

impl<E> futures_core::Stream for Subscription<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// The agent's end of a subscription: given to the agent by `subscribe`, or by the
/// builder's `subscriber` for a subscription from the start.
#[derive(Debug)]
pub struct Subscriber<E = AgentEvent> {
    events: Sender<E>,
    lagged: Arc<AtomicBool>,
}

impl<E: Send> EventSink<E> for Subscriber<E> {
    fn offer(&mut self, event: E) -> bool {
        match self.events.try_send(event) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.lagged.store(true, Ordering::Release);
                false
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }

    fn is_gone(&self) -> bool {
        self.events.is_closed()
    }
}
