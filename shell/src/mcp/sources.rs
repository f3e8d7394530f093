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
use crate::AsyncTool;

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

    /// The servers' tools as last taken (for their handlers).
    pub(crate) fn tools(&self) -> &[AsyncTool] {
        &self.tools
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
    /// can (no server, or every one closed).
    pub(crate) fn changed(&self) -> impl Future<Output = ()> + Send + '_ {
        let mut waits: Pin<Box<dyn Future<Output = ()> + Send + '_>> = Box::pin(future::pending());
        for (server, seen) in &self.servers {
            if server.closed().is_none() {
                waits = Box::pin(future::or(waits, server.tools_changed(*seen)));
            }
        }
        waits
    }
}
