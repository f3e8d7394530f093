//! The properties every [`CallParser`] must have, as checks written once: each protocol's
//! tests (unit and property) run them on its own inputs. Each returns `Err` with what was
//! wrong, for a proptest or an assertion to show.

use serde_json::{Map, Value};

use super::{merged, rebuilt, CallParser, Parsed, TextProtocol};
use crate::data::message::ToolSpec;

/// `text` parsed at once: fed whole, then finished.
pub fn parse_whole(protocol: &dyn TextProtocol, tools: &[ToolSpec], text: &str) -> Vec<Parsed> {
    let mut parser = protocol.parser(tools);
    let mut out = Vec::new();
    parser.feed(text, &mut out);
    parser.finish(&mut out);
    out
}

/// `text` parsed in the pieces that `cuts` (byte offsets, any order, any value) make:
/// each cut is moved back to the nearest character boundary (a parser reads `&str`; the
/// bytes of a character split across two network reads are joined before it, by the
/// stream's decoder). Also checks, after each piece, that what was given out plus what
/// is held back is what was fed, and that no more is held back than `bound` allows for
/// the text fed so far.
pub fn parse_in_pieces(
    protocol: &dyn TextProtocol,
    tools: &[ToolSpec],
    text: &str,
    cuts: &[usize],
    bound: &dyn Fn(&str) -> usize,
) -> Result<Vec<Parsed>, String> {
    let mut offsets: Vec<usize> = cuts.iter().map(|&c| floor_boundary(text, c.min(text.len()))).collect();
    offsets.push(text.len());
    offsets.sort_unstable();
    offsets.dedup();
    let mut parser: Box<dyn CallParser> = protocol.parser(tools);
    let mut out = Vec::new();
    let mut start = 0;
    for end in offsets {
        if end <= start {
            continue;
        }
        parser.feed(&text[start..end], &mut out);
        start = end;
        let fed = &text[..end];
        let given = rebuilt(&out).len();
        let held = parser.held();
        // Inside a call, the call's bytes count as held until its raw span comes out.
        if given + held != fed.len() {
            return Err(format!(
                "after {end} bytes: {given} given out and {held} held back do not add up (text {fed:?}, events {out:?})"
            ));
        }
        let allowed = bound(fed);
        if held > allowed {
            return Err(format!("after {end} bytes: {held} bytes held back, at most {allowed} allowed (text {fed:?})"));
        }
    }
    parser.finish(&mut out);
    Ok(out)
}

/// The largest character boundary of `text` at or before `at`.
pub fn floor_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The properties of one input: parsed whole and in `cuts`' pieces, the merged events are
/// equal; both rebuild the input exactly; holding back stays within `bound`; calls are
/// numbered 0, 1, 2… in order.
pub fn check_parse(
    protocol: &dyn TextProtocol,
    tools: &[ToolSpec],
    text: &str,
    cuts: &[usize],
    bound: &dyn Fn(&str) -> usize,
) -> Result<Vec<Parsed>, String> {
    let whole = parse_whole(protocol, tools, text);
    let pieces = parse_in_pieces(protocol, tools, text, cuts, bound)?;
    let (whole, pieces) = (merged(whole), merged(pieces));
    if whole != pieces {
        return Err(format!("split at {cuts:?}, the events differ:\n whole:  {whole:?}\n pieces: {pieces:?}"));
    }
    let again = rebuilt(&whole);
    if again != text {
        return Err(format!("lossy: the events rebuild {again:?}, not {text:?}"));
    }
    check_numbering(&whole)?;
    Ok(whole)
}

/// Every call's events carry the index of its place among the reply's calls.
fn check_numbering(events: &[Parsed]) -> Result<(), String> {
    let mut next = 0;
    let mut open: Option<usize> = None;
    for event in events {
        match event {
            Parsed::Text(_) | Parsed::Warning(_) => {}
            Parsed::CallStart { index, .. } => {
                if *index != next || open.is_some() {
                    return Err(format!("call {index} starts where call {next} was due: {events:?}"));
                }
                open = Some(*index);
            }
            Parsed::CallDelta { index, .. } => {
                if open != Some(*index) {
                    return Err(format!("a delta of call {index} outside it: {events:?}"));
                }
            }
            Parsed::CallEnd { index, .. } | Parsed::Invalid { index, .. } => {
                if *index != next || open.is_some_and(|o| o != *index) {
                    return Err(format!("call {index} ends where call {next} was due: {events:?}"));
                }
                open = None;
                next += 1;
            }
        }
    }
    Ok(())
}

