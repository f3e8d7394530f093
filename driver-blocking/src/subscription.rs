//! A subscriber's end as a blocking [`Iterator`] over omni-shell's subscription: the
//! shell keeps the bounded queue and drops a subscriber that falls behind; this only
//! waits for it.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_lite::future::{self, block_on};
use omni_protocol::agent::AgentEvent;
pub use omni_shell::Subscriber;

/// The agent's (or a session's) events after a subscription, as a blocking [`Iterator`]: `next` waits for
/// the next event. It ends when the agent stops, or when this subscriber fell behind by
/// more than the agent's subscriber capacity ([`Subscription::lagged`]); events queued
/// before that point are still delivered. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription<E = AgentEvent>(Mutex<omni_shell::Subscription<E>>, PhantomData<Cell<()>>);

impl<E> Subscription<E> {
    /// A subscription whose queue holds up to `capacity` unread events, and the agent's
    /// end of it, for the agent builder's `subscriber`:
    /// `let (subscriber, events) = Subscription::channel(1_000);`
    pub fn channel(capacity: usize) -> (Subscriber<E>, Self) {
        let (subscriber, events) = omni_shell::Subscription::channel(capacity);
        (subscriber, events.into())
    }

    /// The shell's subscription. (Behind a lock only so that the waiting methods take
    /// `&self`, as a channel's receiver does. The subscription is not `Sync`, as that
    /// receiver is not: the lock is never waited for.)
    fn events(&self) -> MutexGuard<'_, omni_shell::Subscription<E>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits at most `limit` for the next event. `Err(Timeout)` when none came in time,
    /// `Err(Disconnected)` once the subscription ended.
    pub fn recv_timeout(&self, limit: Duration) -> Result<E, RecvTimeoutError> {
        let mut events = self.events();
        let next = async { events.next_event().await.ok_or(RecvTimeoutError::Disconnected) };
        let timeout = async {
            async_io::Timer::after(limit).await;
            Err(RecvTimeoutError::Timeout)
        };
        // An event that is there wins over a limit that passed; a receive given up loses nothing.
        block_on(future::or(next, timeout))
    }

    /// The next event if one is queued, without waiting.
    pub fn try_recv(&self) -> Result<E, TryRecvError> {
        match block_on(future::poll_once(self.events().next_event())) {
            Some(Some(event)) => Ok(event),
            Some(None) => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// True when the subscription ended because this subscriber fell behind (events
    /// after that point were not delivered to it).
    pub fn lagged(&self) -> bool {
        self.events().lagged()
    }
}

impl<E> Subscription<E> {
    /// A handle's `subscribe` answer, its subscription made blocking.
    pub(crate) fn with_snapshot<S>((snapshot, events): (S, omni_shell::Subscription<E>)) -> (S, Self) {
        (snapshot, events.into())
    }
}

impl<E> From<omni_shell::Subscription<E>> for Subscription<E> {
    fn from(events: omni_shell::Subscription<E>) -> Self {
        Self(Mutex::new(events), PhantomData)
    }
}

impl<E> Iterator for Subscription<E> {
    type Item = E;

    /// Blocks until the next event; `None` once the subscription ended.
    fn next(&mut self) -> Option<E> {
        block_on(self.events().next_event())
    }
}
