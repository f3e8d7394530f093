//! Reading `nodes.jsonl`: its records, the torn last one a crash may leave (left out
//! when loading, cut off before the next append), and where the next append goes.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use omni_protocol::session::Node;

use super::display;
use crate::{StoreError, StoreErrorKind};

/// The nodes of a `nodes.jsonl`, and the bytes of a torn last record left out: the last
/// line when it does not end in `\n`, or does but is not a node. A line in the middle that
/// is not a node is [`StoreErrorKind::Corrupt`] at `<location>:<line>`.
pub(super) fn parse_nodes(bytes: &[u8], location: &str) -> Result<(Vec<Node>, Option<usize>), StoreError> {
    let (whole, fragment) = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => bytes.split_at(end + 1),
        None => bytes.split_at(0),
    };
    let mut nodes = Vec::new();
    let mut lines = whole.split_inclusive(|&b| b == b'\n').enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        match serde_json::from_slice(&line[..line.len() - 1]) {
            Ok(node) => nodes.push(node),
            Err(_) if fragment.is_empty() && lines.peek().is_none() => return Ok((nodes, Some(line.len()))),
            Err(e) => {
                return Err(StoreError::new(StoreErrorKind::Corrupt, format!("{location}:{}", n + 1), e.to_string()));
            }
        }
    }
    Ok((nodes, (!fragment.is_empty()).then_some(fragment.len())))
}

/// Why the end of a nodes file could not be read.
pub(super) enum Tail {
    Io(io::Error),
    Corrupt(StoreError),
}

impl From<io::Error> for Tail {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Where the good records of a nodes file end (what follows is torn, by the same rule as
/// [`parse_nodes`]), and the id the next node must have. Reads only the last line or two.
pub(super) fn good_end(file: &mut File, path: &Path) -> Result<(u64, u64), Tail> {
    let len = file.metadata()?.len();
    let Some((start, end, line)) = last_line(file, len)? else { return Ok((0, 0)) };
    match serde_json::from_slice::<Node>(&line) {
        Ok(node) => Ok((end, node.id.0 + 1)),
        // A last line that ends in `\n` but is not a node is torn: cut from its start, and
        // the line before it decides the next id.
        Err(_) if end == len => match last_line(file, start)? {
            None => Ok((start, 0)),
            Some((_, _, before)) => match serde_json::from_slice::<Node>(&before) {
                Ok(node) => Ok((start, node.id.0 + 1)),
                Err(e) => Err(Tail::Corrupt(corrupt_before_end(path, &e))),
            },
        },
        Err(e) => Err(Tail::Corrupt(corrupt_before_end(path, &e))),
    }
}

fn corrupt_before_end(path: &Path, e: &serde_json::Error) -> StoreError {
    let message = format!("a line before the last is not a node ({e}); loading names its line");
    StoreError::new(StoreErrorKind::Corrupt, display(path), message)
}

/// The last `\n`-terminated line wholly before `end`: its start, its end (after the `\n`)
/// and its bytes (without it). Reads backwards in doubling windows, so a long file costs
/// about the length of its last line.
fn last_line(file: &mut File, end: u64) -> io::Result<Option<(u64, u64, Vec<u8>)>> {
    let mut window = 4096u64;
    loop {
        let start = end.saturating_sub(window);
        let mut buf = vec![0; usize::try_from(end - start).map_err(io::Error::other)?];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        if let Some(newline) = buf.iter().rposition(|&b| b == b'\n') {
            if let Some(before) = buf[..newline].iter().rposition(|&b| b == b'\n') {
                let line = buf[before + 1..newline].to_vec();
                return Ok(Some((start + before as u64 + 1, start + newline as u64 + 1, line)));
            }
            if start == 0 {
                buf.truncate(newline);
                return Ok(Some((0, newline as u64 + 1, buf)));
            }
        } else if start == 0 {
            return Ok(None);
        }
        window *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u64) -> String {
        format!(
            "{{\"id\":{id},\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}]}}}}\n"
        )
    }

    #[test]
    fn torn_records_are_only_ever_the_last() {
        let two = format!("{}{}", line(0), line(1));
        assert_eq!(parse_nodes(b"", "f").unwrap().0.len(), 0);
        let (nodes, torn) = parse_nodes(two.as_bytes(), "f").unwrap();
        assert_eq!((nodes.len(), torn), (2, None));
        let (nodes, torn) = parse_nodes(format!("{two}{{\"id\":2").as_bytes(), "f").unwrap();
        assert_eq!((nodes.len(), torn), (2, Some(7)), "a fragment without its newline");
        let (nodes, torn) = parse_nodes(format!("{two}\n").as_bytes(), "f").unwrap();
        assert_eq!((nodes.len(), torn), (2, Some(1)), "a last line that is not a node");
        let whole = line(2);
        let (nodes, torn) = parse_nodes(&whole.as_bytes()[..whole.len() - 1], "f").unwrap();
        assert_eq!((nodes.len(), torn), (0, Some(whole.len() - 1)), "a node never terminated was never saved");
        let error = parse_nodes(format!("{}junk\n{}", line(0), line(1)).as_bytes(), "f").unwrap_err();
        assert_eq!((error.kind, error.location.as_str()), (StoreErrorKind::Corrupt, "f:2"));
        let error = parse_nodes(format!("{}junk\n{{\"id\"", line(0)).as_bytes(), "f").unwrap_err();
        assert_eq!(error.location, "f:2", "a bad line before a fragment is in the middle");
    }
}
