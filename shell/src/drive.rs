//! The drive loop, written once: execute a machine's effects, hand its events to the
//! application, feed what the work in flight reports, wake at the next deadline. No
//! decision about the machine is taken here; a driver only says how to run work, sleep
//! and send a request ([`Runtime`], [`Transport`]).
//!
//! The order of every pass, the same for every machine:
//!
//! 1. every effect is executed before anything else is fed (the machines assert it);
//! 2. the machine's events go to the application, without waiting on it;
//! 3. a machine that is finished ends the loop, its work stopped;
//! 4. an application that is gone is told to the machine (it cancels its work);
//! 5. a deadline that has passed is acted on, before any input: a flood of input
//!    (keep-alives as fast as the server can send) cannot hold off a stall or a timeout;
//! 6. after [`INPUT_BUDGET`] wake-ups in a row the loop yields to its runtime, so a flood
//!    cannot hold a runtime thread;
//! 7. the loop waits, looking first at the application, then at the next input, then at
//!    the deadline.
//!
//! Steps 1, 5 and 6 are [`execute_effects`] and [`Pacing::before_wait`], shared by the
//! two loops built on them: an agent's, a task of its own ([`drive`], with its handles
//! and subscribers as the [`Side`], `drive_agent`), and a call's, run by the
//! application's own poll of its stream (`drive_call`), where the events are produced
//! on the thread that reads them.

use std::time::Instant;

use futures_lite::future;

use crate::delivery::INPUT_BUDGET;
use crate::executor::{Executor, Report};
use crate::machine::Machine;
use crate::runtime::{Runtime, Transport};

/// What the application tells a loop, besides inputs and deadlines.
pub(crate) enum Notice<C> {
    /// A handle's command.
    Command(C),
    /// The application is gone (its last handle was dropped).
    Gone,
}

/// Step 1: every effect the machine has, executed.
pub(crate) fn execute_effects<M: Machine, R: Runtime, T: Transport>(machine: &mut M, executor: &mut Executor<R, T>) {
    while let Some(effect) = machine.poll_effect() {
        executor.execute(effect);
    }
}

/// What a loop does once the machine's events are out, before it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// A deadline had passed and was acted on: pass again.
    Again,
    /// The budget of wake-ups is spent: yield to the runtime, then pass again.
    Yield,
    /// Wait for the application, an input or this deadline.
    Wait(Option<Instant>),
}

/// Steps 5 and 6, with the count of wake-ups since the loop last yielded.
#[derive(Debug)]
pub(crate) struct Pacing {
    budget: usize,
}

impl Pacing {
    pub(crate) fn new() -> Self {
        Self { budget: INPUT_BUDGET }
    }

    /// Acts on a deadline that has passed, or counts one more wake-up against the budget.
    pub(crate) fn before_wait<M: Machine>(&mut self, machine: &mut M, now: Instant) -> Next {
        let deadline = machine.poll_timeout().map(|(at, _)| at);
        let next = self.next(deadline, now);
        if next == Next::Again {
            machine.handle_timeout(now);
        }
        next
    }

    /// [`before_wait`](Self::before_wait) for a machine outside the [`Machine`] contract
    /// (an MCP connection's): `Again` says `deadline` has passed, and the caller acts on
    /// it.
    pub(crate) fn next(&mut self, deadline: Option<Instant>, now: Instant) -> Next {
        if deadline.is_some_and(|d| d <= now) {
            return Next::Again;
        }
        if self.budget == 0 {
            self.budget = INPUT_BUDGET;
            return Next::Yield;
        }
        self.budget -= 1;
        Next::Wait(deadline)
    }
}

/// The application's side of an agent's loop, holding the machine it drives: where the
/// machine's events go, what else wakes the loop, and what the application's going away
/// means.
pub(crate) trait Side {
    /// The machine driven.
    type Machine: Machine;
    /// What the application's handles send the loop.
    type Command;

    /// The machine, for its effects, reports and deadlines.
    fn machine(&mut self) -> &mut Self::Machine;

    /// Hands the machine's new events to the application without waiting on it.
    fn deliver(&mut self);

    /// Waits for the application. Cancel-safe: the loop drops this future when it wakes
    /// for something else, and nothing may be lost then.
    async fn wait(&mut self) -> Notice<Self::Command>;

    /// Applies a handle's command (`executor` for what changes the work: new tools).
    fn apply<R: Runtime, T: Transport>(&mut self, command: Self::Command, executor: &mut Executor<R, T>, now: Instant);

    /// The application is gone: the machine stops, its cancels coming out as effects.
    fn gone(&mut self, now: Instant);

    /// Just before an input is fed: what must reach the machine ahead of it (an MCP
    /// server's new tool list, announced before the tool's answer that caused it, goes
    /// in before that answer whichever woke the loop first).
    fn before_input<R: Runtime, T: Transport>(&mut self, executor: &mut Executor<R, T>, now: Instant) {
        let _ = (executor, now);
    }

    /// Whether the loop is over.
    fn finished(&mut self) -> bool;
}

/// What woke the loop.
enum Wake<C> {
    Application(Notice<C>),
    Input(Report),
    Deadline,
}

