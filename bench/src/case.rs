//! What is measured: the cases (a dialect and a variant), their bodies, the clients, and
//! the one line a client prints about its run.

use std::fmt;

use omni_conformance::synth::{long_string_args, text_stream, tool_call_stream};
use omni_protocol::Dialect;

/// The text of every delta of the text cases (no JSON escaping needed).
pub const WORD: &str = "token ";
/// Text deltas of a full run, as issue 12 measured.
pub const FULL_DELTAS: usize = 100_000;
/// Bytes of tool arguments of a full run (1 MiB).
pub const FULL_TOOL_BYTES: usize = 1 << 20;
/// Bytes per tool-argument fragment.
pub const FRAGMENT: usize = 4;

/// A stream to serve: a dialect and a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// Chat Completions, text deltas.
    OpenaiText,
    /// Anthropic Messages, text deltas.
    AnthropicText,
    /// Chat Completions, one tool call's arguments in fragments.
    OpenaiTool,
    /// Anthropic Messages, one tool call's input in `input_json_delta` fragments.
    AnthropicTool,
}

impl Case {
    /// Every case, in the order of the report.
    pub const ALL: [Self; 4] = [Self::OpenaiText, Self::AnthropicText, Self::OpenaiTool, Self::AnthropicTool];

    /// The name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenaiText => "openai-text",
            Self::AnthropicText => "anthropic-text",
            Self::OpenaiTool => "openai-tool",
            Self::AnthropicTool => "anthropic-tool",
        }
    }

    /// The case of this name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The wire format.
    pub fn dialect(self) -> Dialect {
        match self {
            Self::OpenaiText | Self::OpenaiTool => Dialect::OpenaiCompletions,
            Self::AnthropicText | Self::AnthropicTool => Dialect::AnthropicMessages,
        }
    }

    /// True for the tool-argument variant (deltas are argument fragments, not text).
    pub fn is_tool(self) -> bool {
        matches!(self, Self::OpenaiTool | Self::AnthropicTool)
    }

    /// The deltas and their bytes in one stream of this case at `scale`: what every
    /// client must count (text deltas of [`WORD`], or the arguments in [`FRAGMENT`]-byte
    /// fragments).
    pub fn expected(self, scale: Scale) -> (u64, u64) {
        if self.is_tool() {
            let args = tool_args(scale).len();
            (args.div_ceil(FRAGMENT) as u64, args as u64)
        } else {
            (scale.text_deltas as u64, (scale.text_deltas * WORD.len()) as u64)
        }
    }

    /// The response body (SSE) of this case at `scale`.
    pub fn body(self, scale: Scale) -> Vec<u8> {
        if self.is_tool() {
            tool_call_stream(self.dialect(), &tool_args(scale), FRAGMENT).unwrap_or_default()
        } else {
            text_stream(self.dialect(), scale.text_deltas, WORD)
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of the tool cases: one long string (`{"text":"abcd…"}`), so that what
/// is measured is the cost per fragment. Arguments of many small values
/// (`synth::string_array_args`) would add the decoding of a tree of `bytes / 5` nodes
/// when the call ends, and every copy of it, which is another question; and their
/// fragments, each with a `"`, are escaped, so that no client could borrow them.
pub fn tool_args(scale: Scale) -> String {
    long_string_args(scale.tool_bytes)
}

/// How big the streams are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Text deltas of the text cases.
    pub text_deltas: usize,
    /// Bytes of arguments of the tool cases.
    pub tool_bytes: usize,
}

impl Scale {
    /// Issue 12's measurement: 100,000 text deltas, 1 MiB of arguments.
    pub const FULL: Self = Self { text_deltas: FULL_DELTAS, tool_bytes: FULL_TOOL_BYTES };

    /// `deltas` text deltas, and the tool arguments scaled alike (1 MiB at 100,000).
    pub fn with_deltas(deltas: usize) -> Self {
        let tool_bytes = (deltas as u64 * FULL_TOOL_BYTES as u64 / FULL_DELTAS as u64) as usize;
        Self { text_deltas: deltas.max(1), tool_bytes: tool_bytes.max(64) }
    }
}

/// A client of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// The least any client must do: a blocking socket, memchr framing, one borrowed
    /// typed serde decode per event.
    Floor,
    /// omni-tokio on a multi-thread runtime, as `#[tokio::main]` builds it.
    Tokio,
    /// omni-tokio on a current-thread runtime (informational).
    TokioCurrent,
    /// omni-smol under `smol::block_on`.
    Smol,
    /// omni-blocking, an `Iterator` of events.
    Blocking,
}

impl ClientKind {
    /// Every client, the floor first.
    pub const ALL: [Self; 5] = [Self::Floor, Self::Tokio, Self::TokioCurrent, Self::Smol, Self::Blocking];

    /// The name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Floor => "floor",
            Self::Tokio => "tokio",
            Self::TokioCurrent => "tokio-current",
            Self::Smol => "smol",
            Self::Blocking => "blocking",
        }
    }

    /// The client of this name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for ClientKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a client counted over its one call; printed as one line by the client binary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Deltas of the case's kind (text, or tool arguments) with at least one byte.
    pub deltas: u64,
    /// Their bytes (text, or argument JSON, unescaped).
    pub bytes: u64,
    /// Allocations from the start of the call to the end of the stream (every thread).
    pub allocations: u64,
}

impl Tally {
    /// Counts one delta of `text`; empty ones are not deltas.
    pub fn delta(&mut self, len: usize) {
        if len > 0 {
            self.deltas += 1;
            self.bytes += len as u64;
        }
    }

    /// The line the client binary prints.
    pub fn line(&self) -> String {
        format!("deltas={} bytes={} allocations={}", self.deltas, self.bytes, self.allocations)
    }

    /// Reads a [`Tally::line`].
    pub fn parse(line: &str) -> Option<Self> {
        let mut tally = Self::default();
        let mut seen = 0;
        for field in line.split_whitespace() {
            let (name, value) = field.split_once('=')?;
            let value = value.parse().ok()?;
            match name {
                "deltas" => tally.deltas = value,
                "bytes" => tally.bytes = value,
                "allocations" => tally.allocations = value,
                _ => return None,
            }
            seen += 1;
        }
        (seen == 3).then_some(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_line_reads_back() {
        let tally = Tally { deltas: 3, bytes: 18, allocations: 7 };
        assert_eq!(Tally::parse(&tally.line()), Some(tally));
        assert_eq!(Tally::parse("deltas=3 bytes=18"), None);
        assert_eq!(Tally::parse("deltas=3 bytes=x allocations=1"), None);
    }

    #[test]
    fn names_read_back() {
        for case in Case::ALL {
            assert_eq!(Case::parse(case.name()), Some(case));
        }
        for client in ClientKind::ALL {
            assert_eq!(ClientKind::parse(client.name()), Some(client));
        }
    }

    #[test]
    fn scale_keeps_the_proportion_of_the_full_run() {
        assert_eq!(Scale::with_deltas(FULL_DELTAS), Scale::FULL);
        assert_eq!(Scale::with_deltas(10_000).tool_bytes, FULL_TOOL_BYTES / 10);
    }
}
