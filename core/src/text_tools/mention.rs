//! Prose between calls, scanned for the protocol's opener, with *mentions* told apart
//! from calls: an opener inside inline code, inside a thinking block written in the text,
//! or (for a protocol whose opener is itself a code fence) inside another code block, is
//! text. The rules are in the parent module's doc ("What counts as a mention").
//!
//! The scanner reads each byte once, but for a short tail it cannot yet read (a backtick
//! run that may go on, a partial opener or think tag, a line that may be a closing
//! fence), which it keeps and reads again with the next piece; and an opener inside a
//! code span that is not closed yet, which it holds, read, until the span closes (a
//! mention: text) or the line ends (a call: the held text is the call's beginning).

use std::borrow::Cow;

use memchr::{memchr, memchr2, memchr3, memmem};

use super::Parsed;

/// Opens a thinking block written in the text.
pub(crate) const THINK_OPEN: &str = "<think>";
/// Closes it.
pub(crate) const THINK_CLOSE: &str = "</think>";
/// What follows a run of backticks in the `json` protocol's opener.
const FENCE_INFO: &[u8] = b"tool_call";

/// Where the prose is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Plain prose.
    Normal,
    /// In an inline code span opened on this line by a run of `n` backticks. `fence`: the
    /// run began the line, is at least three long and no backtick followed it on the line
    /// yet: if the line ends so, it opened a fenced code block (fence-aware protocols).
    Code { n: usize, fence: bool },
    /// An opener inside the code span of `n` backticks: held (from the opener) until a run
    /// of exactly `n` closes the span (a mention) or the line ends (a call).
    Undecided { n: usize },
    /// Inside `<think>` … `</think>`.
    Think,
    /// Inside a fenced code block opened by `n` backticks (fence-aware protocols).
    Fence { n: usize },
}

/// What reading a piece of prose found.
pub(crate) enum Scan<'t> {
    /// The piece was read (perhaps keeping a tail).
    Done,
    /// A call opens: `held` is the call's text after the opener that was held back, and
    /// `rest` what follows in the piece.
    Call { held: String, rest: &'t str },
}

/// The prose scanner of one reply (see the module's doc).
#[derive(Debug)]
pub(crate) struct Prose {
    /// The protocol's opener: `<tool_call>`, or ```` ```tool_call ````.
    opener: &'static str,
    /// Whether the opener is a code fence (then other code blocks hide it, and a run of
    /// three backticks or more followed by `tool_call` is the opener).
    fenced: bool,
    mode: Mode,
    /// The byte before the first unread one ends a line (or the reply has not begun).
    line_start: bool,
    /// Read but not given out: the undecided opener and what followed it.
    held: String,
    /// Not read yet: a tail that could not be read without what follows.
    pending: String,
}

impl Prose {
    pub(crate) fn new(opener: &'static str, fenced: bool) -> Self {
        Self { opener, fenced, mode: Mode::Normal, line_start: true, held: String::new(), pending: String::new() }
    }

    /// Bytes held back.
    pub(crate) fn held(&self) -> usize {
        self.held.len() + self.pending.len()
    }

    /// The reply ended: what is held is text.
    pub(crate) fn finish(&mut self, out: &mut Vec<Parsed>) {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(&std::mem::take(&mut self.pending));
        push_text(out, &text);
    }

