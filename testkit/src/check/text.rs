//! Checks for a text tool-call protocol ([`TextProtocol`]): the properties omni's own
//! `xml`, `json` and `hermes` protocols are held to, written once in
//! [`omni_protocol::text_tools::check`] and run here on your samples and on generated
//! replies, with a report naming the case.
//!
//! - **In pieces** ([`check_text`]): a reply parsed whole and parsed in pieces (one byte at a
//!   time, at generated cut points; a cut inside a character falls back to its start)
//!   gives the same events, adjacent text and argument pieces merged; the events rebuild
//!   the reply byte for byte (nothing lost); after every piece, what was given out plus
//!   what is held back is what was fed, and what is held back stays within the
//!   [`HoldBack`] bound; calls are numbered 0, 1, 2… in order.
//! - **Round trip** ([`check_round_trip`]): a call written by `format_call`, alone and
//!   between two pieces of prose, reads back as one call to its tool with exactly its
//!   arguments, its argument pieces joining into them, its raw span the text written.
//!
//! ```
//! use omni_protocol::text_tools::Hermes;
//! use omni_protocol::ToolSpec;
//! use omni_testkit::check::text::{check_protocol, HoldBack};
//! use omni_testkit::check::{Config, Sample};
//!
//! let tools = [ToolSpec {
//!     name: "search".into(),
//!     description: "Searches.".into(),
//!     input_schema: serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}}),
//! }];
//! let samples = [Sample::new("one call", "Looking.\n<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"é\"}}</tool_call>")];
//! let hold_back = HoldBack::MentionRules { opener: "<tool_call>".into(), fenced: false };
//! let outcome = check_protocol(&Hermes, &tools, &samples, &hold_back, &Config::new().cases(8));
//! assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
//! ```

use std::fmt;
use std::sync::Arc;

use omni_protocol::text_tools::check::{self as core_check, Prose};
use omni_protocol::text_tools::{schema_for, Parsed};
use omni_protocol::{TextProtocol, ToolSpec};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use serde_json::{Map, Value};

use super::{clip, guarded, run, strategy, Check, CheckFailure, Config, Sample};

/// How much a parser may hold back after each piece (read, not yet given out as text or
/// as a call's span). Whatever the bound, what is given out plus what is held back must
/// be what was fed.
#[derive(Clone, Default)]
pub enum HoldBack {
    /// No bound beyond that accounting.
    #[default]
    Unchecked,
    /// omni's mention rules (the [`text_tools`](omni_protocol::text_tools) module's doc):
    /// before the first call, at most a suffix that may still begin `opener` or
    /// `<think>`, a trailing backtick run, or an opener whose mention is undecided with
    /// what follows it; from the first call on, everything since its opener. `fenced`
    /// when the opener is a code fence (omni's `json` protocol, whose opener is
    /// ```` ```tool_call ````).
    MentionRules {
        /// The protocol's opener (`<tool_call>` for `xml` and `hermes`).
        opener: String,
        /// Whether the opener is a fence.
        fenced: bool,
    },
    /// Your bound: the text fed so far in, the most that may be held back out.
    Custom(Arc<dyn Fn(&str) -> usize + Send + Sync>),
}

impl fmt::Debug for HoldBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unchecked => f.write_str("Unchecked"),
            Self::MentionRules { opener, fenced } => {
                f.debug_struct("MentionRules").field("opener", opener).field("fenced", fenced).finish()
            }
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl HoldBack {
    /// The bound for `fed`, the text read so far.
    pub fn bound(&self, fed: &str) -> usize {
        match self {
            Self::Unchecked => usize::MAX,
            Self::MentionRules { opener, fenced } => match core_check::next_call(fed, 0, opener, *fenced) {
                Prose::Call(start) => fed.len() - start,
                Prose::End { hold } => hold,
            },
            Self::Custom(bound) => bound(fed),
        }
    }
}

/// The in-pieces properties of one reply (see the module's doc) with the pieces `cuts`
/// makes: the merged events, or what was wrong. A panic of the parser is caught and
/// reported.
pub fn check_text(
    protocol: &dyn TextProtocol,
    tools: &[ToolSpec],
    text: &str,
    cuts: &[usize],
    hold_back: &HoldBack,
) -> Result<Vec<Parsed>, String> {
    let bound = |fed: &str| hold_back.bound(fed);
    guarded(|| core_check::check_parse(protocol, tools, text, cuts, &bound)).map_err(|p| p.to_string())?
}

/// The round trip of one call to `tool` with `arguments` (see the module's doc). A panic
/// of the protocol is caught and reported.
pub fn check_round_trip(
    protocol: &dyn TextProtocol,
    tool: &ToolSpec,
    arguments: &Map<String, Value>,
) -> Result<(), String> {
    guarded(|| core_check::check_round_trip(protocol, tool, arguments)).map_err(|p| p.to_string())?
}

/// Every check of this module: [`check_samples`], [`check_round_trips`] with
/// [`strategy::arguments`], and [`check_replies`].
pub fn check_protocol(
    protocol: &dyn TextProtocol,
    tools: &[ToolSpec],
    samples: &[Sample],
    hold_back: &HoldBack,
    config: &Config,
) -> Result<(), CheckFailure> {
    check_samples(protocol, tools, samples, hold_back, config)?;
    check_round_trips(protocol, strategy::arguments(), config)?;
    check_replies(protocol, tools, samples, hold_back, config)
}

