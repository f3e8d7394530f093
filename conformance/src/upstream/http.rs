//! Raw HTTP/1.1 messages: httprr transcripts (langchaingo) and curl `-D` header dumps.
//!
//! An httprr file is:
//!
//! ```text
//!  httprr trace v1\n
//!  <reqlen> <resplen>\n          ┐
//!  <reqlen bytes: raw request>   │ repeated once per interaction
//!  <resplen bytes: raw response> ┘
//! ```
//!
//! Responses may keep their `Transfer-Encoding: chunked` framing, which is removed here so
//! the body is what a client would hand to a decoder.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{check_streaming, ContainerFormat, Corpus, FileContext, LoadError, Response, Skipped};

const HTTPRR_MAGIC: &[u8] = b"httprr trace v1\n";

pub(super) fn load_httprr(file: &FileContext, corpus: &mut Corpus) -> Result<(), LoadError> {
    let mut rest = file.bytes.strip_prefix(HTTPRR_MAGIC).ok_or_else(|| file.malformed("no httprr header line"))?;
    let mut i = 0;
    while !rest.is_empty() {
        let err = |reason: String| file.malformed(format!("interaction {i}: {reason}"));
        let nl = rest.iter().position(|&b| b == b'\n').ok_or_else(|| err("no length line".into()))?;
        let lengths = std::str::from_utf8(&rest[..nl]).map_err(|e| err(e.to_string()))?;
        let mut parts = lengths.split(' ').map(str::parse::<usize>);
        let (Some(Ok(req_len)), Some(Ok(resp_len)), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err(format!("bad length line {lengths:?}")));
        };
        rest = &rest[nl + 1..];
        let total = req_len.checked_add(resp_len).filter(|&t| t <= rest.len());
        let total = total.ok_or_else(|| err(format!("lengths {req_len} + {resp_len} overrun the file")))?;
        let (request, response) = rest[..total].split_at(req_len);
        rest = &rest[total..];

        let request = parse_message(request).map_err(|e| err(format!("request: {e}")))?;
        let url = request.start_line.split(' ').nth(1).unwrap_or_default().to_string();
        let request_body = if request.body.is_empty() {
            None
        } else {
            Some(serde_json::from_slice::<Value>(&request.body).map_err(|e| err(format!("request body: {e}")))?)
        };
        let message = parse_message(response).map_err(|e| err(format!("response: {e}")))?;
        let status = status_code(&message.start_line).ok_or_else(|| err("bad response status line".into()))?;
        let response = Response { status, headers: message.headers, body: message.body, request_body };
        match check_streaming(response.request_body.as_ref(), &url, &response, file.dialect) {
            Ok(()) => corpus.recordings.push(file.recording(i, ContainerFormat::Httprr, response)),
            Err(reason) => corpus.skipped.push(Skipped { file: file.rel.clone(), interaction: i, reason }),
        }
        i += 1;
    }
    Ok(())
}

