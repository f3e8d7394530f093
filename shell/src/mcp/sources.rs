//! The MCP servers an agent takes tools from (`AgentBuilder::mcp`): the tools they offer
//! now, and a wait for the next change of any server's list, after which the agent's
//! loop offers the new list from the next step ([`AgentInput::ReplaceTools`]).
//!
//! [`AgentInput::ReplaceTools`]: omni_protocol::agent::AgentInput::ReplaceTools

use std::future::Future;
use std::pin::Pin;

use futures_lite::future;
use omni_protocol::generate::ToolDecl;

use super::McpServer;
use crate::executor::{Executor, Handlers};
use crate::runtime::{Runtime, Transport};
use crate::{handlers_by_name, AsyncTool};

/// The servers, the version of each one's list last taken, and the agent's own tools.
#[derive(Debug, Default)]
pub(crate) struct ToolSources {
    servers: Vec<(McpServer, u64)>,
    /// The servers' tools as last taken.
    tools: Vec<AsyncTool>,
    /// The agent's own tools, offered with the servers'.
    own: Vec<ToolDecl>,
}

impl ToolSources {
    /// Takes the servers' current tools.
    pub(crate) fn new(servers: Vec<McpServer>) -> Self {
        let mut sources =
            Self { servers: servers.into_iter().map(|s| (s, 0)).collect(), tools: Vec::new(), own: Vec::new() };
        sources.take();
        sources
    }

    /// The agent's own tools are these (its builder's, or `set_state`'s).
    pub(crate) fn set_own(&mut self, own: Vec<ToolDecl>) {
        self.own = own;
    }

    /// Takes the servers' current tools: every tool the agent offers now, its own first.
    pub(crate) fn take(&mut self) -> Vec<ToolDecl> {
        self.tools.clear();
        for (server, seen) in &mut self.servers {
            // The version first: a change after it is seen again, never missed.
            *seen = server.tools_version();
            self.tools.extend(server.tools());
        }
        self.own.iter().cloned().chain(self.tools.iter().map(AsyncTool::decl)).collect()
    }

    /// Whether a server's list has changed since it was taken.
    pub(crate) fn has_changed(&self) -> bool {
        self.servers.iter().any(|(server, seen)| server.tools_version() != *seen)
    }

    /// Resolves when a server's list has changed since it was taken; never while none
    /// can (no server, or every one closed). Allocates nothing for an agent without
    /// servers, which waits here at every wake-up.
    pub(crate) async fn changed(&self) {
        match self.waits() {
            Some(waits) => waits.await,
            None => future::pending().await,
        }
    }

    /// One future for the open servers' next changes, or none.
    fn waits(&self) -> Option<Pin<Box<dyn Future<Output = ()> + Send + '_>>> {
        let mut waits: Option<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = None;
        for (server, seen) in &self.servers {
            if server.closed().is_none() {
                let next = server.tools_changed(*seen);
                waits = Some(match waits {
                    Some(others) => Box::pin(future::or(others, next)),
                    None => Box::pin(next),
                });
            }
        }
        waits
    }

    /// The handlers a loop runs: `own` tools' and the servers'.
    pub(crate) fn handlers(&self, own: &[AsyncTool]) -> Handlers {
        let mut handlers = handlers_by_name(own);
        handlers.extend(handlers_by_name(&self.tools));
        handlers
    }

    /// Takes the servers' new lists: their handlers join `executor`'s, and every tool the
    /// agent offers now comes back, for its `ReplaceTools`.
    pub(crate) fn refresh<R: Runtime, T: Transport>(&mut self, executor: &mut Executor<R, T>) -> Vec<ToolDecl> {
        let offered = self.take();
        executor.set_tools(&self.tools);
        offered
    }
}