/// Each sample (a reply's text, UTF-8) in pieces: fed one byte at a time, and at
/// `config.cases` generated sets of cut points.
pub fn check_samples(
    protocol: &dyn TextProtocol,
    tools: &[ToolSpec],
    samples: &[Sample],
    hold_back: &HoldBack,
    config: &Config,
) -> Result<(), CheckFailure> {
    let fail = |case: String, detail: String| CheckFailure::new(Check::TextPieces, protocol.name(), case, detail);
    let mut texts = Vec::with_capacity(samples.len());
    for sample in samples {
        let text = std::str::from_utf8(&sample.body)
            .map_err(|e| fail(format!("sample `{}`", sample.name), format!("not UTF-8: {e}")))?;
        let every: Vec<usize> = (0..text.len()).collect();
        check_text(protocol, tools, text, &every, hold_back)
            .map_err(|e| fail(format!("sample `{}`, fed one byte at a time", sample.name), e))?;
        texts.push(text);
    }
    if texts.is_empty() {
        return Ok(());
    }
    let cases = (0..texts.len()).prop_flat_map(|i| (Just(i), strategy::cut_points(texts[i].len(), 12)));
    run(
        config,
        cases,
        |(i, cuts)| {
            let case = || format!("sample `{}`, cut at {cuts:?}", samples[i].name);
            check_text(protocol, tools, texts[i], &cuts, hold_back).map(drop).map_err(|e| fail(case(), e))
        },
        |why| fail("generated cuts".into(), why),
    )
}

/// `config.cases` round trips of calls to a tool with an [`identifier`](strategy::identifier)
/// name and `arguments` drawn from the strategy given (the tool's schema types each
/// argument as its value is, [`schema_for`]).
pub fn check_round_trips(
    protocol: &dyn TextProtocol,
    arguments: impl Strategy<Value = Map<String, Value>>,
    config: &Config,
) -> Result<(), CheckFailure> {
    let fail = |case: String, detail: String| CheckFailure::new(Check::TextRoundTrip, protocol.name(), case, detail);
    run(
        config,
        (strategy::identifier(), arguments),
        |(name, arguments)| {
            let tool = ToolSpec { name, description: "A tool.".into(), input_schema: schema_for(&arguments) };
            check_round_trip(protocol, &tool, &arguments).map_err(|e| {
                fail(
                    format!(
                        "a call to `{}` with arguments {}",
                        tool.name,
                        clip(&Value::Object(arguments).to_string(), 400)
                    ),
                    e,
                )
            })
        },
        |why| fail("generated calls".into(), why),
    )
}

/// `config.cases` generated replies in pieces: prose ([`strategy::hostile_text`] and the
/// samples' texts) and calls written by `format_call` (to the tools given and to a tool
/// not given), perhaps cut short anywhere, split at generated points.
pub fn check_replies(
    protocol: &dyn TextProtocol,
    tools: &[ToolSpec],
    samples: &[Sample],
    hold_back: &HoldBack,
    config: &Config,
) -> Result<(), CheckFailure> {
    let fail = |case: String, detail: String| CheckFailure::new(Check::TextPieces, protocol.name(), case, detail);
    let mut names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    names.push("no_such_tool".into());
    let mut prose: Vec<String> =
        samples.iter().filter_map(|s| std::str::from_utf8(&s.body).ok().map(str::to_owned)).collect();
    prose.push(String::new());
    let call = (select(names), strategy::arguments()).prop_map(|(name, arguments)| Call { name, arguments });
    let piece = prop_oneof![
        2 => strategy::hostile_text().prop_map(Piece::Prose),
        1 => select(prose).prop_map(Piece::Prose),
        2 => call.prop_map(Piece::Call),
    ];
    let cases = (vec(piece, 0..6), any::<Option<Index>>(), vec(any::<Index>(), 0..12));
    run(
        config,
        cases,
        |(pieces, cut_short, cuts)| {
            // Writing the calls is the protocol's code too: a panic there names the call.
            let mut reply = String::new();
            for piece in &pieces {
                match piece {
                    Piece::Prose(text) => reply.push_str(text),
                    Piece::Call(call) => {
                        let written = guarded(|| protocol.format_call(&call.name, &call.arguments)).map_err(|p| {
                            fail(
                                format!(
                                    "writing a call to `{}` with {}",
                                    call.name,
                                    Value::Object(call.arguments.clone())
                                ),
                                p.to_string(),
                            )
                        })?;
                        reply.push_str(&written);
                    }
                }
            }
            if let Some(at) = cut_short {
                reply.truncate(core_check::floor_boundary(&reply, at.index(reply.len() + 1)));
            }
            let cuts: Vec<usize> = cuts.iter().map(|c| c.index(reply.len() + 1)).collect();
            let case = || format!("the reply {:?} cut at {cuts:?}", clip(&reply, 600));
            check_text(protocol, tools, &reply, &cuts, hold_back).map(drop).map_err(|e| fail(case(), e))
        },
        |why| fail("generated replies".into(), why),
    )
}

/// A piece of a generated reply.
#[derive(Debug, Clone)]
enum Piece {
    Prose(String),
    Call(Call),
}

/// A call to write with the protocol's `format_call`.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    arguments: Map<String, Value>,
}
