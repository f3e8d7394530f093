//! What the sessions tell the manager: started (or not), a status, controllers, a
//! committed turn, a title, a title made, the end of their loop.

use std::time::Instant;

use super::title::{clean_title, heuristic_title, title_request, TITLE_MAX_TOKENS};
use super::{
    Answer, CloseReason, FeedEvent, IdleShutdown, Manager, ManagerEffect, ManagerError, ManagerInput, Opening, Pending,
    Phase, Started, TitleId, TitleMode, Titling,
};
use crate::data::message::Message;
use crate::machines::session::store::SessionId;

impl Manager {
    /// A session's news (every input but the application's requests and store answers).
    pub(super) fn news(&mut self, input: ManagerInput, now: Instant) {
        match input {
            ManagerInput::Started { id, result } => self.started(id, result, now),
            ManagerInput::Status { id, status } => {
                let Some(entry) = self.running_mut(&id) else { return };
                if entry.status == status {
                    return;
                }
                entry.status = status;
                self.events.push_back(FeedEvent::Status { id: id.clone(), status });
                self.reconsider_idle(&id, now);
                self.stop_when_ready(&id, false);
            }
            ManagerInput::Controllers { id, count } => {
                let Some(entry) = self.running_mut(&id) else { return };
                entry.controllers = count;
                self.reconsider_idle(&id, now);
            }
            ManagerInput::Committed { id, first_messages } => self.title_after_commit(&id, first_messages),
            ManagerInput::Titled { id, title } => {
                let Some(entry) = self.running_mut(&id) else { return };
                entry.titling = Titling::Done;
                if entry.title != title {
                    entry.title.clone_from(&title);
                    self.events.push_back(FeedEvent::Title { id, title });
                }
            }
            ManagerInput::TitleMade { id, work, result } => self.title_made(id, work, result),
            ManagerInput::Ended { id, reason } => self.ended(id, reason, now),
            // Requests and store answers are `handle_input`'s.
            _ => {}
        }
    }

    /// A running (or stopping) session's entry: news of one that is not is stale.
    fn running_mut(&mut self, id: &SessionId) -> Option<&mut super::Entry> {
        self.sessions.get_mut(id).filter(|entry| !matches!(entry.phase, Phase::Starting { .. }))
    }

    fn started(&mut self, id: SessionId, result: Result<Started, ManagerError>, now: Instant) {
        let Some(entry) = self.sessions.get_mut(&id) else { return };
        let Phase::Starting { opener, create, idle, at } = entry.phase else { return };
        let queued = std::mem::take(&mut entry.queued);
        let started = match result {
            Ok(started) => started,
            Err(error) => {
                self.sessions.remove(&id);
                self.answer(opener, Err(error.clone()));
                // Other openers load it: after a failed load they would fail alike; after
                // a failed create (it exists, say) they may well succeed.
                for input in queued {
                    match input {
                        ManagerInput::Open { request, .. } if !create => self.answer(request, Err(error.clone())),
                        other => self.handle_input(other, now),
                    }
                }
                return;
            }
        };
        entry.phase = Phase::Running;
        entry.status = started.status;
        entry.title.clone_from(&started.title);
        entry.controllers = started.controllers;
        entry.idle_after = match idle {
            IdleShutdown::Default => self.config.idle_after,
            IdleShutdown::After(after) => Some(after),
            IdleShutdown::Never => None,
        };
        entry.claim = started.claim;
        if let Some(lease) = entry.claim.as_ref().and_then(|claim| claim.lease()) {
            // The store set the lease at or after the claim was asked for.
            let from = started.claimed_at.unwrap_or(at).max(at);
            entry.lease_until = Some(from + lease);
            self.renewal.schedule(lease, from + lease, now);
        }
        if entry.title.is_some() || self.config.titles == TitleMode::Off {
            entry.titling = Titling::Done;
        }
        self.events.push_back(FeedEvent::Opened { id: id.clone(), title: started.title, status: started.status });
        self.answer(opener, Ok(Answer::Opened(Opening::Started)));
        if started.first_messages.iter().any(|m| m.role == crate::data::message::Role::Assistant) {
            self.title_after_commit(&id, started.first_messages);
        }
        self.reconsider_idle(&id, now);
        for input in queued {
            self.handle_input(input, now);
        }
        if self.shutting_down {
            self.ask_stop(&id, CloseReason::Closed);
        }
    }

