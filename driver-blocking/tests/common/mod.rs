//! omni-blocking as the shared suites drive it (omni_conformance::http_suite): one
//! implementation for every test file that runs them.

use omni_blocking::{AgentEvent, Client, GenerateEvent, Options};
use omni_conformance::http_suite::{turn_ended, Events, Setup, StreamingDriver};
use omni_conformance::scenarios;

/// The driver under test.
pub struct Driver;

impl Driver {
    pub fn new() -> Self {
        Driver
    }
}
impl StreamingDriver for Driver {
    type Client = Client;

    fn client(&self, setup: &Setup) -> Client {
        setup.apply(Client::builder()).build().expect("client")
    }

    fn stream(&self, client: &Client) -> Vec<GenerateEvent> {
        client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream").collect()
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
}
