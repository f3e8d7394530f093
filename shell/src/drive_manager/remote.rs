//! The manager's side of a shared store's presence (`manager_presence`): this node's feed
//! written, one batch at a time; the other nodes' notices read, one read at a time (the
//! ids heard meanwhile wait, each once), and told on the feed.

use omni_protocol::agent::AgentCallbacks;
use omni_protocol::session::SessionId;

use super::{Done, ManagerSide};
use crate::manager_presence::{read, write_batch, Heard, Read};
use crate::runtime::off_executor;
use crate::Driver;

impl<D: Driver, C: AgentCallbacks + Send + 'static> ManagerSide<D, C> {
    /// Sends this node's next batch of presence writes, unless one is in flight.
    pub(super) fn write_presence(&mut self) {
        let Some(sync) = &mut self.presence else { return };
        let Some(batch) = sync.next_batch() else { return };
        let presence = sync.presence.clone();
        let runtime = self.client.inner.runtime.clone();
        let work = async move {
            // Failures are mended by the next change: an entry is advisory.
            let _ = off_executor(&runtime, move || write_batch(&*presence, batch)).await;
            Done::PresenceWritten
        };
        if self.spawn(work).is_err() {
            // The runtime is going down: nothing more is written.
            self.presence = None;
        }
    }

    /// The listener heard notices (read them), or listens again (catch up).
    pub(super) fn heard(&mut self, heard: Heard) {
        match heard {
            Heard::Notices(ids) => self.to_read.extend(ids),
            Heard::Listening => self.catch_up = true,
        }
        self.read_remote();
    }

    /// Reads what was heard, unless a read is in flight: everything after a reconnect,
    /// else the entries of the sessions heard of.
    pub(super) fn read_remote(&mut self) {
        let Some(sync) = &self.presence else { return };
        if self.reading || (!self.catch_up && self.to_read.is_empty()) {
            return;
        }
        let presence = sync.presence.clone();
        let runtime = self.client.inner.runtime.clone();
        let all = std::mem::take(&mut self.catch_up);
        let ids: Vec<SessionId> = std::mem::take(&mut self.to_read).into_iter().collect();
        let known = if all { sync.known_remote() } else { Vec::new() };
        let work = async move {
            let read = off_executor(&runtime, move || read(&*presence, all, ids, known)).await;
            Done::Remote(read.ok().and_then(Result::ok))
        };
        self.reading = self.spawn(work).is_ok();
    }

    /// A read's result, told on the feed; a failed read is made again as a catch-up.
    pub(super) fn remote_read(&mut self, read: Option<Read>) {
        self.reading = false;
        let Some(sync) = &mut self.presence else { return };
        match read {
            Some(Read { entries, all, stopped }) => {
                for event in sync.compare(entries, all, stopped) {
                    self.feed.publish(event);
                }
            }
            // Read again when the listener next says anything.
            None => self.catch_up = true,
        }
    }
}