    /// Starts a session's title once it has a committed turn and none.
    fn title_after_commit(&mut self, id: &SessionId, first_messages: Vec<Message>) {
        let mode = self.config.titles;
        let work = TitleId(self.next_title);
        let Some(entry) = self.running_mut(id) else { return };
        if entry.titling != Titling::Wanted || entry.title.is_some() {
            return;
        }
        match mode {
            TitleMode::Off => entry.titling = Titling::Done,
            TitleMode::Heuristic => {
                entry.titling = Titling::Done;
                if let Some(title) = heuristic_title(&first_messages) {
                    self.set_title(id, Some(title));
                }
            }
            TitleMode::Model => {
                let context = Box::new(title_request(&first_messages));
                entry.titling = Titling::Making(work, first_messages);
                self.next_title += 1;
                self.effects.push_back(ManagerEffect::MakeTitle {
                    id: id.clone(),
                    work,
                    context,
                    max_tokens: TITLE_MAX_TOKENS,
                });
            }
        }
    }

    fn title_made(&mut self, id: SessionId, work: TitleId, result: Result<String, String>) {
        let Some(entry) = self.sessions.get_mut(&id) else {
            // The session stopped while its title was being made: the store gets it.
            if let Ok(title) = result.as_deref().map(clean_title) {
                let request = self.own_request();
                self.pending.insert(request, Pending::OwnRename);
                self.effects.push_back(ManagerEffect::Rename { request, id, title });
            }
            return;
        };
        let Titling::Making(current, first_messages) = std::mem::replace(&mut entry.titling, Titling::Done) else {
            // Renamed meanwhile: the application's title wins.
            return;
        };
        if current != work {
            entry.titling = Titling::Making(current, first_messages);
            return;
        }
        let fallback = || heuristic_title(&first_messages);
        let title = match result.map(|answer| clean_title(&answer)) {
            Ok(Some(title)) => Some(title),
            Ok(None) => {
                let error = "the model's answer held no title".to_owned();
                self.events.push_back(FeedEvent::TitleFailed { id: id.clone(), error });
                fallback()
            }
            Err(error) => {
                self.events.push_back(FeedEvent::TitleFailed { id: id.clone(), error });
                fallback()
            }
        };
        let running = matches!(self.sessions.get(&id).map(|e| &e.phase), Some(Phase::Running | Phase::Stopping));
        if running && title.is_some() {
            self.set_title(&id, title);
        }
    }

    fn ended(&mut self, id: SessionId, seen: Option<CloseReason>, now: Instant) {
        let Some(entry) = self.sessions.get(&id) else { return };
        if let Phase::Starting { .. } = entry.phase {
            // A start's end is its `Started`.
            return;
        }
        self.disarm_idle(&id);
        let Some(entry) = self.sessions.remove(&id) else { return };
        let reason = entry.close.or(seen).unwrap_or_else(|| CloseReason::Failed("the session's loop ended".into()));
        self.events.push_back(FeedEvent::Closed { id: id.clone(), reason });
        // A title still being made is saved when it comes (`title_made`).
        for request in entry.closers {
            self.answer(request, Ok(Answer::Closed));
        }
        let mut deleters = entry.deleters.into_iter();
        if let Some(first) = deleters.next() {
            self.pending.insert(first, Pending::Delete(deleters.collect()));
            self.effects.push_back(ManagerEffect::Delete { request: first, id: id.clone() });
        }
        for input in entry.queued {
            self.handle_input(input, now);
        }
    }
}
