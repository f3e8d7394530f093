//! The drive loop, written once for every machine and every runtime: execute the
//! machine's effects, hand its events to the application, feed what the work in flight
//! reports, wake at the next deadline. No decision about the machine is taken here; a
//! driver only says how to run work, sleep and send a request ([`Runtime`],
//! [`Transport`]), and a [`Side`] says what is on the application's side of the machine:
//! a call's event stream ([`crate::drive_call`]) or an agent's handles and subscribers
//! ([`crate::drive_agent`]).
//!
//! The order of every pass, the same for every machine:
//!
//! 1. every effect is executed before anything else is fed (the machines assert it);
//! 2. the machine's events go to the application, without waiting on it;
//! 3. a machine that is finished ends the loop: its work is stopped first, then the last
//!    events wait until the application reads them;
//! 4. an application that is gone is told to the machine (it cancels its work);
//! 5. a deadline that has passed is acted on, before any input: a flood of input
//!    (keep-alives as fast as the server can send) cannot hold off a stall or a timeout;
//! 6. after [`INPUT_BUDGET`] wake-ups in a row the loop yields to its runtime, so a flood
//!    cannot hold a runtime thread;
//! 7. the loop waits, looking first at the application (a handle's command, a dropped
//!    stream, room in a full event queue), then at the next input (unless the
//!    application's event queue is full: then no input is taken and the request stops
//!    reading, but tool runs go on, and a deadline or the application still gets in),
//!    then at the deadline.

use std::time::Instant;

use futures_lite::future;

use crate::delivery::{Delivery, INPUT_BUDGET};
use crate::executor::{Executor, Report};
use crate::machine::Machine;
use crate::runtime::{Runtime, Transport};

/// What the application tells a loop, besides inputs and deadlines.
pub(crate) enum Notice<C> {
    /// A handle's command.
    Command(C),
    /// The application read: events held back may go out again.
    Room,
    /// The application is gone (its stream or its last handle was dropped).
    Gone,
}

/// The application's side of a drive loop, holding the machine it drives: where the
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
    /// [`Delivery::Full`] stops input until [`Side::wait`] gives [`Notice::Room`].
    fn deliver(&mut self) -> Delivery;

    /// Waits for the application. Cancel-safe: the loop drops this future when it wakes
    /// for something else, and nothing may be lost then.
    async fn wait(&mut self) -> Notice<Self::Command>;

    /// Applies a handle's command (`executor` for what changes the work: new tools).
    fn apply<R: Runtime, T: Transport>(&mut self, command: Self::Command, executor: &mut Executor<R, T>, now: Instant);

    /// The application is gone: the machine stops, its cancels coming out as effects.
    fn gone(&mut self, now: Instant);

    /// Whether the loop is over.
    fn finished(&mut self) -> bool;

    /// The end, once the work is stopped: the last events, whenever the application
    /// reads them.
    async fn close(self);
}

/// What woke the loop.
enum Wake<C> {
    Application(Notice<C>),
    Input(Report),
    Deadline,
}

/// Drives `side`'s machine to its end with `executor`'s work. Leaving the loop drops the
/// executor, which stops whatever still runs.
pub(crate) async fn drive<S: Side, R: Runtime, T: Transport>(mut side: S, mut executor: Executor<R, T>) {
    let runtime = executor.runtime().clone();
    let mut budget = INPUT_BUDGET;
    loop {
        while let Some(effect) = side.machine().poll_effect() {
            executor.execute(effect);
        }
        let delivery = side.deliver();
        if side.finished() {
            drop(executor); // stops whatever still runs
            side.close().await;
            return;
        }
        if delivery == Delivery::Gone {
            side.gone(runtime.now());
            continue;
        }
        let deadline = side.machine().poll_timeout().map(|(at, _)| at);
        let now = runtime.now();
        if deadline.is_some_and(|d| d <= now) {
            side.machine().handle_timeout(now);
            continue;
        }
        if budget == 0 {
            budget = INPUT_BUDGET;
            future::yield_now().await;
        }
        budget -= 1;
        let application = async { Wake::Application(side.wait().await) };
        let input = async {
            if delivery == Delivery::Full {
                // No input is taken, but the tool runs (polled by this loop) go on.
                match executor.run_tools().await {}
            } else {
                Wake::Input(executor.next_report().await)
            }
        };
        let timer = async {
            sleep_until(&runtime, deadline).await;
            Wake::Deadline
        };
        // The application first, then an input, then the deadline (an input that is there
        // when the loop wakes goes before the deadline; the check above then comes between
        // it and the next one).
        match future::or(application, future::or(input, timer)).await {
            Wake::Application(Notice::Command(command)) => side.apply(command, &mut executor, runtime.now()),
            Wake::Application(Notice::Room) => {}
            Wake::Application(Notice::Gone) => side.gone(runtime.now()),
            Wake::Input(report) => executor.feed(side.machine(), report),
            Wake::Deadline => side.machine().handle_timeout(runtime.now()),
        }
    }
}

/// Resolves at the deadline; never without one.
async fn sleep_until<R: Runtime>(runtime: &R, deadline: Option<Instant>) {
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
    use omni_core::machines::agent::{Agent, AgentConfig, AgentError, NoCallbacks};
    use omni_core::{Dialect, HttpRequest, Model, Provider};

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
