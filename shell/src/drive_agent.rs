//! An agent's loop: its side of the drive loop ([`crate::drive`]): the handles' commands are looked
//! at first (a handle waits for its answer), events are published to the subscribers
//! (whose queues are bounded: one that falls behind is dropped, so publishing never
//! waits), and the agent is terminated once the last handle is gone.

use std::time::Instant;

use async_channel::{Receiver, Sender};
use omni_protocol::agent::{Agent as AgentMachine, AgentCallbacks, AgentInput};

use crate::agent::LoopMessage;
use crate::drive::{drive, Notice, Side};
use crate::executor::Executor;
use crate::host::Host;
use crate::runtime::{Runtime, Task, Transport};
use crate::{Agent, AsyncTool, Error};

/// Runs the hosted agent as a task of `runtime`, its tools run with `tools`' handlers and
/// its requests sent over `transport`, and returns the first handle on it. `config`
/// resolves `set_state`'s models; `capacity` bounds each subscriber's queue.
pub(crate) fn spawn_agent<C, R, T>(
    runtime: &R,
    transport: T,
    host: Host<C>,
    tools: &[AsyncTool],
    config: omni_protocol::client::ClientConfig,
    capacity: usize,
) -> Result<Agent<C>, Error>
where
    C: AgentCallbacks + Send + 'static,
    R: Runtime,
    T: Transport,
{
    let commands = spawn_agent_loop(runtime, transport, host, tools)?;
    Ok(Agent::new(config, commands, capacity))
}

/// Runs the hosted agent as the shell's own client does, for a driver whose handles are its own
/// (omni-blocking's blocking ones): returns the sender they command the agent through.
/// Dropping every clone of it stops the agent.
pub(crate) fn spawn_agent_loop<C, R, T>(
    runtime: &R,
    transport: T,
    host: Host<C>,
    tools: &[AsyncTool],
) -> Result<Sender<LoopMessage<C>>, Error>
where
    C: AgentCallbacks + Send + 'static,
    R: Runtime,
    T: Transport,
{
    let (commands, received) = Agent::channel();
    let mut host = host;
    let executor =
        Executor::new(runtime.clone(), transport, host.tool_sources().handlers(tools)).observed(host.take_observer());
    // Detached: the loop ends on its own once every handle is gone.
    let handles = Handles { host, commands: received, orphaned: false };
    runtime.spawn(drive(handles, executor))?.detach();
    Ok(commands)
}

impl<C: AgentCallbacks + Send + 'static> Handles<C> {
    /// Offers the MCP servers' new lists from the agent's next step.
    fn tools_changed<R: Runtime, T: Transport>(&mut self, executor: &mut Executor<R, T>, now: Instant) {
        let offered = self.host.tool_sources().refresh(executor);
        // Refused only for a list the agent cannot offer (two tools of one name across
        // servers): the tools offered until now stay.
        let _ = self.host.agent().handle_input(AgentInput::ReplaceTools(offered), now);
    }
}

/// The application's end of an agent: its handles and subscribers.
struct Handles<C: AgentCallbacks> {
    host: Host<C>,
    /// Closes when the last handle is dropped.
    commands: Receiver<LoopMessage<C>>,
    /// The last handle is gone and the agent terminated.
    orphaned: bool,
}

impl<C: AgentCallbacks + Send + 'static> Side for Handles<C> {
    type Machine = AgentMachine<C>;
    type Command = LoopMessage<C>;

    fn machine(&mut self) -> &mut AgentMachine<C> {
        self.host.agent()
    }

    fn deliver(&mut self) {
        self.host.publish();
    }

    async fn wait(&mut self) -> Notice<LoopMessage<C>> {
        let commands = async {
            match self.commands.recv().await {
                Ok(message) => Notice::Command(message),
                Err(_) => Notice::Gone,
            }
        };
        let tools_changed = async {
            self.host.tool_sources().changed().await;
            Notice::Command(LoopMessage::ToolsChanged)
        };
        futures_lite::future::or(commands, tools_changed).await
    }

    fn apply<R: Runtime, T: Transport>(
        &mut self,
        message: LoopMessage<C>,
        executor: &mut Executor<R, T>,
        now: Instant,
    ) {
        match message {
            LoopMessage::Command(command) => self.host.apply(command, now),
            LoopMessage::Prompt(command, parent) => {
                executor.trace_under(parent);
                self.host.apply(command, now)
            }
            LoopMessage::SetState { patch, tools, reply } => {
                // The new tools' handlers are swapped in only if the machine takes the patch.
                let accepted = self.host.agent().handle_input(AgentInput::SetState(patch), now);
                if let (Ok(()), Some(tools)) = (&accepted, tools) {
                    executor.set_tools(&tools);
                    // The agent's own tools now; the MCP servers' join them at their
                    // next change.
                    self.host.tool_sources().set_own(tools.iter().map(AsyncTool::decl).collect());
                }
                reply(accepted);
            }
            LoopMessage::ToolsChanged => self.tools_changed(executor, now),
        }
    }

    fn before_input<R: Runtime, T: Transport>(&mut self, executor: &mut Executor<R, T>, now: Instant) {
        if self.host.tool_sources().has_changed() {
            self.tools_changed(executor, now);
        }
    }

    fn gone(&mut self, now: Instant) {
        // Cancels through effects, calls `terminate`, lets the subscribers go.
        self.host.terminate(now);
        self.orphaned = true;
    }

    fn finished(&mut self) -> bool {
        self.orphaned
    }
}
