//! The agent's thread: commands and thread reports in, effects executed, events
//! published, deadlines kept. No decisions are taken here.
//!
//! ```text
//!  request threads ──┬─► inputs channel (bounded) ───┐
//!  tool threads ─────┘                               ├─► agent loop (Host) ──► subscribers' bounded queues
//!  Agent handles ──────► commands channel (bounded) ─┘        └──► effects: start/cancel requests and tools
//! ```
//!
//! The loop waits for both channels and its next deadline at once ([`wait`]); a deadline
//! that passed is acted on before the next input, so a flood cannot hold it off. Only the
//! handles hold senders of the commands channel, so its closing tells the loop that the
//! last handle is gone. Publishing never waits (a subscriber that falls behind is dropped).

use std::io;
use std::thread;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use omni_core::agent::{AgentCallbacks, AgentError, AgentInput, Command, Host, Reply, StatePatch};
use omni_core::machine::COMMAND_CAPACITY;

use crate::executor::{wait, Executor, Outbox, TaskReport, Tools, Wake};
use crate::tools::Tool;
use crate::transport::Http;

/// What the handles send the loop.
pub(crate) enum LoopInput<C> {
    /// A handle's call.
    Command(Command<C>),
    /// `set_state`, whose new tools are swapped in only if the machine accepts it.
    SetState { patch: Box<StatePatch>, tools: Option<Vec<Tool>>, reply: Reply<Result<(), AgentError>> },
}

/// Starts the agent's loop on its own thread; returns the sender for the handles and
/// the thread's id (a handle called on it refuses rather than waits for itself).
pub(crate) fn spawn<C: AgentCallbacks + Send + 'static>(
    host: Host<C>,
    http: Http,
    tools: Vec<Tool>,
) -> io::Result<(Sender<LoopInput<C>>, thread::ThreadId)> {
    let (commands, received) = crossbeam_channel::bounded(COMMAND_CAPACITY);
    let (executor, inputs) = Executor::new(http);
    let thread = thread::Builder::new()
        .name("omni-agent".into())
        .spawn(move || run(host, executor, by_name(tools), received, inputs))?;
    Ok((commands, thread.thread().id()))
}

fn by_name(tools: Vec<Tool>) -> Tools {
    tools.into_iter().map(|tool| (tool.name().to_string(), tool)).collect()
}

fn run<C: AgentCallbacks + 'static>(
    mut host: Host<C>,
    mut executor: Executor,
    mut tools: Tools,
    commands: Receiver<LoopInput<C>>,
    inputs: Receiver<TaskReport>,
) {
    loop {
        executor.drain(host.agent(), &tools);
        host.publish();
        let wake = wait(&commands, &inputs, None::<&mut Outbox<()>>, host.agent().poll_timeout().map(|(at, _)| at));
        let now = Instant::now();
        match wake {
            Wake::Input(report) => executor.feed(host.agent(), report, now),
            Wake::Control(Some(LoopInput::Command(command))) => host.apply(command, now),
            Wake::Control(Some(LoopInput::SetState { patch, tools: new_tools, reply })) => {
                let accepted = host.agent().handle_input(AgentInput::SetState(patch), now);
                if let (Ok(()), Some(new_tools)) = (&accepted, new_tools) {
                    tools = by_name(new_tools);
                }
                reply(accepted);
            }
            Wake::Deadline => host.agent().handle_timeout(now),
            Wake::Delivered => {}
            // The last handle is gone (nothing else holds a commands sender).
            Wake::Control(None) | Wake::ReaderGone => {
                // Cancels through effects, calls `terminate`, lets the subscribers go.
                host.terminate(now);
                executor.drain(host.agent(), &tools);
                // Dropping the executor stops whatever is still running; dropping the
                // receiver answers later commands (none: no handle is left) with an error.
                return;
            }
        }
    }
}
