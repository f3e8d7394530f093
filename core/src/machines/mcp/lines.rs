//! stdio framing: one JSON-RPC message per line, every line bounded.
//!
//! The core's NDJSON decoder stops at an over-long line (a provider's stream is over at
//! that point); an MCP server's stdout is a long-lived channel shared by every request,
//! so one bad line must cost that line only. Hence this splitter: a line past the limit is
//! reported once and its remaining bytes are skipped as they arrive, never buffered.

use memchr::memchr;

/// What the splitter found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A whole line, its `\n` (and a `\r` before it) removed.
    Whole(&'a [u8]),
    /// A line grew past the limit; the rest of it is being skipped.
    TooLong,
}

/// Splits stdout bytes into lines of at most `max` bytes.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    /// Inside an over-long line: bytes up to the next `\n` are dropped.
    skipping: bool,
}

impl LineSplitter {
    pub(crate) fn new(max: usize) -> Self {
        Self { buf: Vec::new(), max, skipping: false }
    }

    /// Feeds a chunk, calling `on_line` for every line it completes (and once for a line
    /// that grows too long).
    pub(crate) fn feed(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(Line<'_>)) {
        while !chunk.is_empty() {
            let end = memchr(b'\n', chunk);
            let (piece, rest) = match end {
                Some(at) => (&chunk[..at], &chunk[at + 1..]),
                None => (chunk, &[][..]),
            };
            chunk = rest;
            if self.skipping {
                // The over-long line ends at this `\n`; what follows is a fresh line.
                self.skipping = end.is_none();
                continue;
            }
            if self.buf.len() + piece.len() > self.max {
                self.buf.clear();
                self.skipping = end.is_none();
                on_line(Line::TooLong);
                continue;
            }
            if end.is_none() {
                self.buf.extend_from_slice(piece);
                continue;
            }
            // A whole line: borrowed from the chunk when nothing was buffered before it.
            if self.buf.is_empty() {
                on_line(Line::Whole(trim_cr(piece)));
            } else {
                self.buf.extend_from_slice(piece);
                let line = std::mem::take(&mut self.buf);
                on_line(Line::Whole(trim_cr(&line)));
                self.buf = line;
                self.buf.clear();
            }
        }
    }

    /// The bytes of an unterminated last line, if any (the stream ended inside it).
    pub(crate) fn finish(&mut self) -> Option<Vec<u8>> {
        self.skipping = false;
        let rest = std::mem::take(&mut self.buf);
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(splitter: &mut LineSplitter, chunks: &[&[u8]]) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.feed(chunk, |line| {
                out.push(match line {
                    Line::Whole(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                    Line::TooLong => None,
                })
            });
        }
        out
    }

    #[test]
    fn lines_are_the_same_however_the_bytes_are_split() {
        let text = b"{\"a\":1}\r\n{\"b\":2}\n\n{\"c\":3}\n";
        let whole = lines(&mut LineSplitter::new(64), &[text]);
        assert_eq!(
            whole,
            vec![Some("{\"a\":1}".into()), Some("{\"b\":2}".into()), Some(String::new()), Some("{\"c\":3}".into())]
        );
        for at in 0..text.len() {
            let (a, b) = text.split_at(at);
            assert_eq!(lines(&mut LineSplitter::new(64), &[a, b]), whole, "split at {at}");
        }
    }

    #[test]
    fn an_over_long_line_is_reported_once_and_skipped_without_buffering() {
        let mut splitter = LineSplitter::new(8);
        let mut seen = lines(&mut splitter, &[b"0123456", b"789abc", b"defgh", b"ij\nok\n"]);
        assert_eq!(seen, vec![None, Some("ok".into())]);
        assert!(splitter.buf.capacity() <= 16, "the long line was never held: {}", splitter.buf.capacity());
        seen = lines(&mut splitter, &[b"0123456789\nfine\n"]);
        assert_eq!(seen, vec![None, Some("fine".into())]);
    }

    #[test]
    fn a_cut_last_line_is_handed_back() {
        let mut splitter = LineSplitter::new(64);
        assert!(lines(&mut splitter, &[b"{\"a\":"]).is_empty());
        assert_eq!(splitter.finish(), Some(b"{\"a\":".to_vec()));
        assert_eq!(splitter.finish(), None);
    }
}
