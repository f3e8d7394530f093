//! omni-smol as the shared suites drive it (omni_conformance::http_suite): one
//! implementation for every test file that runs them.

use omni_conformance::http_suite::{turn_ended, Events, Setup, StreamingDriver, TestTool};
use omni_conformance::scenarios;
use omni_smol::{AgentEvent, Client, Error, GenerateEvent, Options, Tool, ToolError};
use smol::stream::StreamExt;

/// The driver under test.
pub(crate) struct Driver;

impl Driver {
    pub(crate) fn new() -> Self {
        Self
    }
}
impl StreamingDriver for Driver {
    type Client = Client;

    fn client(&self, setup: &Setup) -> Client {
        setup.apply(Client::builder()).build().expect("client")
    }

    fn stream_model(&self, client: &Client, model: omni_smol::ModelRef) -> Vec<GenerateEvent> {
        let stream = client.stream_text(model, "hi").expect("stream");
        smol::block_on(stream.collect())
    }

    fn open(&self, client: &Client) -> Events {
        let mut stream = client.stream_text(scenarios::model(), "hi").expect("stream");
        Box::new(std::iter::from_fn(move || smol::block_on(stream.next())))
    }

    fn agent_turn(&self, client: &Client) -> Vec<AgentEvent> {
        smol::block_on(async {
            let agent = client.agent(scenarios::model()).start().expect("agent");
            let (_, mut subscription) = agent.subscribe().await.expect("subscribe");
            agent.prompt("hi").await.expect("prompt");
            let mut events = Vec::new();
            while let Some(event) = subscription.next().await {
                let end = turn_ended(&event);
                events.push(event);
                if end {
                    break;
                }
            }
            events
        })
    }

    fn try_stream(&self, client: &Client, options: Options, tools: &[TestTool]) -> Result<Vec<GenerateEvent>, Error> {
        let mut call = client.call(scenarios::model(), "hi").options(options);
        for tool in tools {
            let (answer, hangs) = (tool.answer, tool.own_timeout.is_some());
            let handler = Tool::new(tool.name, answer, TestTool::schema(), move |_| async move {
                if hangs {
                    smol::Timer::after(std::time::Duration::from_secs(3600)).await;
                }
                Ok::<_, ToolError>(answer)
            });
            call = call.tool(match tool.own_timeout {
                Some(limit) => handler.timeout(limit),
                None => handler,
            });
        }
        Ok(smol::block_on(call.stream()?.collect()))
    }
}
