//! The agent's thread: commands and thread reports in on one channel, effects executed,
//! events published, deadlines kept. No decisions are taken here.
//!
//! ```text
//!  request threads ──┐
//!  tool threads ─────┼─► inputs channel ─► agent loop (Host) ──► subscribers' bounded queues
//!  Agent handles ────┘   recv_timeout(deadline)    └──► effects: start/cancel requests and tools
//!  (commands; the last one's Drop sends HandlesGone)
//! ```
//!
//! The executor holds a sender of the inputs channel for its threads, so the channel
//! cannot tell the loop that the handles are gone: the handles share one `Arc` whose
//! `Drop` (run by the last handle) sends [`LoopInput::HandlesGone`].

use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::Instant;

use omni_core::agent::{AgentCallbacks, AgentError, AgentInput, Command, Host, Reply, StatePatch};

use crate::executor::{wait, Executor, TaskReport, Tools, Wake};
use crate::tools::Tool;
use crate::transport::Http;

/// What the loop waits for.
pub(crate) enum LoopInput<C> {
    /// A request or tool thread reports.
    Task(TaskReport),
    /// A handle's call.
    Command(Command<C>),
    /// `set_state`, whose new tools are swapped in only if the machine accepts it.
    SetState { patch: Box<StatePatch>, tools: Option<Vec<Tool>>, reply: Reply<Result<(), AgentError>> },
    /// The last handle was dropped: stop.
    HandlesGone,
}

impl<C> From<TaskReport> for LoopInput<C> {
    fn from(report: TaskReport) -> Self {
        LoopInput::Task(report)
    }
}

/// Starts the agent's loop on its own thread; returns the sender for the handles and
/// the thread's id (a handle called on it refuses rather than waits for itself).
pub(crate) fn spawn<C: AgentCallbacks + Send + 'static>(
    host: Host<C>,
    http: Http,
    tools: Vec<Tool>,
) -> io::Result<(Sender<LoopInput<C>>, thread::ThreadId)> {
    let (commands, inputs) = mpsc::channel();
    let executor = Executor::new(http, commands.clone());
    let thread =
        thread::Builder::new().name("omni-agent".into()).spawn(move || run(host, executor, by_name(tools), inputs))?;
    Ok((commands, thread.thread().id()))
}

fn by_name(tools: Vec<Tool>) -> Tools {
    tools.into_iter().map(|tool| (tool.name().to_string(), tool)).collect()
}

fn run<C: AgentCallbacks + 'static>(
    mut host: Host<C>,
    mut executor: Executor<LoopInput<C>>,
    mut tools: Tools,
    inputs: Receiver<LoopInput<C>>,
) {
    loop {
        executor.drain(host.agent(), &tools);
        host.publish();
        let wake = wait(&inputs, host.agent().poll_timeout());
        let now = Instant::now();
        match wake {
            Wake::Input(LoopInput::Task(report)) => executor.feed(host.agent(), report, now),
            Wake::Input(LoopInput::Command(command)) => host.apply(command, now),
            Wake::Input(LoopInput::SetState { patch, tools: new_tools, reply }) => {
                let accepted = host.agent().handle_input(AgentInput::SetState(patch), now);
                if let (Ok(()), Some(new_tools)) = (&accepted, new_tools) {
                    tools = by_name(new_tools);
                }
                reply(accepted);
            }
            Wake::Deadline => host.agent().handle_timeout(now),
            // The loop holds a sender itself, so `Disconnected` cannot happen; treated alike.
            Wake::Input(LoopInput::HandlesGone) | Wake::Disconnected => {
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
