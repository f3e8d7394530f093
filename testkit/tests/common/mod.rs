//! The cases every driver runs against the mock provider: for each of the five dialects,
//! a script of turns, the call's options, and what the call must end with. One
//! definition; `blocking.rs`, `tokio.rs` and `smol.rs` run it through their driver's
//! public API.

use std::time::Duration;

use omni_blocking::{Block, Dialect, Error, GenerateError, Options, Response, RetryPolicy, StopReason};
use omni_testkit::{MockProvider, Turn};
use serde_json::json;

/// A mock provider speaking `dialect`, `turns` queued: what every driver's run starts from.
pub(crate) fn mock(dialect: Dialect, turns: Vec<Turn>) -> Result<MockProvider, String> {
    let mock = MockProvider::start(dialect).map_err(|e| e.to_string())?;
    for turn in turns {
        mock.push(turn);
    }
    Ok(mock)
}

/// One case: what the mock is told, and what the call's outcome must be.
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) turns: Vec<Turn>,
    pub(crate) options: Options,
    pub(crate) check: fn(&MockProvider, &Result<Response, Error>) -> Result<(), String>,
}

fn case(
    name: &str,
    dialect: Dialect,
    turns: Vec<Turn>,
    check: fn(&MockProvider, &Result<Response, Error>) -> Result<(), String>,
) -> (Dialect, Case) {
    let name = format!("{}/{name}", dialect.name());
    (dialect, Case { name, turns, options: Options::default(), check })
}

fn ok(outcome: &Result<Response, Error>) -> Result<&Response, String> {
    outcome.as_ref().map_err(|e| format!("failed: {e}"))
}

