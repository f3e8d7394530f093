//! The tool round's own decisions, without a machine around it.

use std::collections::VecDeque;
use std::time::Duration;

use super::*;
use crate::data::message::{ToolResultContent, ToolSpec};

fn decl(name: &str, executable: bool, timeout: Option<Duration>) -> ToolDecl {
    let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let mut decl =
        ToolDecl::new(ToolSpec { name: name.into(), description: String::new(), input_schema: schema }, executable);
    decl.timeout = timeout;
    decl.ensure_validator().expect("compiles");
    decl
}

fn call(id: &str, name: &str, input: serde_json::Value) -> ToolUse {
    ToolUse { invalid: None, id: id.into(), name: name.into(), input, signature: None }
}

/// Decides from a script (default: execute) and records what it saw.
#[derive(Default)]
struct Scripted {
    decisions: VecDeque<ToolDecision>,
    asked: Vec<String>,
    seen: Vec<String>,
}

impl ToolPolicy for Scripted {
    fn decide(&mut self, call: &ToolUse) -> ToolDecision {
        self.asked.push(call.id.clone());
        self.decisions.pop_front().unwrap_or(ToolDecision::Execute)
    }
    fn seen(&mut self, result: ToolResult) -> ToolResult {
        self.seen.push(result.tool_use_id.clone());
        result
    }
}

struct Machine {
    tools: Vec<ToolDecl>,
    options: Options,
    next_id: u64,
    effects: VecDeque<Effect>,
}

impl Machine {
    fn new(tools: Vec<ToolDecl>) -> Self {
        Self { tools, options: Options::default(), next_id: 0, effects: VecDeque::new() }
    }
    fn runner(&mut self, now: Duration) -> Runner<'_, Duration> {
        Runner {
            tools: &self.tools,
            options: &self.options,
            next_id: &mut self.next_id,
            effects: &mut self.effects,
            now,
        }
    }
    fn runs(&mut self) -> Vec<(ToolRunId, ToolUse)> {
        self.effects
            .drain(..)
            .filter_map(|e| match e {
                Effect::RunTool { id, call } => Some((id, call)),
                Effect::SendRequest { .. }
                | Effect::CancelRequest { .. }
                | Effect::CancelTool { .. }
                | Effect::Observe(_) => None,
            })
            .collect()
    }
}

fn ids(blocks: &[Block]) -> Vec<(&str, bool)> {
    blocks
        .iter()
        .map(|b| match b {
            Block::ToolResult(r) => (r.tool_use_id.as_str(), r.is_error),
            other @ (Block::Text(_) | Block::Thinking(_) | Block::Attachment(_) | Block::ToolUse(_)) => {
                panic!("not a result: {other:?}")
            }
        })
        .collect()
}

fn text(s: &str) -> ToolOutcome {
    ToolOutcome::Ok(vec![ToolResultContent::Text { text: s.into() }])
}

#[test]
fn results_keep_the_order_of_the_calls_whatever_order_the_runs_end_in() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None)]);
    let calls = ["a", "b", "c"].map(|id| call(id, "t", serde_json::json!({"n": 1})));
    let mut round = ToolRound::new(calls.to_vec());
    let mut policy = Scripted::default();
    assert_eq!(round.decide(&mut policy, &mut m.runner(now)), Decided::All);
    let runs = m.runs();
    assert_eq!(runs.iter().map(|(_, c)| c.id.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    for index in [2, 0] {
        assert!(round.finish(runs[index].0, text("ok"), &mut policy));
        assert!(!round.is_complete());
    }
    assert!(round.finish(runs[1].0, ToolOutcome::Panicked("boom".into()), &mut policy));
    assert!(round.is_complete());
    assert_eq!(policy.seen, ["c", "a", "b"], "each result is seen as it comes");
    let results = round.into_results();
    assert_eq!(ids(&results), [("a", false), ("b", true), ("c", false)]);
}

#[test]
fn answers_for_unknown_or_answered_runs_are_ignored() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None)]);
    let mut round = ToolRound::new(vec![call("a", "t", serde_json::json!({"n": 1}))]);
    let mut policy = Scripted::default();
    round.decide(&mut policy, &mut m.runner(now));
    let (id, _) = m.runs()[0].clone();
    assert!(!round.finish(ToolRunId(id.0 + 100), text("stray"), &mut policy));
    assert!(round.finish(id, text("first"), &mut policy));
    assert!(!round.finish(id, text("again"), &mut policy));
    assert_eq!(policy.seen, ["a"]);
}