/// The round trip: the call `format_call` writes, alone and between two pieces of prose,
/// parses back as one call to `tool` with exactly `arguments`, its deltas joining into the
/// same arguments, its raw span the formatted text.
pub fn check_round_trip(
    protocol: &dyn TextProtocol,
    tool: &ToolSpec,
    arguments: &Map<String, Value>,
) -> Result<(), String> {
    let name = tool.name.as_str();
    let call = protocol.format_call(name, arguments);
    let tools = [tool.clone()];
    for (before, after) in [("", ""), ("Let me look that up.\n", "\nDone.")] {
        let text = format!("{before}{call}{after}");
        let events = merged(parse_whole(protocol, &tools, &text));
        let calls: Vec<&Parsed> = events.iter().filter(|e| !matches!(e, Parsed::Text(_))).collect();
        let [Parsed::CallStart { index: 0, name: started }, rest @ ..] = calls.as_slice() else {
            return Err(format!("no call start for {call:?}: {events:?}"));
        };
        if started != name {
            return Err(format!("the call to {name:?} read back as {started:?}: {call:?}"));
        }
        let (deltas, end) = match rest {
            [Parsed::CallDelta { json, .. }, end] => (json.clone(), end),
            [end] => (String::new(), end),
            other => return Err(format!("unexpected events after the start: {other:?} for {call:?}")),
        };
        let Parsed::CallEnd { index: 0, arguments: read, raw } = end else {
            return Err(format!("the call did not end as a valid call: {end:?} for {call:?}"));
        };
        if read != arguments {
            return Err(format!("arguments {arguments:?} read back as {read:?} from {call:?}"));
        }
        if *raw != call {
            return Err(format!("the raw span {raw:?} is not the call written, {call:?}"));
        }
        let joined: Value = serde_json::from_str(&deltas).map_err(|e| format!("the deltas {deltas:?}: {e}"))?;
        if joined != Value::Object(arguments.clone()) {
            return Err(format!("the deltas join into {joined}, not the arguments {arguments:?}"));
        }
        let texts: String =
            events.iter().filter_map(|e| if let Parsed::Text(t) = e { Some(t.as_str()) } else { None }).collect();
        if texts != format!("{before}{after}") {
            return Err(format!("the prose around the call came out as {texts:?}"));
        }
    }
    Ok(())
}

/// Expected events, for the protocols' tests: written the same way in each.
pub mod expect {
    use serde_json::{Map, Value};

    use crate::text_tools::{InvalidCall, Parsed};

    /// `value`, which must be a JSON object, as a map.
    pub fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    /// A text event.
    pub fn text(text: &str) -> Parsed {
        Parsed::Text(text.to_owned())
    }

    /// A call's start.
    pub fn start(index: usize, name: &str) -> Parsed {
        Parsed::CallStart { index, name: name.to_owned() }
    }

    /// A piece of a call's arguments.
    pub fn delta(index: usize, json: &str) -> Parsed {
        Parsed::CallDelta { index, json: json.to_owned() }
    }

    /// A call's end with its arguments (`arguments` a JSON object) and raw span.
    pub fn end(index: usize, arguments: Value, raw: &str) -> Parsed {
        Parsed::CallEnd { index, arguments: object(arguments), raw: raw.to_owned() }
    }

    /// An invalid call's span and reason.
    pub fn invalid(index: usize, raw: &str, reason: InvalidCall) -> Parsed {
        Parsed::Invalid { index, raw: raw.to_owned(), reason }
    }
}

/// Where the prose of a reply leads, by the mention rules (the module doc of
/// [`text_tools`](super)), read by [`next_call`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prose {
    /// A call's opener begins here.
    Call(usize),
    /// No call opens in the text; a parser may hold back at most this many bytes of its
    /// end.
    End {
        /// The bound.
        hold: usize,
    },
}

