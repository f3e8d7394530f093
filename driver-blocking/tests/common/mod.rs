//! omni-blocking as the shared suites drive it (omni_conformance::http_suite): one
//! implementation for every test file that runs them.

use omni_blocking::{AgentEvent, Client, Error, GenerateEvent, Options, Tool};
use omni_conformance::http_suite::{turn_ended, Events, Setup, StreamingDriver, TestTool};
use omni_conformance::scenarios;

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

    fn stream_model(&self, client: &Client, model: omni_blocking::ModelRef) -> Vec<GenerateEvent> {
        client.stream_text(model, "hi").expect("stream").collect()
    }

    fn open(&self, client: &Client) -> Events {
        Box::new(client.stream_text(scenarios::model(), "hi").expect("stream"))
    }

    fn agent_turn(&self, client: &Client) -> Vec<AgentEvent> {
        let agent = client.agent(scenarios::model()).start().expect("agent");
        let (_, subscription) = agent.subscribe().expect("subscribe");
        agent.prompt("hi").expect("prompt");
        let mut events = Vec::new();
        for event in subscription {
            let end = turn_ended(&event);
            events.push(event);
            if end {
                break;
            }
        }
        events
    }

    fn try_stream(&self, client: &Client, options: Options, tools: &[TestTool]) -> Result<Vec<GenerateEvent>, Error> {
        let mut call = client.call(scenarios::model(), "hi").options(options);
        for tool in tools {
            let (answer, hangs) = (tool.answer, tool.own_timeout.is_some());
            let handler = Tool::new(tool.name, answer, TestTool::schema(), move |_| {
                if hangs {
                    omni_blocking::CancelToken::current().sleep(std::time::Duration::from_secs(3600));
                }
                Ok::<_, omni_blocking::ToolError>(answer)
            });
            call = call.tool(match tool.own_timeout {
                Some(limit) => handler.timeout(limit),
                None => handler,
            });
        }
        Ok(call.stream()?.collect())
    }
}
