//! The agent's task: commands in, effects executed, events published, deadlines kept.
//! No decisions are taken here. Deadlines are looked at before every input, so a flood
//! cannot hold off a stall or a timeout; subscribers' queues are bounded (a subscriber
//! that falls behind is dropped), so publishing never waits.

use std::time::Instant;

use omni_async::delivery::INPUT_BUDGET;
use omni_async::LoopMessage;
use omni_core::agent::{AgentCallbacks, AgentInput, Host};
use omni_core::async_tool::handlers_by_name;

use crate::executor::{sleep_until, Executor, Handlers};

pub(crate) async fn run<C: AgentCallbacks + Send + 'static>(
    mut host: Host<C>,
    http: reqwest::Client,
    mut handlers: Handlers,
    commands: async_channel::Receiver<LoopMessage<C>>,
) {
    let (mut executor, mut inputs) = Executor::new(http);
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
            tokio::task::yield_now().await;
        }
        budget -= 1;
        tokio::select! {
            biased;
            message = commands.recv() => match message {
                Ok(LoopMessage::Command(command)) => host.apply(command, Instant::now()),
                Ok(LoopMessage::SetState { patch, tools, reply }) => {
                    let accepted = host.agent().handle_input(AgentInput::SetState(patch), Instant::now());
                    if let (Ok(()), Some(tools)) = (&accepted, tools) {
                        handlers = handlers_by_name(&tools);
                    }
                    let _ = reply.try_send(accepted);
                }
                Err(_) => {
                    // The last handle is gone.
                    host.terminate(Instant::now());
                    while let Some(effect) = host.poll_effect() {
                        executor.execute(effect, &handlers);
                    }
                    return; // dropping the executor aborts whatever still runs
                }
            },
            Some(input) = inputs.recv() => executor.feed(host.agent(), input),
            _ = sleep_until(deadline), if deadline.is_some() => host.agent().handle_timeout(Instant::now()),
        }
    }
}
