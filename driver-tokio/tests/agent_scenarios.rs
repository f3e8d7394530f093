//! Every agent scenario through the tokio Agent handle against the loopback replay
//! server: the transcript must equal the simulation's, file for file (see
//! `omni_conformance::agent_drive`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Duration;

use omni_conformance::agent_drive::{
    check_callbacks, configure, refusal, run_agent_scenario, state_change, AgentDriver,
};
use omni_conformance::agent_scenarios::{self, NamedAgentScenario};
use omni_conformance::agent_sim::{Action, ScriptedCallbacks};
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::scripted_async_tool;
use omni_protocol::agent::{AgentError, AgentEvent, Snapshot};
use omni_tokio::{Agent, Client, Subscription};

struct TokioAgent {
    runtime: tokio::runtime::Runtime,
    agent: Agent<ScriptedCallbacks>,
    events: Subscription,
    late: Option<(Snapshot, Subscription)>,
}

impl AgentDriver for TokioAgent {
    fn perform(&mut self, action: Action) -> Result<(), AgentError> {
        let agent = &self.agent;
        self.runtime.block_on(async {
            match action {
                Action::Prompt(text) => refusal(agent.prompt(text).await),
                Action::PromptWith(prompt) => refusal(agent.prompt_with(*prompt).await),
                Action::Resume(decision) => refusal(agent.resume(decision).await),
                Action::Cancel => refusal(agent.cancel().await),
                Action::SetState(patch) => refusal(agent.set_state(state_change(&patch)).await),
                Action::Subscribe => {
                    let late = agent.subscribe().await.map_err(|e| panic!("subscribe: {e}"))?;
                    self.late = Some(late);
                    Ok(())
                }
            }
        })
    }

    fn next_event(&mut self, limit: Duration) -> Option<AgentEvent> {
        self.runtime.block_on(async { tokio::time::timeout(limit, self.events.next_event()).await.ok().flatten() })
    }

    fn late(&mut self, limit: Duration) -> Option<(Snapshot, Vec<AgentEvent>)> {
        let (snapshot, mut events) = self.late.take()?;
        let mut seen = Vec::new();
        self.runtime.block_on(async {
            while let Ok(Some(event)) = tokio::time::timeout(limit, events.next_event()).await {
                seen.push(event);
            }
        });
        Some((snapshot, seen))
    }
}

fn run(named: NamedAgentScenario) -> Result<(), String> {
    let server = ReplayServer::start(named.scenario.replies.clone()).expect("replay server");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let config = &named.config;
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .retry(config.retry)
        .stall_timeout(config.stall_timeout)
        .build()
        .expect("client");
    let tools = config
        .tools
        .iter()
        .map(|decl| scripted_async_tool(decl, named.scenario.tools.get(&decl.spec.name).cloned(), tokio::time::sleep));
    let builder = configure(client.agent(config.model.clone()), &named, tools);
    let agent = {
        let _entered = runtime.enter();
        builder.start().map_err(|e| format!("{}: start: {e}", named.name))?
    };
    let (_, events) = runtime.block_on(agent.subscribe()).expect("subscribe");
    let mut driver = TokioAgent { runtime, agent, events, late: None };
    run_agent_scenario(&named, &mut driver, &server)?;
    // The application goes away: the agent calls `terminate`, and its callbacks, `init`
    // to `terminate`, are the simulation's. The runtime stays until then (dropping it
    // first would stop the agent's task without a word).
    let TokioAgent { runtime, agent, events, late } = driver;
    drop((agent, events, late));
    let checked = check_callbacks(&named);
    drop(runtime);
    checked
}

#[test]
fn every_agent_scenario_matches_the_simulation() {
    // Each scenario on its own thread and runtime: they mostly wait.
    let runs: Vec<_> = agent_scenarios::all().into_iter().map(|named| std::thread::spawn(move || run(named))).collect();
    let failures: Vec<String> = runs.into_iter().filter_map(|run| run.join().expect("no panic").err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
