//! An autonomous research agent: it searches a small offline library, asks you on the
//! terminal before it fetches a page, keeps going turn after turn until it calls its
//! `complete` tool, then prints its findings.
//!
//! With a provider key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY,
//! GEMINI_API_KEY) it talks to that provider; with none, the embedded replay server
//! plays a recorded session through the real HTTP stack. `--yes` approves every fetch
//! without asking; without a terminal and without `--yes`, fetches are declined.
//!
//! ```text
//! cargo run -p omni-tokio --example research_agent -- "heat pumps in cold climates"
//! ```
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Write;

use omni_testkit::{MockProvider, Turn};
use omni_tokio::{
    AgentCallbacks, AgentEvent, Client, Options, Response, StreamEvent, Tool, ToolDecision, ToolError, ToolUse,
    TurnDecision,
};
use serde_json::{json, Value};

/// Turns the agent may take before it is stopped without a conclusion.
const MAX_TURNS: u32 = 6;

/// The application's state and decisions.
#[derive(Default)]
struct Researcher {
    summary: Option<String>,
    turns: u32,
}

impl AgentCallbacks for Researcher {
    fn handle_tool_use(&mut self, tool_use: &ToolUse) -> ToolDecision {
        match tool_use.name.as_str() {
            "fetch_page" => ToolDecision::Pause("fetching a web page needs your approval".into()),
            "complete" => {
                self.summary = tool_use.input.get("summary").and_then(Value::as_str).map(str::to_string);
                ToolDecision::Execute
            }
            _ => ToolDecision::Execute,
        }
    }

    fn handle_turn(&mut self, _response: &Response) -> TurnDecision {
        self.turns += 1;
        if self.summary.is_some() || self.turns >= MAX_TURNS {
            TurnDecision::Stop
        } else {
            TurnDecision::Continue("Keep researching. When you have enough, call `complete` with a summary.".into())
        }
    }
}

/// The offline library: (title, url, abstract).
const LIBRARY: &[(&str, &str, &str)] = &[
    ("Heat pumps 101", "https://example.org/heat-pumps-101", "How air-source heat pumps move heat."),
    (
        "Cold-climate heat pumps in practice",
        "https://example.org/cold-climate-heat-pumps",
        "Field data on efficiency below freezing.",
    ),
    ("Ground-source systems", "https://example.org/ground-source", "Boreholes, loops and costs."),
];

fn tools() -> Vec<Tool> {
    let search = Tool::new(
        "search",
        "Searches the library; returns titles, URLs and abstracts.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        |input| async move {
            let query = input["query"].as_str().unwrap_or_default().to_lowercase();
            let hits: Vec<Value> = LIBRARY
                .iter()
                .filter(|(title, _, summary)| {
                    query.split_whitespace().any(|w| (title.to_lowercase() + summary).to_lowercase().contains(w))
                })
                .map(|(title, url, summary)| json!({"title": title, "url": url, "abstract": summary}))
                .collect();
            Ok::<_, ToolError>(json!({ "results": hits }))
        },
    );
    let fetch = Tool::new(
        "fetch_page",
        "Fetches a page of the library by URL.",
        json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
        |input| async move {
            let url = input["url"].as_str().unwrap_or_default().to_string();
            match LIBRARY.iter().find(|(_, u, _)| *u == url) {
                Some((title, _, _)) => Ok(format!(
                    "{title}: in field trials, cold-climate units kept a COP above 2 down to -15 °C and \
                     above 1.5 at -25 °C; most homes needed backup heat only on the coldest days."
                )),
                None => Err(ToolError(format!("{url} is not in the offline library"))),
            }
        },
    );
    let complete = Tool::new(
        "complete",
        "Call when the research is done, with a summary of the findings.",
        json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}),
        |_| async { Ok::<_, ToolError>("recorded") },
    );
    vec![search, fetch, complete]
}

