//! Every agent scenario through the blocking Agent handle against the loopback replay
//! server: the transcript must equal the simulation's, file for file (see
//! `omni_conformance::agent_drive`).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets, clocks

use std::time::Duration;

use omni_blocking::{Agent, CancelToken, Client, Subscription, Tool, ToolError, ToolOutput};
use omni_conformance::agent_drive::{
    check_callbacks, configure, refusal, run_agent_scenario, state_change, AgentDriver,
};
use omni_conformance::agent_scenarios::{self, NamedAgentScenario};
use omni_conformance::agent_sim::{Action, ScriptedCallbacks};
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::ToolScript;
use omni_protocol::agent::{AgentError, AgentEvent, Snapshot};
use omni_protocol::generate::{ToolDecl, ToolOutcome};

/// A tool that does what the scenario scripts, as a blocking handler: it sleeps on its
/// run's cancel token, so a cancelled run's thread ends at once.
fn scripted_tool(decl: &ToolDecl, script: Option<ToolScript>) -> Tool {
    let spec = decl.spec.clone();
    if !decl.executable {
        return Tool::schema_only(spec.name, spec.description, spec.input_schema);
    }
    let name = spec.name.clone();
    let tool = Tool::new(spec.name, spec.description, spec.input_schema, move |_input| match &script {
        Some(ToolScript::Answer { delay, outcome }) => {
            CancelToken::current().sleep(*delay);
            match outcome {
                ToolOutcome::Ok(content) => Ok(ToolOutput::content(content.clone())),
                ToolOutcome::Err(m) | ToolOutcome::Panicked(m) => Err(ToolError(m.clone())),
            }
        }
        Some(ToolScript::Hang) => {
            CancelToken::current().sleep(Duration::from_secs(3600));
            Err(ToolError::from("cancelled"))
        }
        None => Err(ToolError(format!("no script for {name}"))),
    });
    match decl.timeout {
        Some(limit) => tool.timeout(limit),
        None => tool,
    }
}

struct BlockingAgent {
    agent: Agent<ScriptedCallbacks>,
    events: Subscription,
    late: Option<(Snapshot, Subscription)>,
}

impl AgentDriver for BlockingAgent {
    fn perform(&mut self, action: Action) -> Result<(), AgentError> {
        let agent = &self.agent;
        match action {
            Action::Prompt(text) => refusal(agent.prompt(text)),
            Action::PromptWith(prompt) => refusal(agent.prompt_with(*prompt)),
            Action::Resume(decision) => refusal(agent.resume(decision)),
            Action::Cancel => refusal(agent.cancel()),
            Action::SetState(patch) => refusal(agent.set_state(state_change(&patch))),
            Action::Subscribe => {
                let late = agent.subscribe().unwrap_or_else(|e| panic!("subscribe: {e}"));
                self.late = Some(late);
                Ok(())
            }
        }
    }

    fn next_event(&mut self, limit: Duration) -> Option<AgentEvent> {
        self.events.recv_timeout(limit).ok()
    }

    fn late(&mut self, limit: Duration) -> Option<(Snapshot, Vec<AgentEvent>)> {
        let (snapshot, events) = self.late.take()?;
        let seen = std::iter::from_fn(|| events.recv_timeout(limit).ok()).collect();
        Some((snapshot, seen))
    }
}

fn run(named: NamedAgentScenario) -> Result<(), String> {
    let server = ReplayServer::start(named.scenario.replies.clone()).expect("replay server");
    let config = &named.config;
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .retry(config.retry)
        .stall_timeout(config.stall_timeout)
        .build()
        .expect("client");
    let tools = config.tools.iter().map(|decl| scripted_tool(decl, named.scenario.tools.get(&decl.spec.name).cloned()));
    let builder = configure(client.agent(config.model.clone()), &named, tools);
    let agent = builder.start().map_err(|e| format!("{}: start: {e}", named.name))?;
    let (_, events) = agent.subscribe().expect("subscribe");
    let mut driver = BlockingAgent { agent, events, late: None };
    run_agent_scenario(&named, &mut driver, &server)?;
    // The application goes away: the agent calls `terminate`, and its callbacks, `init`
    // to `terminate`, are the simulation's.
    drop(driver);
    check_callbacks(&named)
}

#[test]
fn every_agent_scenario_matches_the_simulation() {
    // Each scenario on its own thread: they mostly wait.
    let runs: Vec<_> = agent_scenarios::all().into_iter().map(|named| std::thread::spawn(move || run(named))).collect();
    let failures: Vec<String> = runs.into_iter().filter_map(|run| run.join().expect("no panic").err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