    /// Reads `text`, giving out prose, until a call opens or the text ends.
    pub(crate) fn feed<'t>(&mut self, text: &'t str, out: &mut Vec<Parsed>) -> Scan<'t> {
        let carried = self.pending.len();
        let buf: Cow<'_, str> = if carried == 0 {
            Cow::Borrowed(text)
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.push_str(text);
            Cow::Owned(joined)
        };
        let s = buf.as_ref();
        let b = s.as_bytes();
        // `given`: given out (or moved to `held`) up to here; `at`: read up to here.
        let mut given = 0;
        let mut at = 0;
        // The offset in `text` of an offset in `buf` at or after `carried`.
        let in_text = |offset: usize| &text[offset - carried..];
        loop {
            match self.mode {
                Mode::Normal => {
                    let Some(found) = memchr3(b'`', b'<', b'\n', &b[at..]) else { break };
                    let here = at + found;
                    match b[here] {
                        b'\n' => {
                            at = here + 1;
                        }
                        b'`' => {
                            let line_start = if here == 0 { self.line_start } else { b[here - 1] == b'\n' };
                            let end = here + b[here..].iter().take_while(|&&c| c == b'`').count();
                            if end == b.len() {
                                return self.keep(s, given, here, out);
                            }
                            let n = end - here;
                            if self.fenced && n >= 3 {
                                match opener_tail(&b[end..]) {
                                    Tail::Yes => {
                                        push_text(out, &s[given..end - 3]);
                                        return self.call(String::new(), in_text(end + FENCE_INFO.len()));
                                    }
                                    Tail::Maybe => return self.keep(s, given, here, out),
                                    Tail::No => {}
                                }
                            }
                            self.mode = Mode::Code { n, fence: self.fenced && line_start && n >= 3 };
                            at = end;
                        }
                        _ => {
                            let rest = &s[here..];
                            if rest.starts_with(THINK_OPEN) {
                                self.mode = Mode::Think;
                                at = here + THINK_OPEN.len();
                            } else if !self.fenced && rest.starts_with(self.opener) {
                                push_text(out, &s[given..here]);
                                return self.call(String::new(), in_text(here + self.opener.len()));
                            } else if THINK_OPEN.starts_with(rest) || (!self.fenced && self.opener.starts_with(rest)) {
                                return self.keep(s, given, here, out);
                            } else {
                                at = here + 1;
                            }
                        }
                    }
                }
                Mode::Code { n, fence } => {
                    let found =
                        if self.fenced { memchr2(b'`', b'\n', &b[at..]) } else { memchr3(b'`', b'<', b'\n', &b[at..]) };
                    let Some(found) = found else { break };
                    let here = at + found;
                    match b[here] {
                        b'\n' => {
                            // The span never closed: its run was text; a bare fence line opened a block.
                            self.mode = if fence { Mode::Fence { n } } else { Mode::Normal };
                            at = here + 1;
                        }
                        b'`' => {
                            let end = here + b[here..].iter().take_while(|&&c| c == b'`').count();
                            if end == b.len() {
                                return self.keep(s, given, here, out);
                            }
                            let run = end - here;
                            self.mode = Mode::Code { n, fence: false };
                            if run == n {
                                self.mode = Mode::Normal;
                            } else if self.fenced && run >= 3 {
                                match opener_tail(&b[end..]) {
                                    Tail::Yes => {
                                        push_text(out, &s[given..end - 3]);
                                        self.held.push_str(&s[end - 3..end + FENCE_INFO.len()]);
                                        given = end + FENCE_INFO.len();
                                        self.mode = Mode::Undecided { n };
                                    }
                                    Tail::Maybe => {
                                        self.mode = Mode::Code { n, fence };
                                        return self.keep(s, given, here, out);
                                    }
                                    Tail::No => {}
                                }
                            }
                            at = if given > end { given } else { end };
                        }
                        _ => {
                            let rest = &s[here..];
                            if rest.starts_with(self.opener) {
                                push_text(out, &s[given..here]);
                                given = here + self.opener.len();
                                self.held.push_str(self.opener);
                                self.mode = Mode::Undecided { n };
                                at = given;
                            } else if self.opener.starts_with(rest) {
                                return self.keep(s, given, here, out);
                            } else {
                                at = here + 1;
                            }
                        }
                    }
                }
                Mode::Undecided { n } => {
                    let Some(found) = memchr2(b'`', b'\n', &b[at..]) else { break };
                    let here = at + found;
                    if b[here] == b'\n' {
                        // The span does not close on the opener's line: the opener opens a call.
                        let mut held = std::mem::take(&mut self.held);
                        held.push_str(&s[given..here]);
                        let after = held.split_off(self.opener.len());
                        return self.call(after, in_text(here));
                    }
                    let end = here + b[here..].iter().take_while(|&&c| c == b'`').count();
                    if end == b.len() {
                        return self.keep(s, given, here, out);
                    }
                    if end - here == n {
                        // The span closes: the opener was a mention.
                        let mut mention = std::mem::take(&mut self.held);
                        mention.push_str(&s[given..end]);
                        push_text(out, &mention);
                        given = end;
                        self.mode = Mode::Normal;
                    }
                    at = end;
                }
                Mode::Think => {
                    if let Some(found) = memmem::find(&b[at..], THINK_CLOSE.as_bytes()) {
                        at += found + THINK_CLOSE.len();
                        self.mode = Mode::Normal;
                        continue;
                    }
                    let keep = super::partial_suffix(&s[at..], THINK_CLOSE);
                    return self.keep(s, given, s.len() - keep, out);
                }
                Mode::Fence { n } => {
                    // At a line's start: a closing fence line ends the block.
                    let line_start = if at == 0 { self.line_start } else { b[at - 1] == b'\n' };
                    if line_start {
                        let ticks = b[at..].iter().take_while(|&&c| c == b'`').count();
                        let blanks = b[at + ticks..].iter().take_while(|&&c| matches!(c, b' ' | b'\t' | b'\r')).count();
                        match b.get(at + ticks + blanks) {
                            // The line may still be a closing fence: read it with what follows.
                            None if blanks == 0 || ticks >= n => return self.keep(s, given, at, out),
                            Some(b'\n') if ticks >= n => {
                                self.mode = Mode::Normal;
                                at += ticks + blanks + 1;
                                continue;
                            }
                            _ => {}
                        }
                    }
                    let Some(found) = memchr(b'\n', &b[at..]) else { break };
                    at += found + 1;
                }
            }
        }
        // Read to the end.
        if matches!(self.mode, Mode::Undecided { .. }) {
            self.held.push_str(&s[given..]);
        } else {
            push_text(out, &s[given..]);
        }
        self.line_start = s.as_bytes().last().map_or(self.line_start, |&c| c == b'\n');
        Scan::Done
    }

    /// Gives out `buf[given..keep]` (or holds it, undecided) and keeps `buf[keep..]` to read
    /// again with the next piece.
    fn keep<'t>(&mut self, buf: &str, given: usize, keep: usize, out: &mut Vec<Parsed>) -> Scan<'t> {
        if matches!(self.mode, Mode::Undecided { .. }) {
            self.held.push_str(&buf[given..keep]);
        } else {
            push_text(out, &buf[given..keep]);
        }
        if keep > 0 {
            self.line_start = buf.as_bytes()[keep - 1] == b'\n';
        }
        self.pending = buf[keep..].to_owned();
        Scan::Done
    }

    /// A call opens.
    fn call<'t>(&mut self, held: String, rest: &'t str) -> Scan<'t> {
        self.mode = Mode::Normal;
        self.line_start = false;
        Scan::Call { held, rest }
    }
}

/// Whether the bytes after a run of backticks complete the `json` opener.
enum Tail {
    Yes,
    /// They end before telling.
    Maybe,
    No,
}

fn opener_tail(after: &[u8]) -> Tail {
    if after.starts_with(FENCE_INFO) {
        Tail::Yes
    } else if FENCE_INFO.starts_with(after) {
        Tail::Maybe
    } else {
        Tail::No
    }
}

fn push_text(out: &mut Vec<Parsed>, text: &str) {
    if !text.is_empty() {
        out.push(Parsed::Text(text.to_owned()));
    }
}
