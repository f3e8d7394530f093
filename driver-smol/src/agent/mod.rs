//! The agent on smol: the [`Agent`] handle (async methods, subscriptions as
//! [`Stream`](futures_core::Stream)s) is omni-async's; this module starts its task on the
//! client's executor.
//!
//! The core machine ([`omni_core::agent`]) takes every decision; a task owns it inside a
//! [`Host`] and executes its effects. Handles send it commands. Dropping the last handle
//! stops the agent: the request in flight is closed, tool runs are aborted, `terminate`
//! is called and every subscription ends.

mod run;

use omni_core::agent::{AgentCallbacks, Host, Launch, NoCallbacks};
use omni_core::async_tool::handlers_by_name;
use omni_core::client::{ClientConfig, ModelRef};
use omni_core::generate::ToolDecl;

use crate::client::Client;
use crate::tools::Tool;
use crate::Error;
pub use omni_async::{Agent, StateChange, Subscriber, Subscription, WeakAgent};

/// Sets up an agent; see [`Client::agent`] and [`omni_core::agent::AgentBuilder`].
pub type AgentBuilder<C = NoCallbacks> = omni_core::agent::AgentBuilder<Client, Tool, C>;

impl Client {
    /// Starts setting up an agent on this client's configuration (it runs on the
    /// client's executor).
    pub fn agent(&self, model: impl Into<ModelRef>) -> AgentBuilder {
        AgentBuilder::new(self.clone(), model.into())
    }
}

impl Launch<Tool> for Client {
    type Handle<C: AgentCallbacks + Send + 'static> = Agent<C>;
    type Error = Error;

    fn client_config(&self) -> &ClientConfig {
        &self.inner.config
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn now() -> std::time::Instant {
        std::time::Instant::now()
    }

    fn describe(tool: &Tool) -> ToolDecl {
        tool.decl()
    }

    fn launch<C: AgentCallbacks + Send + 'static>(
        &self,
        host: Host<C>,
        tools: Vec<Tool>,
        capacity: usize,
    ) -> Result<Agent<C>, Error> {
        let (commands, rx) = Agent::channel();
        let inner = &self.inner;
        let task = run::run(host, inner.http.clone(), inner.spawner.clone(), handlers_by_name(&tools), rx);
        // Detached: the task ends on its own once every handle is gone.
        inner.spawner.spawn(task).detach();
        Ok(Agent::new(inner.config.clone(), commands, capacity))
    }
}