/// Drives `side`'s machine to its end with `executor`'s work, as a task of its own.
/// Leaving the loop drops the executor, which stops whatever still runs.
// Not an `async fn`: its arguments would be kept twice in the future (once as arguments,
// once as the locals they move into), and a session's side is several KiB, held by every
// idle session of a process. An `async move` block uses what it captured in place.
#[allow(clippy::manual_async_fn)]
pub(crate) fn drive<S: Side, R: Runtime, T: Transport>(
    mut side: S,
    mut executor: Executor<R, T>,
) -> impl std::future::Future<Output = ()> {
    async move {
        let runtime = executor.runtime().clone();
        let mut pacing = Pacing::new();
        loop {
            execute_effects(side.machine(), &mut executor);
            side.deliver();
            if side.finished() {
                return;
            }
            let deadline = match pacing.before_wait(side.machine(), runtime.now()) {
                Next::Again => continue,
                Next::Yield => {
                    future::yield_now().await;
                    continue;
                }
                Next::Wait(deadline) => deadline,
            };
            let application = async { Wake::Application(side.wait().await) };
            // The tool runs (polled by this loop) go on while it waits for a report.
            let input = async { Wake::Input(executor.next_report().await) };
            let timer = async {
                sleep_until(&runtime, deadline).await;
                Wake::Deadline
            };
            // The application first, then an input, then the deadline (an input that is there
            // when the loop wakes goes before the deadline; the check above then comes between
            // it and the next one).
            match future::or(application, future::or(input, timer)).await {
                Wake::Application(Notice::Command(command)) => side.apply(command, &mut executor, runtime.now()),
                Wake::Application(Notice::Gone) => side.gone(runtime.now()),
                Wake::Input(report) => {
                    side.before_input(&mut executor, runtime.now());
                    executor.feed(side.machine(), report);
                }
                Wake::Deadline => side.machine().handle_timeout(runtime.now()),
            }
        }
    }
}

/// Resolves at the deadline; never without one.
pub(crate) async fn sleep_until<R: Runtime>(runtime: &R, deadline: Option<Instant>) {
    match deadline {
        Some(at) => runtime.sleep_until(at).await,
        None => future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use crate::Runtime;
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use bytes::Bytes;
    use omni_protocol::agent::{Agent, AgentConfig, AgentError, NoCallbacks};
    use omni_protocol::{dialect::HttpRequest, Dialect, Model, Provider};

    use crate::agent::LoopMessage;
    use crate::drive_agent::spawn_agent_loop;
    use crate::runtime::{ResponseSink, Transport};
    use crate::threads::{within, Threads};
    use crate::{Command, Host};

    /// Answers every request with a head, then keep-alive comments as fast as the loop
    /// takes them, in chunks that cost the loop far more to read than they cost to send:
    /// its input channel is never empty.
    #[derive(Debug, Clone, Default)]
    struct Flood {
        chunks: Arc<AtomicUsize>,
        /// Set when a request's future is dropped (stopped).
        stopped: Arc<AtomicBool>,
    }

    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl Transport for Flood {
        fn send(&self, _request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
            let (chunks, stopped) = (self.chunks.clone(), self.stopped.clone());
            let chunk = Bytes::from(": keep-alive\n\n".repeat(16 * 1024));
            async move {
                let _stopped = SetOnDrop(stopped);
                let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
                if !sink.head(200, headers).await {
                    return;
                }
                while sink.body(chunk.clone()).await {
                    chunks.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    /// Sends `command` (made with its reply) to the agent and waits for the answer.
    fn ask<T: Send + 'static>(
        commands: &async_channel::Sender<LoopMessage<NoCallbacks>>,
        command: impl FnOnce(crate::Reply<T>) -> Command<NoCallbacks>,
    ) -> T {
        let (reply, answer) = async_channel::bounded(1);
        let reply: crate::Reply<T> = Box::new(move |value| drop(reply.try_send(value)));
        let message = LoopMessage::Command(command(reply));
        within(async {
            commands.send(message).await.expect("the loop runs");
            answer.recv().await.expect("an answer")
        })
    }

    #[test]
    fn a_handles_command_gets_through_a_flood_of_input() {
        let model = Model::new("local", "m", Dialect::OpenaiCompletions);
        let provider = Provider::openai_compatible("local", "http://127.0.0.1:9/v1", None);
        let config = AgentConfig { max_response_bytes: u64::MAX, ..AgentConfig::new(model, provider) };
        let agent = Agent::new(config, NoCallbacks, Threads.now()).expect("agent");
        let flood = Flood::default();
        let commands = spawn_agent_loop(&Threads, flood.clone(), Host::new(agent), &[]).expect("started");
        let prompted: Result<(), AgentError> = ask(&commands, |reply| Command::Prompt("hi".into(), reply));
        prompted.expect("prompt taken");
        within(async {
            while flood.chunks.load(Ordering::SeqCst) < 64 {
                futures_lite::future::yield_now().await;
            }
        });
        // The loop's input channel is full and stays full: only a loop that looks at the
        // handles before its input answers the cancel (the stall limit is minutes away).
        let cancelled: Result<(), AgentError> = ask(&commands, Command::Cancel);
        cancelled.expect("cancel taken");
        within(async {
            while !flood.stopped.load(Ordering::SeqCst) {
                futures_lite::future::yield_now().await;
            }
        });
    }
}