/// A reference reading of the prose of `text` from `from` (the reply's start, or the end
/// of a call), written apart from the parsers' scanner: the whole text at once, with
/// lookahead. `opener` is the protocol's; `fenced` when it is a code fence (the `json`
/// protocol: other fenced blocks hide it, and it is a run of three backticks or more
/// followed by `tool_call`).
pub fn next_call(text: &str, from: usize, opener: &str, fenced: bool) -> Prose {
    const INFO: &str = "tool_call";
    let b = text.as_bytes();
    let len = b.len();
    let line_end = |at: usize| text[at..].find('\n').map(|n| at + n);
    let run_at = |at: usize| b[at..].iter().take_while(|&&c| c == b'`').count();
    // Whether an opener begins at `at` (for `fenced`, a run whose last three backticks do).
    let opener_at = |at: usize| -> Option<usize> {
        if fenced {
            let run = run_at(at);
            (run >= 3 && b[at + run..].starts_with(INFO.as_bytes())).then(|| at + run - 3)
        } else {
            b[at..].starts_with(opener.as_bytes()).then_some(at)
        }
    };
    // What may be held at the end of prose: a trailing backtick run (and, for `fenced`,
    // the start of `tool_call` after it), or the start of `<think>` or of the opener.
    let tail = |from: usize| -> usize {
        let rest = &text[from..];
        let mut hold = rest.len() - rest.trim_end_matches('`').len();
        if fenced {
            for k in 1..INFO.len() {
                if let Some(before) = rest.strip_suffix(&INFO[..k]) {
                    let run = before.len() - before.trim_end_matches('`').len();
                    if run >= 3 {
                        hold = hold.max(run + k);
                    }
                }
            }
        } else {
            hold = hold.max(super::partial_suffix(rest, opener));
        }
        hold.max(super::partial_suffix(rest, "<think>"))
    };
    let mut at = from;
    while at < len {
        let line_start = at == 0 || b[at - 1] == b'\n';
        match b[at] {
            b'`' => {
                let run = run_at(at);
                let end = at + run;
                if end == len {
                    break;
                }
                if let Some(call) = opener_at(at) {
                    return Prose::Call(call);
                }
                let eol = line_end(end);
                let rest_of_line = &text[end..eol.unwrap_or(len)];
                if fenced && line_start && run >= 3 && eol.is_some() && !rest_of_line.contains('`') {
                    // A fenced block: it ends at a line of `run` backticks or more and blanks.
                    let mut line = eol.unwrap_or(len) + 1;
                    loop {
                        let Some(stop) = line_end(line) else {
                            let last = &text[line..];
                            let closing = last.trim_start_matches('`').trim_matches([' ', '\t', '\r']).is_empty();
                            return Prose::End { hold: if closing { last.len() } else { 0 } };
                        };
                        let ticks = run_at(line);
                        if ticks >= run && text[line + ticks..stop].trim_matches([' ', '\t', '\r']).is_empty() {
                            break;
                        }
                        line = stop + 1;
                    }
                    at = line_end(line).map_or(len, |stop| stop + 1);
                    continue;
                }
                // An inline code span: closed by the next run of exactly `run` on the line.
                let mut k = end;
                let mut mention: Option<usize> = None;
                let stop = eol.unwrap_or(len);
                let mut closed = None;
                while k < stop {
                    if b[k] == b'`' {
                        let n = run_at(k);
                        if k + n == len {
                            break;
                        }
                        if n == run {
                            closed = Some(k + n);
                            break;
                        }
                        if mention.is_none() {
                            mention = opener_at(k);
                        }
                        k += n;
                    } else {
                        if !fenced && mention.is_none() {
                            mention = opener_at(k);
                        }
                        k += 1;
                    }
                }
                match (closed, mention, eol) {
                    (Some(close), _, _) => at = close,
                    // The span does not close on the line: its run is text, the opener a call.
                    (None, Some(call), Some(_)) => return Prose::Call(call),
                    (None, None, Some(eol)) => at = eol + 1,
                    // The text ends before telling: an opener in the span is held from its start.
                    (None, Some(call), None) => return Prose::End { hold: len - call },
                    (None, None, None) => return Prose::End { hold: tail(from) },
                }
            }
            b'<' if text[at..].starts_with("<think>") => match text[at..].find("</think>") {
                Some(close) => at += close + "</think>".len(),
                None => return Prose::End { hold: super::partial_suffix(&text[at + "<think>".len()..], "</think>") },
            },
            _ => match opener_at(at) {
                Some(call) if !fenced => return Prose::Call(call),
                _ => at += 1,
            },
        }
    }
    Prose::End { hold: tail(from) }
}
