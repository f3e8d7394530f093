//! omni-tokio as the shared suites drive it (omni_conformance::http_suite): one
//! implementation for every test file that runs them.

use omni_conformance::http_suite::{turn_ended, Events, Setup, StreamingDriver, TestTool};
use omni_conformance::scenarios;
use omni_tokio::{AgentEvent, Client, Error, GenerateEvent, ModelRef, Options, TextStream, Tool, ToolError};

/// One runtime for every call: reqwest's pool lives in it between calls.
pub(crate) struct Driver(tokio::runtime::Runtime);

impl Driver {
    pub(crate) fn new() -> Self {
        Self(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime"))
    }
}

impl StreamingDriver for Driver {
    type Client = Client;

    fn client(&self, setup: &Setup) -> Client {
        let _entered = self.0.enter();
        setup.apply(Client::builder()).build().expect("client")
    }

    fn stream_model(&self, client: &Client, model: ModelRef) -> Vec<GenerateEvent> {
        let _entered = self.0.enter();
        let mut stream = client.stream_text(model, "hi").expect("stream");
        self.0.block_on(collect(&mut stream))
    }

    fn open(&self, client: &Client) -> Events {
        let _entered = self.0.enter();
        let mut stream = client.stream_text(scenarios::model(), "hi").expect("stream");
        let runtime = self.0.handle().clone();
        Box::new(std::iter::from_fn(move || runtime.block_on(next(&mut stream))))
    }

    fn agent_turn(&self, client: &Client) -> Vec<AgentEvent> {
        self.0.block_on(async {
            let agent = client.agent(scenarios::model()).start().expect("agent");
            let (_, mut subscription) = agent.subscribe().await.expect("subscribe");
            agent.prompt("hi").await.expect("prompt");
            let mut events = Vec::new();
            while let Some(event) = subscription.next_event().await {
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
        let _entered = self.0.enter();
        let mut call = client.call(scenarios::model(), "hi").options(options);
        for tool in tools {
            let (answer, hangs) = (tool.answer, tool.own_timeout.is_some());
            let handler = Tool::new(tool.name, answer, TestTool::schema(), move |_| async move {
                if hangs {
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
                Ok::<_, ToolError>(answer)
            });
            call = call.tool(match tool.own_timeout {
                Some(limit) => handler.timeout(limit),
                None => handler,
            });
        }
        let mut stream = call.stream()?;
        Ok(self.0.block_on(collect(&mut stream)))
    }
}

async fn next(stream: &mut TextStream) -> Option<GenerateEvent> {
    std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut *stream), cx)).await
}

async fn collect(stream: &mut TextStream) -> Vec<GenerateEvent> {
    let mut events = Vec::new();
    while let Some(event) = next(stream).await {
        events.push(event);
    }
    events
}
