//! What a connection's loop publishes for its handles: who the server is, its current
//! tools (and a version that changes with them), recent warnings and log messages, and
//! whether it is over. Everything kept is bounded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use event_listener::Event;
use omni_protocol::mcp::{ConnectionError, McpTool, McpWarning, ServerInfo};
use serde_json::Value;

use super::process::ServerLog;

/// The most recent warnings and log messages kept (older ones are counted, not kept).
pub const RECENT: usize = 64;

/// Progress of a tool call, as the server reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The progress so far.
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A message for people, if any.
    pub message: Option<String>,
}

/// A log message the server sent (`notifications/message`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerMessage {
    /// Its level (`info`, `error`, ...).
    pub level: String,
    /// Its data.
    pub data: Value,
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Notified when the tools change and when the connection ends.
    changed: Event,
    pub(crate) log: ServerLog,
}

#[derive(Debug, Default)]
struct State {
    info: Option<ServerInfo>,
    tools: Arc<[McpTool]>,
    dropped: usize,
    /// Counts tool lists: 0 before the first.
    version: u64,
    warnings: VecDeque<McpWarning>,
    warnings_seen: u64,
    messages: VecDeque<ServerMessage>,
    /// `Some` once the connection is over: `None` inside after a close, else why.
    closed: Option<Option<ConnectionError>>,
    /// The loop has ended (a child is shut down and reaped).
    finished: bool,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn connected(&self, info: ServerInfo) {
        self.state().info = Some(info);
    }

    pub(crate) fn set_tools(&self, tools: Arc<[McpTool]>, dropped: usize) {
        let old = {
            let mut state = self.state();
            state.dropped = dropped;
            state.version += 1;
            std::mem::replace(&mut state.tools, tools)
        };
        // Freed outside the lock: a large list takes a while, and `tools()` waits for none.
        drop(old);
        self.changed.notify(usize::MAX);
    }

    pub(crate) fn warn(&self, warning: McpWarning) {
        let mut state = self.state();
        state.warnings_seen += 1;
        if state.warnings.len() == RECENT {
            state.warnings.pop_front();
        }
        state.warnings.push_back(warning);
    }

    pub(crate) fn server_message(&self, level: String, data: Value) {
        let mut state = self.state();
        if state.messages.len() == RECENT {
            state.messages.pop_front();
        }
        state.messages.push_back(ServerMessage { level, data });
    }

    pub(crate) fn closed(&self, reason: Option<ConnectionError>) {
        self.state().closed.get_or_insert(reason);
        self.changed.notify(usize::MAX);
    }

    pub(crate) fn finished(&self) {
        {
            let mut state = self.state();
            state.closed.get_or_insert(None);
            state.finished = true;
        }
        self.changed.notify(usize::MAX);
    }

    pub(crate) fn info(&self) -> Option<ServerInfo> {
        self.state().info.clone()
    }

    /// The current tools and their version.
    pub(crate) fn tools(&self) -> (Arc<[McpTool]>, u64) {
        let state = self.state();
        (state.tools.clone(), state.version)
    }

    pub(crate) fn dropped_tools(&self) -> usize {
        self.state().dropped
    }

    pub(crate) fn warnings(&self) -> (Vec<McpWarning>, u64) {
        let state = self.state();
        (state.warnings.iter().cloned().collect(), state.warnings_seen)
    }

    pub(crate) fn messages(&self) -> Vec<ServerMessage> {
        self.state().messages.iter().cloned().collect()
    }

    pub(crate) fn closed_reason(&self) -> Option<Option<ConnectionError>> {
        self.state().closed.clone()
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.state().finished
    }

    /// Resolves once `done` holds; looked at again at each change of the tools or the
    /// connection (listening before looking, so no change is missed).
    pub(crate) async fn until(&self, done: impl Fn(&Self) -> bool) {
        loop {
            let listener = self.changed.listen();
            if done(self) {
                return;
            }
            listener.await;
        }
    }
}