#[test]
fn unknown_tools_and_invalid_input_get_error_results_and_never_run() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None)]);
    let calls = vec![
        call("a", "nope", serde_json::json!({"n": 1})),
        call("b", "t", serde_json::json!({"n": "one"})),
        call("c", "t", serde_json::json!({"n": 2})),
    ];
    let mut round = ToolRound::new(calls);
    let mut policy = Scripted::default();
    assert_eq!(round.decide(&mut policy, &mut m.runner(now)), Decided::All);
    assert_eq!(policy.seen, ["a", "b"], "refusals are results at once");
    let runs = m.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].1.input, serde_json::json!({"n": 2}));
    round.finish(runs[0].0, text("ok"), &mut policy);
    assert_eq!(ids(&round.into_results()), [("a", true), ("b", true), ("c", false)]);
}

#[test]
fn each_run_has_its_own_deadline_and_an_expired_one_is_cancelled() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("fast", true, Some(Duration::from_secs(1))), decl("slow", true, None)]);
    m.options.tool_timeout = Some(Duration::from_secs(10));
    let calls = vec![call("a", "slow", serde_json::json!({"n": 1})), call("b", "fast", serde_json::json!({"n": 1}))];
    let mut round = ToolRound::new(calls);
    let mut policy = Scripted::default();
    round.decide(&mut policy, &mut m.runner(now));
    let runs = m.runs();
    assert_eq!(round.next_deadline(), Some(now + Duration::from_secs(1)));
    assert!(!round.expire(Duration::from_millis(999), &mut policy, &mut m.effects));
    assert!(m.effects.is_empty());
    assert!(round.expire(now + Duration::from_secs(1), &mut policy, &mut m.effects));
    assert_eq!(m.effects.drain(..).collect::<Vec<_>>(), [Effect::CancelTool { id: runs[1].0 }]);
    assert_eq!(round.next_deadline(), Some(now + Duration::from_secs(10)), "the option's limit for the other");
    assert!(!round.finish(runs[1].0, text("late"), &mut policy), "a late answer is ignored");
    round.finish(runs[0].0, text("ok"), &mut policy);
    let results = round.into_results();
    let Block::ToolResult(timed_out) = &results[1] else { panic!("a result") };
    assert!(timed_out.is_error);
    assert_eq!(timed_out.content, vec![ToolResultContent::Text { text: "the tool timed out after 1s".into() }]);
}

#[test]
fn a_pause_holds_every_run_until_the_round_is_resumed() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None)]);
    let calls = ["a", "b", "c"].map(|id| call(id, "t", serde_json::json!({"n": 1})));
    let mut round = ToolRound::new(calls.to_vec());
    let mut policy = Scripted {
        decisions: [ToolDecision::Execute, ToolDecision::Pause("ask".into())].into(),
        ..Scripted::default()
    };
    let paused = round.decide(&mut policy, &mut m.runner(now));
    assert_eq!(paused, Decided::Pause(calls[1].clone(), "ask".into()));
    assert!(m.runs().is_empty(), "no run starts before every call is decided");
    assert_eq!(round.next_deadline(), None);
    let resumed = round.resume(ToolDecision::Reject("no".into()), &mut policy, &mut m.runner(now));
    assert_eq!(resumed, Decided::All);
    assert_eq!(policy.asked, ["a", "b", "c"], "the resumed call is not asked again");
    let runs = m.runs();
    assert_eq!(runs.iter().map(|(_, c)| c.id.as_str()).collect::<Vec<_>>(), ["a", "c"]);
    for (id, _) in runs {
        round.finish(id, text("ok"), &mut policy);
    }
    assert_eq!(ids(&round.into_results()), [("a", false), ("b", true), ("c", false)]);
}

#[test]
fn executing_a_tool_without_handler_leaves_the_calls_to_the_caller() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None), decl("app", false, None)]);
    let calls = vec![call("a", "t", serde_json::json!({"n": 1})), call("b", "app", serde_json::json!({"n": 1}))];
    let mut round = ToolRound::new(calls);
    assert_eq!(round.decide(&mut Scripted::default(), &mut m.runner(now)), Decided::Unhandled);
    assert!(m.runs().is_empty());
}

#[test]
fn cancel_names_the_runs_still_going() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None)]);
    let calls = ["a", "b"].map(|id| call(id, "t", serde_json::json!({"n": 1})));
    let mut round = ToolRound::new(calls.to_vec());
    let mut policy = Scripted::default();
    round.decide(&mut policy, &mut m.runner(now));
    let runs = m.runs();
    round.finish(runs[0].0, text("ok"), &mut policy);
    assert_eq!(round.cancel().collect::<Vec<_>>(), [runs[1].0]);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "once every call has one")]
fn taking_the_results_of_an_unfinished_round_is_a_bug() {
    let now = Duration::ZERO;
    let mut m = Machine::new(vec![decl("t", true, None)]);
    let mut round = ToolRound::new(vec![call("a", "t", serde_json::json!({"n": 1}))]);
    round.decide(&mut Scripted::default(), &mut m.runner(now));
    let _ = round.into_results();
}
