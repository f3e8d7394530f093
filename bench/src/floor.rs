//! The floor: the least any client must do to get the deltas of a streamed reply. A
//! blocking socket, the request written once, the response read into one buffer, SSE
//! events found by memchr, and one typed, borrowed serde decode per event down to its
//! text or argument fragment (`omni_conformance::floor`'s `text_len` and
//! `tool_args_len`, as the decode benchmark's floor). No HTTP client, no channel, no task.
//!
//! The server answers with `content-length` and closes the connection, so the floor
//! reads until end of file. A fragment holding a `"` is escaped on the wire, so serde
//! must unescape it into an owned string (two allocations: its scratch buffer and the
//! string); the tool cases' arguments are letters, so only the first fragment is.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use memchr::memmem;
use omni_conformance::floor::{text_len, tool_args_len};
use omni_protocol::Dialect;

use crate::case::{Case, Tally};
use omni_conformance::heap::allocations;

/// Bytes per read, as omni's drivers read.
const READ: usize = 16 * 1024;

/// Runs `case` against the server at `base_url` (`http://127.0.0.1:port`).
pub fn run(case: Case, base_url: &str) -> io::Result<Tally> {
    let before = allocations();
    let mut tally = read_stream(case, base_url, &mut || {})?;
    tally.allocations = allocations() - before;
    Ok(tally)
}

/// Reads one stream of `case` from the server at `base_url`, as [`run`] does, without
/// counting allocations (the caller counts them for the whole process) and calling
/// `gate` once, as soon as the first read that holds a delta has been decoded (the
/// concurrency benchmark's barrier: every stream in flight at once). A stream that ends
/// or fails before any delta never calls `gate`: the caller must then pass its barrier.
pub fn read_stream(case: Case, base_url: &str, gate: &mut dyn FnMut()) -> io::Result<Tally> {
    let host = base_url.strip_prefix("http://").ok_or_else(|| io::Error::other("the floor speaks plain http"))?;
    let mut socket = TcpStream::connect(host)?;
    socket.write_all(request(case.dialect(), host).as_bytes())?;
    let data = memmem::Finder::new(b"data: ");
    let mut tally = Tally::default();
    let mut buf = vec![0u8; READ];
    let (mut filled, mut in_body, mut gated) = (0, false, false);
    loop {
        if buf.len() - filled < READ {
            buf.resize(filled + READ, 0);
        }
        let n = socket.read(&mut buf[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
        let mut start = 0;
        if !in_body {
            let Some(end) = memmem::find(&buf[..filled], b"\r\n\r\n") else { continue };
            if !buf.starts_with(b"HTTP/1.1 200 ") {
                return Err(io::Error::other("the server did not answer 200"));
            }
            (start, in_body) = (end + 4, true);
        }
        let from = start;
        for end in memmem::find_iter(&buf[from..filled], b"\n\n") {
            let event = &buf[start..from + end];
            if let Some(at) = data.find(event) {
                let payload = std::str::from_utf8(&event[at + 6..]).map_err(io::Error::other)?;
                tally.delta(delta_len(case, payload));
            }
            start = from + end + 2;
        }
        if !gated && tally.deltas > 0 {
            gated = true;
            gate();
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
    Ok(tally)
}

/// The request omni sends, in essence: the path, the key, a short prompt, streaming on.
fn request(dialect: Dialect, host: &str) -> String {
    let (path, headers, body) = match dialect {
        Dialect::AnthropicMessages => (
            "/v1/messages",
            "x-api-key: sk-replay\r\nanthropic-version: 2023-06-01\r\n",
            r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}"#,
        ),
        _ => (
            "/v1/chat/completions",
            "authorization: Bearer sk-replay\r\n",
            r#"{"model":"gpt-4o-mini","max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello."}]}"#,
        ),
    };
    format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\n{headers}content-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The length of the delta in one event's payload (0 when it has none).
fn delta_len(case: Case, payload: &str) -> usize {
    if case.is_tool() {
        tool_args_len(case.dialect(), payload)
    } else {
        text_len(case.dialect(), payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Scale;

    /// The floor's decode over a whole body, as `read_stream` frames it.
    fn decode(case: Case, body: &[u8]) -> Tally {
        let mut tally = Tally::default();
        let text = std::str::from_utf8(body).unwrap();
        for event in text.split("\n\n") {
            if let Some(at) = event.find("data: ") {
                tally.delta(delta_len(case, &event[at + 6..]));
            }
        }
        tally
    }

    #[test]
    fn the_floor_finds_every_delta_of_every_case() {
        let scale = Scale { text_deltas: 50, tool_bytes: 400 };
        for case in Case::ALL {
            let tally = decode(case, &case.body(scale));
            if case.is_tool() {
                let args = crate::case::tool_args(scale).len();
                assert_eq!(tally.deltas, args.div_ceil(crate::case::FRAGMENT) as u64, "{case}");
                assert_eq!(tally.bytes, args as u64, "{case}");
            } else {
                assert_eq!(tally.deltas, 50, "{case}");
                assert_eq!(tally.bytes, 50 * crate::case::WORD.len() as u64, "{case}");
            }
        }
    }
}
