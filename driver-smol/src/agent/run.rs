//! The agent's task: commands in, effects executed, events published, deadlines kept.
//! No decisions are taken here. Deadlines are looked at before every input, so a flood
//! cannot hold off a stall or a timeout; subscribers' queues are bounded (a subscriber
//! that falls behind is dropped), so publishing never waits.

use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use omni_async::delivery::INPUT_BUDGET;
use omni_async::LoopMessage;
use omni_core::agent::{AgentCallbacks, AgentInput, Host};
use omni_core::async_tool::handlers_by_name;
use smol::channel::Receiver;

use crate::executor::{input_or_deadline, Executor, Handlers};
use crate::http::Connections;
use crate::spawn::Spawner;

/// What woke the task.
enum Wake<C> {
    Message(LoopMessage<C>),
    /// Every handle is gone.
    Orphaned,
    Input(crate::http::TaskInput),
    Deadline,
}

pub(crate) async fn run<C: AgentCallbacks + Send + 'static>(
    mut host: Host<C>,
    http: Arc<Connections>,
    spawner: Spawner,
    mut handlers: Handlers,
    commands: Receiver<LoopMessage<C>>,
) {
    let (mut executor, inputs) = Executor::new(http, spawner);
    let mut budget = INPUT_BUDGET;
    loop {
        while let Some(effect) = host.poll_effect() {
            executor.execute(effect, &handlers);
        }
        host.publish();
        let deadline = host.agent().poll_timeout().map(|(at, _)| at);
        let now = Instant::now();
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
        let other = async {
            match input_or_deadline(&inputs, deadline).await {
                Some(input) => Wake::Input(input),
                None => Wake::Deadline,
            }
        };
        // Commands are looked at first.
        match future::or(command, other).await {
            Wake::Message(LoopMessage::Command(command)) => host.apply(command, Instant::now()),
            Wake::Message(LoopMessage::SetState { patch, tools, reply }) => {
                let accepted = host.agent().handle_input(AgentInput::SetState(patch), Instant::now());
                if let (Ok(()), Some(tools)) = (&accepted, tools) {
                    handlers = handlers_by_name(&tools);
                }
                let _ = reply.try_send(accepted);
            }
            Wake::Orphaned => {
                host.terminate(Instant::now());
                while let Some(effect) = host.poll_effect() {
                    executor.execute(effect, &handlers);
                }
                return; // dropping the executor cancels whatever still runs
            }
            Wake::Input(input) => executor.feed(host.agent(), input),
            Wake::Deadline => host.agent().handle_timeout(Instant::now()),
        }
    }
}
