//! omni-blocking as the shared suites drive it (omni_conformance::http_suite): one
//! implementation for every test file that runs them.

use omni_blocking::{AgentEvent, Client, Error, GenerateEvent, Model, Options, Tool};
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

    fn stream_model(&self, client: &Client, model: Model) -> Vec<GenerateEvent> {
        client.stream_text(model, "hi", Options::default()).expect("stream").collect()
    }

    fn open(&self, client: &Client) -> Events {
        Box::new(client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream"))
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
            let answer = tool.answer;
            call = call.tool(Tool::new(tool.name, answer, TestTool::schema(), move |_| {
                Ok::<_, omni_blocking::ToolError>(answer)
            }));
        }
        Ok(call.stream()?.collect())
    }
}
