//! The agent loop, written once for every runtime: commands in, effects executed, events
//! published, deadlines kept. No decision is taken here.
//!
//! Commands are looked at first (a handle waits for its answer). Deadlines are looked at
//! before every input, so a flood cannot hold off a stall or a timeout, and after
//! [`INPUT_BUDGET`] inputs the loop yields to the runtime. Subscribers' queues are
//! bounded (a subscriber that falls behind is dropped), so publishing never waits.

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_core::agent::{AgentCallbacks, AgentInput};

use crate::agent::LoopMessage;
use crate::drive_call::sleep_until;
use crate::executor::{Executor, Report};
use crate::host::Host;
use crate::machine::INPUT_BUDGET;
use crate::runtime::{Runtime, Task, Transport};
use crate::{handlers_by_name, Agent, AsyncTool, Error};

/// What woke the loop.
enum Wake<C> {
    Message(LoopMessage<C>),
    /// Every handle is gone.
    Orphaned,
    Input(Report),
    Deadline,
}

/// Runs the hosted agent as a task of `runtime`, its tools run with `tools`' handlers and
/// its requests sent over `transport`, and returns the first handle on it. `config`
/// resolves `set_state`'s models; `capacity` bounds each subscriber's queue.
pub(crate) fn spawn_agent<C, R, T>(
    runtime: &R,
    transport: T,
    host: Host<C>,
    tools: &[AsyncTool],
    config: omni_core::client::ClientConfig,
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
pub fn spawn_agent_loop<C, R, T>(
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
    let executor = Executor::new(runtime.clone(), transport, handlers_by_name(tools));
    // Detached: the loop ends on its own once every handle is gone.
    runtime.spawn(drive_agent(host, executor, received))?.detach();
    Ok(commands)
}

/// Runs the agent until its last handle is gone. Leaving the loop drops the executor,
/// which stops whatever still runs.
async fn drive_agent<C, R, T>(mut host: Host<C>, mut executor: Executor<R, T>, commands: Receiver<LoopMessage<C>>)
where
    C: AgentCallbacks + Send + 'static,
    R: Runtime,
    T: Transport,
{
    let runtime = executor.runtime().clone();
    let mut budget = INPUT_BUDGET;
    loop {
        while let Some(effect) = host.poll_effect() {
            executor.execute(effect);
        }
        host.publish();
        let deadline = host.agent().poll_timeout().map(|(at, _)| at);
        let now = runtime.now();
        if deadline.is_some_and(|d| d <= now) {
            host.agent().handle_timeout(now);
            continue;
        }
        if budget == 0 {
            budget = INPUT_BUDGET;
            future::yield_now().await;
        }
        budget -= 1;
        let command = async {
            match commands.recv().await {
                Ok(message) => Wake::Message(message),
                Err(_) => Wake::Orphaned,
            }
        };
        let input = async { Wake::Input(executor.next_report().await) };
        let timer = async {
            sleep_until(&runtime, deadline).await;
            Wake::Deadline
        };
        // Commands first, then an input, then the deadline.
        match future::or(command, future::or(input, timer)).await {
            Wake::Message(LoopMessage::Command(command)) => host.apply(command, runtime.now()),
            Wake::Message(LoopMessage::SetState { patch, tools, reply }) => {
                // The new tools' handlers are swapped in only if the machine takes the patch.
                let accepted = host.agent().handle_input(AgentInput::SetState(patch), runtime.now());
                if let (Ok(()), Some(tools)) = (&accepted, tools) {
                    executor.set_tools(&tools);
                }
                let _ = reply.try_send(accepted);
            }
            Wake::Orphaned => {
                // Cancels through effects, calls `terminate`, lets the subscribers go.
                host.terminate(runtime.now());
                while let Some(effect) = host.poll_effect() {
                    executor.execute(effect);
                }
                return; // dropping the executor stops whatever still runs
            }
            Wake::Input(report) => executor.feed(host.agent(), report),
            Wake::Deadline => host.agent().handle_timeout(runtime.now()),
        }
    }
}
