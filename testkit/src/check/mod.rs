//! Checks for your own wire format and text tool-call protocol: the properties omni's own
//! dialects and protocols are held to, as functions that run them on your samples and
//! say, when one fails, which check, which case and what differed.
//!
//! - [`wire`]: a [`WireFormat`](omni_protocol::dialect::WireFormat) (or any
//!   [`Dialect`](omni_protocol::Dialect), the built-in five included) against sample
//!   response bodies: the same events however the bytes are split ([`wire::check_splits`]),
//!   a cut stream never passed off as complete ([`wire::check_cuts`]), damaged input a typed
//!   outcome and never a panic ([`wire::check_damage`]), and request building sound for any
//!   context and options ([`wire::check_requests`]); [`wire::check_format`] runs them all.
//! - [`text`]: a [`TextProtocol`](omni_protocol::TextProtocol) against sample replies and
//!   generated ones: the same calls however the text is split, nothing lost, a bounded
//!   hold-back, calls numbered in order, and `format_call` read back exactly with hostile
//!   arguments ([`text::check_protocol`]).
//! - [`strategy`]: the proptest strategies the checks draw from (contexts, options, hostile
//!   strings and argument maps, cut points, damages), public so that your own properties
//!   can compose them.
//!
//! Every check returns `Result<(), CheckFailure>`: `Ok` when the property held for every
//! case, else the smallest failing case proptest found, as a [`CheckFailure`] whose
//! `Display` is a report to read. A panic in your code (the format's parser, its request
//! builder, a protocol's parser) is caught and reported as a failure naming the case; it
//! does not unwind through the check (the default panic hook still prints it).
//!
//! Runs are repeatable: the cases come from a fixed seed unless [`Config::random`] asks
//! for fresh ones.
//!
//! # Example
//!
//! A format whose stream is one JSON object per line, `{"say": "..."}` and a last
//! `{"end": true}`, checked on one sample:
//!
//! ```
//! use omni_protocol::dialect::{
//!     BlockDelta, BlockKind, Delta, DialectRequest, Frame, Framing, MessageMeta, RequestSpec, WireFormat,
//!     WireStream,
//! };
//! use omni_protocol::{RequestError, StopReason, StreamError, Warning};
//! use omni_testkit::check::{wire, Config, Sample};
//!
//! #[derive(Debug)]
//! struct Lines;
//!
//! impl WireFormat for Lines {
//!     fn name(&self) -> &'static str {
//!         "lines_doc_example"
//!     }
//!     fn framing(&self) -> Framing {
//!         Framing::Ndjson
//!     }
//!     fn build_request(&self, spec: &RequestSpec<'_>, _: &mut Vec<Warning>) -> Result<DialectRequest, RequestError> {
//!         let turns: Vec<String> = spec.context.messages.iter().map(|m| m.text()).collect();
//!         let body = serde_json::json!({ "model": spec.model.id, "turns": turns });
//!         Ok(DialectRequest { path: "/lines".into(), headers: Vec::new(), body })
//!     }
//!     fn new_stream(&self) -> Box<dyn WireStream> {
//!         Box::new(LinesStream { open: false })
//!     }
//! }
//!
//! #[derive(Debug)]
//! struct LinesStream {
//!     open: bool,
//! }
//!
//! impl WireStream for LinesStream {
//!     fn event(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
//!         let Frame::Event { data, .. } = frame else { return Ok(()) };
//!         let line: serde_json::Value = serde_json::from_str(data).map_err(|e| StreamError::decode(e, data))?;
//!         if let Some(text) = line["say"].as_str() {
//!             if !self.open {
//!                 self.open = true;
//!                 out.push(Delta::BlockStart { index: 0, kind: BlockKind::Text });
//!             }
//!             out.push(Delta::BlockDelta { index: 0, delta: BlockDelta::Text(text.into()) });
//!         } else if line["end"] == true {
//!             let stop = MessageMeta { stop_reason: Some(StopReason::Stop), ..MessageMeta::default() };
//!             out.push(Delta::Message(stop));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! static LINES: Lines = Lines;
//!
//! let samples = [Sample::new("hello", "{\"say\":\"Héllo, \"}\r\n{\"say\":\"wörld\"}\n{\"end\":true}\n")];
//! let outcome = wire::check_format(&LINES, &samples, &Config::new().cases(16));
//! assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
//! ```

use std::cell::RefCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use omni_protocol::Provider;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestError, TestRng, TestRunner};

pub mod strategy;
pub mod text;
pub mod wire;

/// One sample a check runs on: a response body (for [`wire`]) or a reply's text (for
/// [`text`]), with the name reports call it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// What reports call it (a fixture's name, say).
    pub name: String,
    /// Its bytes.
    pub body: Vec<u8>,
}

impl Sample {
    /// A sample named `name`.
    pub fn new(name: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Self { name: name.into(), body: body.into() }
    }
}

/// How a stream of the format shows that it ended, which decides what a cut stream may
/// look like ([`wire::check_cuts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ending {
    /// The stream says when it is complete (a stop reason only its last event gives):
    /// a prefix that still decodes to `Done` must have the very content and stop reason of
    /// the whole stream (the cut fell after everything that matters).
    #[default]
    Marked,
    /// The stream has no end marker and a stop reason may come before more content
    /// (Google Gemini: only the connection's end tells): a prefix may decode to `Done`,
    /// but with a prefix of the whole stream's content, never more. The check applies this
    /// to [`Dialect::GoogleGemini`](omni_protocol::Dialect::GoogleGemini) by itself.
    Unmarked,
}