/// One parsed HTTP message.
struct Message {
    start_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Splits a raw HTTP/1.1 message into its start line, headers and (de-chunked) body.
/// Lines may end in CRLF or a bare LF (upstream edited some header lines by hand).
fn parse_message(raw: &[u8]) -> Result<Message, String> {
    let mut pos = 0;
    let mut lines = Vec::new();
    loop {
        let nl = raw[pos..].iter().position(|&b| b == b'\n').ok_or("headers do not end")?;
        let line = &raw[pos..pos + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos += nl + 1;
        if line.is_empty() {
            break;
        }
        lines.push(std::str::from_utf8(line).map_err(|e| format!("header line not UTF-8: {e}"))?.to_string());
    }
    let mut lines = lines.into_iter();
    let start_line = lines.next().ok_or("empty message")?;
    let headers = lines.map(|l| split_header(&l)).collect::<Result<Vec<_>, _>>()?;
    let header = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    let raw_body = &raw[pos..];
    if let Some(encoding) = header("content-encoding").filter(|e| !e.eq_ignore_ascii_case("identity")) {
        return Err(format!("compressed body ({encoding}) is not supported"));
    }
    let chunked = header("transfer-encoding").is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    let body = if chunked { dechunk(raw_body)? } else { raw_body.to_vec() };
    if let Some(len) = header("content-length").filter(|_| !chunked) {
        let len: usize = len.trim().parse().map_err(|_| format!("bad content-length {len:?}"))?;
        if len != body.len() {
            return Err(format!("content-length {len} but the body has {} bytes", body.len()));
        }
    }
    Ok(Message { start_line, headers, body })
}

fn split_header(line: &str) -> Result<(String, String), String> {
    let (name, value) = line.split_once(':').ok_or_else(|| format!("header line without a colon: {line:?}"))?;
    Ok((name.trim().to_string(), value.trim().to_string()))
}

/// `HTTP/1.1 200 OK` -> 200.
fn status_code(status_line: &str) -> Option<u16> {
    let mut parts = status_line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

/// Removes chunked transfer encoding: `<hex size>[;ext]\r\n<data>\r\n` ... `0\r\n[trailers]\r\n`.
fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::with_capacity(raw.len());
    loop {
        let nl = raw.iter().position(|&b| b == b'\n').ok_or("chunk size line does not end")?;
        let line = std::str::from_utf8(&raw[..nl]).map_err(|_| "chunk size line is not text")?;
        let size_hex = line.trim_end_matches('\r').split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {size_hex:?}"))?;
        raw = &raw[nl + 1..];
        if size == 0 {
            return Ok(body); // trailers, if any, are not part of the body
        }
        let data = raw.get(..size).ok_or_else(|| format!("chunk of {size} bytes overruns the body"))?;
        body.extend_from_slice(data);
        raw = &raw[size..];
        raw = raw
            .strip_prefix(b"\r\n")
            .or_else(|| raw.strip_prefix(b"\n"))
            .ok_or("chunk data not followed by a line end")?;
    }
}

/// Parses a `curl -D` dump: the last status line and its headers (earlier blocks such as
/// `100 Continue` are interim responses).
pub(super) fn parse_curl_headers(raw: &[u8]) -> Result<(u16, Vec<(String, String)>), String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("headers not UTF-8: {e}"))?;
    let mut result = None;
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r')).peekable();
    while let Some(line) = lines.next() {
        let Some(status) = status_code(line) else { continue };
        let mut headers = Vec::new();
        while let Some(h) = lines.next_if(|l| !l.is_empty()) {
            headers.push(split_header(h)?);
        }
        result = Some((status, headers));
    }
    result.ok_or_else(|| "no HTTP status line".to_string())
}

/// The `| peer | case | endpoint | ... |` rows of the local-peers README, as
/// `<peer>--<case>` -> endpoint.
pub(super) fn local_peer_endpoints(readme: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in readme.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if let [peer, case, endpoint, ..] = cells.as_slice() {
            if endpoint.starts_with('/') {
                out.insert(format!("{peer}--{case}"), endpoint.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunks_with_extensions_and_trailers() {
        let raw = b"4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: t\r\n\r\n";
        assert_eq!(dechunk(raw).as_deref(), Ok(&b"Wikipedia"[..]));
        assert!(dechunk(b"zz\r\n").is_err());
        assert!(dechunk(b"10\r\nshort\r\n").is_err());
    }

    #[test]
    fn parses_a_message_with_mixed_line_ends() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\nContent-Length: 2\r\n\r\nhi";
        let m = parse_message(raw).unwrap();
        assert_eq!(status_code(&m.start_line), Some(200));
        assert_eq!(m.headers.len(), 2);
        assert_eq!(m.body, b"hi");
        assert!(parse_message(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhi").is_err());
    }

    #[test]
    fn keeps_the_last_curl_header_block() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nX: y\r\n\r\n";
        assert_eq!(parse_curl_headers(raw), Ok((404, vec![("X".into(), "y".into())])));
    }
}