/// The session the mock plays: a search, a page fetch that needs the user's approval,
/// partial findings (the agent is told to go on), then the completion tool and a closing
/// line.
fn research_conversation() -> Vec<Turn> {
    let step = |text: &str, call: Option<(&str, &str, serde_json::Value)>, input: u64| {
        let turn = text.split_inclusive(' ').fold(Turn::reply(), Turn::then_text);
        let turn = match call {
            Some((id, name, arguments)) => turn.then_tool_call_with_id(id, name, arguments),
            None => turn,
        };
        turn.usage(input, 40).gap(std::time::Duration::from_millis(15))
    };
    vec![
        step(
            "I'll start by searching the library for sources on heat pumps in cold climates.",
            Some(("toolu_research_1", "search", json!({"query": "heat pump efficiency cold climate"}))),
            620,
        ),
        step(
            "The second result looks most relevant; let me read it in full.",
            Some(("toolu_research_2", "fetch_page", json!({"url": "https://example.org/cold-climate-heat-pumps"}))),
            810,
        ),
        step(
            "Modern cold-climate heat pumps keep a coefficient of performance above 2 down to about -15 °C.",
            None,
            1040,
        ),
        step(
            "I have enough to conclude.",
            Some((
                "toolu_research_3",
                "complete",
                json!({"summary": "Cold-climate heat pumps stay efficient (COP > 2) down to about -15 °C; below that, backup heat helps."}),
            )),
            1120,
        ),
        step("Research complete.", None, 1210),
    ]
}

/// Asks on the terminal; `false` without an answer.
async fn approve(question: String) -> bool {
    tokio::task::spawn_blocking(move || {
        print!("{question} [y/N] ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y")
    })
    .await
    .unwrap_or(false)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let yes = args.iter().any(|a| a == "--yes");
    let topic = args.iter().find(|a| !a.starts_with("--")).cloned().unwrap_or("heat pumps in cold climates".into());
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut builder = Client::builder();
    let mut _mock = None;
    let model = if env("ANTHROPIC_API_KEY").is_some() {
        "anthropic:claude-sonnet-4-5"
    } else if env("OPENAI_API_KEY").is_some() {
        "openai:gpt-5-mini"
    } else if env("GEMINI_API_KEY").is_some() {
        "google:gemini-2.5-flash"
    } else {
        let mock = MockProvider::start(omni_tokio::Dialect::AnthropicMessages)?;
        for turn in research_conversation() {
            mock.push(turn);
        }
        eprintln!(
            "research agent: no provider key found; playing a session from a mock provider at {}",
            mock.base_url()
        );
        builder = builder.provider(mock.provider());
        _mock = Some(mock);
        "mock:mock-model"
    };
    let agent = builder
        .build()?
        .agent(model)
        .system("You are a careful researcher. Use the tools; cite what you read. Call `complete` when done.")
        .tools(tools())
        .options(Options::default().max_tokens(2048))
        .callbacks(Researcher::default())
        .start()?;
    let (_, mut events) = agent.subscribe().await?;
    println!("> Research: {topic}  ({model})");
    agent.prompt(format!("Research this topic and report your findings: {topic}")).await?;
    let mut out = std::io::stdout();
    while let Some(event) = events.next_event().await {
        match event {
            AgentEvent::Stream(StreamEvent::TextDelta { delta, .. }) => write!(out, "{delta}")?,
            AgentEvent::Stream(StreamEvent::TextEnd { .. }) => writeln!(out)?,
            AgentEvent::Stream(StreamEvent::ToolUseEnd { tool_use, .. }) => {
                writeln!(out, "  [tool] {}({})", tool_use.name, tool_use.input)?
            }
            AgentEvent::ToolResult(result) => {
                let mark = if result.is_error { "error" } else { "result" };
                writeln!(out, "  [{mark}] {}", result.text_content())?
            }
            AgentEvent::Pause { tool_use, reason } => {
                let question = format!("  {reason}: {}?", tool_use.input["url"].as_str().unwrap_or("?"));
                let decision = if yes {
                    writeln!(out, "{question} yes (--yes)")?;
                    ToolDecision::Execute
                } else if approve(question).await {
                    ToolDecision::Execute
                } else {
                    ToolDecision::Reject("the user declined this fetch".into())
                };
                agent.resume(decision).await?;
            }
            AgentEvent::Turn { end, usage, .. } => {
                writeln!(out, "  [turn {end:?}: tokens in {}, out {}]", usage.input_tokens, usage.output_tokens)?;
                if end == omni_tokio::TurnEnd::Stop {
                    break;
                }
            }
            AgentEvent::Retry { attempt, delay, error, .. } => eprintln!("  [retry {attempt} in {delay:?}: {error}]"),
            AgentEvent::Error(error) => {
                eprintln!("research agent failed: {error}");
                std::process::exit(1);
            }
            _ => {}
        }
        out.flush()?;
    }
    match agent.with_callbacks(|r: &mut Researcher| r.summary.clone()).await? {
        Some(summary) => println!("Findings: {summary}"),
        None => println!("The agent stopped after {MAX_TURNS} turns without a conclusion."),
    }
    Ok(())
}