/// How many cases the checks run and on what terms. `Config::new()` is the default: 64
/// generated cases per check, a fixed seed, every prefix of samples up to 2 KiB.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) cases: u32,
    pub(crate) random: bool,
    pub(crate) every_prefix_up_to: usize,
    pub(crate) ending: Ending,
    pub(crate) model_id: String,
    pub(crate) provider: Option<Provider>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            cases: 64,
            random: false,
            every_prefix_up_to: 2048,
            ending: Ending::Marked,
            model_id: "model".into(),
            provider: None,
        }
    }
}

impl Config {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Generated cases per check (random splits, damages, contexts, arguments): a few
    /// dozen keep a test in the tens of milliseconds per sample; raise it for a soak.
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases.max(1);
        self
    }

    /// Fresh cases on every run (`true`) instead of the same ones from a fixed seed.
    pub fn random(mut self, random: bool) -> Self {
        self.random = random;
        self
    }

    /// Samples up to `bytes` long are cut at every byte ([`wire::check_cuts`]); longer ones
    /// around every line break and at generated points (every prefix of a long body costs
    /// time quadratic in its length).
    pub fn every_prefix_up_to(mut self, bytes: usize) -> Self {
        self.every_prefix_up_to = bytes;
        self
    }

    /// How the format's stream shows its end (see [`Ending`]).
    pub fn ending(mut self, ending: Ending) -> Self {
        self.ending = ending;
        self
    }

    /// The model id responses start with and requests are built for (default `model`).
    pub fn model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = id.into();
        self
    }

    /// The provider requests are built for. By default, a built-in dialect's provider from
    /// the catalogue, and for a format of yours an OpenAI-compatible provider with a bearer
    /// key at `https://provider.invalid/v1`.
    pub fn provider(mut self, provider: Provider) -> Self {
        self.provider = Some(provider);
        self
    }
}

/// Which check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Check {
    /// A format could not be registered (its name is a built-in's or another format's).
    Register,
    /// The same body split differently gave other events or another response.
    Splits,
    /// A cut stream passed for complete, or a prefix decoded badly.
    Cuts,
    /// Damaged input panicked or gave an ill-formed event sequence.
    Damage,
    /// Request building panicked or gave an unsound request.
    Requests,
    /// A protocol's parser read a text differently in pieces, lost text, held back too
    /// much or misnumbered calls.
    TextPieces,
    /// A call written by `format_call` did not read back as written.
    TextRoundTrip,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Register => "registration",
            Self::Splits => "split invariance",
            Self::Cuts => "cut stream",
            Self::Damage => "damaged input",
            Self::Requests => "request building",
            Self::TextPieces => "text in pieces",
            Self::TextRoundTrip => "text round trip",
        })
    }
}

/// A failed check: which check, on what, the case that failed it and what was wrong.
/// `Display` writes it as a report of a few lines.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckFailure {
    /// The check.
    pub check: Check,
    /// The format, dialect or protocol checked, by name.
    pub subject: String,
    /// The case: the sample and what was done to it (the split, the cut, the damage, the
    /// generated input).
    pub case: String,
    /// What was wrong (what differed, the panic's message).
    pub detail: String,
}

impl CheckFailure {
    /// A failure of `check` on `subject`.
    pub fn new(check: Check, subject: impl Into<String>, case: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { check, subject: subject.into(), case: case.into(), detail: detail.into() }
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} check failed for `{}`\n  case: {}\n  {}", self.check, self.subject, self.case, self.detail)
    }
}

impl std::error::Error for CheckFailure {}

/// A panic caught in the code under check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panicked {
    /// The panic's message.
    pub message: String,
}

impl fmt::Display for Panicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "panicked: {}", self.message)
    }
}

/// Runs `f`, a call into the code under check, catching a panic. What `f` touches is
/// dropped or thrown away after a panic, so no broken state is observed.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| Panicked { message: omni_protocol::tool::panic_message(payload.as_ref()) })
}

/// Runs `property` on `config.cases` values of `strategy`; the failure of the smallest
/// failing value proptest shrinks to, or `None` when every case held. A failure the
/// property did not describe (proptest gave up generating values) is `fallback`'s.
pub(crate) fn run<S: Strategy>(
    config: &Config,
    strategy: S,
    property: impl Fn(S::Value) -> Result<(), CheckFailure>,
    fallback: impl FnOnce(String) -> CheckFailure,
) -> Result<(), CheckFailure> {
    let runner_config = RunnerConfig { cases: config.cases, failure_persistence: None, ..RunnerConfig::default() };
    let mut runner = if config.random {
        TestRunner::new(runner_config)
    } else {
        let rng = TestRng::deterministic_rng(runner_config.rng_algorithm);
        TestRunner::new_with_rng(runner_config, rng)
    };
    // While shrinking, proptest calls the property again on smaller values; the last
    // failure recorded is the one on the value it reports.
    let last = RefCell::new(None);
    let outcome = runner.run(&strategy, |value| match property(value) {
        Ok(()) => Ok(()),
        Err(failure) => {
            let reason = failure.to_string();
            *last.borrow_mut() = Some(failure);
            Err(TestCaseError::fail(reason))
        }
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(error) => Err(last.into_inner().unwrap_or_else(|| fallback(describe(&error)))),
    }
}

/// What proptest said of a run that failed without a failure of ours.
fn describe<T: fmt::Debug>(error: &TestError<T>) -> String {
    match error {
        TestError::Abort(why) => format!("proptest gave up: {why}"),
        TestError::Fail(why, _) => format!("failed: {why}"),
    }
}

/// `text` cut to at most `max` characters for a report, with how much was left out.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({} more bytes)", &text[..at], text.len() - at),
    }
}
