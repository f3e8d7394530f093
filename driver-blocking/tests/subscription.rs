//! A subscription's queue is bounded: a subscriber that falls behind is dropped, and what
//! was queued before that still comes, through every way of reading it.

use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::time::Duration;

use omni_blocking::{AgentEvent, Status, Subscription};
use omni_shell::EventSink;

#[test]
fn a_full_queue_drops_the_subscriber_and_what_was_queued_still_comes() {
    let (mut sink, mut subscription) = Subscription::channel(2);
    let event = AgentEvent::Status(Status::Busy);
    assert!(sink.offer(event.clone()) && sink.offer(event.clone()));
    assert!(!sink.offer(event), "the third event does not fit");
    assert!(subscription.lagged());
    assert!(subscription.try_recv().is_ok());
    assert!(subscription.recv_timeout(Duration::from_secs(5)).is_ok());
    assert_eq!(subscription.try_recv(), Err(TryRecvError::Empty), "the sink is still there");
    assert_eq!(subscription.recv_timeout(Duration::from_millis(10)), Err(RecvTimeoutError::Timeout));
    drop(sink);
    assert_eq!(subscription.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(subscription.recv_timeout(Duration::from_secs(5)), Err(RecvTimeoutError::Disconnected));
    assert_eq!(subscription.next(), None);
}