fn expect(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// Every case, for every dialect.
pub(crate) fn cases() -> Vec<(Dialect, Case)> {
    let mut all = Vec::new();
    for dialect in [
        Dialect::AnthropicMessages,
        Dialect::OpenaiCompletions,
        Dialect::OpenaiResponses,
        Dialect::GoogleGemini,
        Dialect::OllamaChat,
    ] {
        all.push(case(
            "text",
            dialect,
            vec![Turn::text("It is ").then_text("sunny.").usage(31, 7)],
            |mock, outcome| {
                let response = ok(outcome)?;
                expect(response.text() == "It is sunny.", || format!("text {:?}", response.text()))?;
                expect(response.stop_reason == Some(StopReason::Stop), || format!("stop {:?}", response.stop_reason))?;
                let usage = &response.usage;
                let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
                expect(input == 31 && usage.output_tokens == 7, || format!("usage {usage:?}"))?;
                let requests = mock.requests();
                expect(requests.len() == 1, || format!("{} requests", requests.len()))?;
                let body = requests[0].json().ok_or("a JSON body")?;
                expect(body.to_string().contains("What is the weather?"), || format!("prompt not in {body}"))
            },
        ));
        all.push(case(
            "thinking_then_text",
            dialect,
            vec![Turn::thinking("Let me ").then_thinking("think.").then_text("Done.")],
            |_, outcome| {
                let response = ok(outcome)?;
                let thinking: String = response
                    .message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Thinking(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                expect(thinking == "Let me think.", || format!("thinking {thinking:?}"))?;
                expect(response.text() == "Done.", || format!("text {:?}", response.text()))
            },
        ));
        for interleaved in [false, true] {
            let calls = Turn::text("Checking. ")
                .then_tool_call("get_weather", json!({"city": "Paris"}))
                .then_tool_call("get_time", json!({"zone": "CET", "precise": true}));
            let (name, turn) = if interleaved {
                ("parallel_tool_calls_interleaved", calls.interleave_calls())
            } else {
                ("parallel_tool_calls", calls)
            };
            all.push(case(name, dialect, vec![turn], |_, outcome| {
                let response = ok(outcome)?;
                let calls: Vec<_> = response
                    .message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse(call) => Some((call.name.clone(), call.input.clone())),
                        _ => None,
                    })
                    .collect();
                let want = vec![
                    ("get_weather".to_string(), json!({"city": "Paris"})),
                    ("get_time".to_string(), json!({"zone": "CET", "precise": true})),
                ];
                expect(calls == want, || format!("calls {calls:?}"))?;
                expect(response.stop_reason == Some(StopReason::ToolUse), || format!("stop {:?}", response.stop_reason))
            }));
            // No tool is registered: one step, which ends with the calls.
            if let Some((_, case)) = all.last_mut() {
                case.options.max_steps = Some(1);
            }
        }
        all.push(case("length", dialect, vec![Turn::text("One, two").max_tokens_reached()], |_, outcome| {
            let response = ok(outcome)?;
            expect(response.stop_reason == Some(StopReason::Length), || format!("stop {:?}", response.stop_reason))
        }));
        all.push(case(
            "rate_limited_then_text",
            dialect,
            vec![Turn::error(429, "slow down").retry_after(0), Turn::text("After the wait.")],
            |mock, outcome| {
                let response = ok(outcome)?;
                expect(response.text() == "After the wait.", || format!("text {:?}", response.text()))?;
                expect(mock.requests().len() == 2, || format!("{} requests", mock.requests().len()))
            },
        ));
        all.push(case("not_found", dialect, vec![Turn::error(404, "no such model")], |mock, outcome| match outcome {
            Err(Error::Generate { error: GenerateError::Provider(e), .. }) => {
                expect(e.status == Some(404) && e.message.contains("no such model"), || format!("{e:?}"))?;
                expect(mock.requests().len() == 1, || "a 404 is not retried".into())
            }
            other => Err(format!("{other:?}")),
        }));
        all.push(case(
            "small_chunks",
            dialect,
            vec![Turn::text("Ünïcode ").then_text("split anywhere ✓").chunked(3)],
            |_, outcome| {
                let response = ok(outcome)?;
                expect(response.text() == "Ünïcode split anywhere ✓", || format!("text {:?}", response.text()))
            },
        ));
        // A cut the client must see: every retry cut the same way.
        let cut = || Turn::text("It is ").then_text("sun").cut();
        let check: fn(&MockProvider, &Result<Response, Error>) -> Result<(), String> =
            if dialect == Dialect::GoogleGemini {
                // Gemini has no end event: a cut after the content cannot be told from an end
                // (the drivers report a connection cut mid-body; a cut between events is an end).
                |_, outcome| match outcome {
                    Ok(response) => expect(response.text() == "It is sun", || format!("text {:?}", response.text())),
                    Err(Error::Generate { partial, .. }) => {
                        expect("It is sun".starts_with(&partial.text()), || format!("partial {:?}", partial.text()))
                    }
                    other => Err(format!("{other:?}")),
                }
            } else {
                |_, outcome| match outcome {
                    Err(Error::Generate { partial, .. }) => {
                        expect("It is sun".starts_with(&partial.text()), || format!("partial {:?}", partial.text()))
                    }
                    other => Err(format!("a cut stream must fail: {other:?}")),
                }
            };
        all.push(case("cut", dialect, vec![cut(), cut(), cut()], check));
    }
    all
}

/// A case whose stream stalls: the client's stall limit must end it.
pub(crate) fn stall(dialect: Dialect) -> Case {
    Case {
        name: format!("{}/stall", dialect.name()),
        turns: vec![
            Turn::text("It is ").stall_after(2),
            Turn::text("It is ").stall_after(2),
            Turn::text("It is ").stall_after(2),
        ],
        options: Options::default(),
        check: |_, outcome| match outcome {
            Err(Error::Generate { error: GenerateError::Stalled(_), .. }) => Ok(()),
            other => Err(format!("a stalled stream must fail as stalled: {other:?}")),
        },
    }
}

/// The prompt every case sends.
pub(crate) const PROMPT: &str = "What is the weather?";

/// The stall limit the clients are built with.
pub(crate) const STALL: Duration = Duration::from_millis(300);

/// The report of every failed case, or `Ok`.
pub(crate) fn report(failures: Vec<String>) -> Result<(), String> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// Retries at once (the cases' waits are the mock's, not the backoff's), seeded.
pub(crate) fn retry() -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        seed: 1,
        ..RetryPolicy::default()
    }
}
