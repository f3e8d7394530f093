//! Damaged input: bytes flipped, dropped, repeated or cut out; JSON events with a key
//! removed or a value of another type, repeated or dropped. Whatever comes, a decode is a
//! typed outcome, never a panic.

use omni_protocol::Dialect;
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::{decode, well_formed};
use crate::check::{clip, run, Check, CheckFailure, Config, Sample};

/// One damage to a body. Positions (`at`, `line`, `path`) are taken modulo what the
/// body has (its bytes, its JSON lines, the values in the chosen line), so any number
/// names one; [`Damage::apply`] says which it was.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Damage {
    /// One bit of a byte flipped.
    FlipBit {
        /// Which byte.
        at: usize,
        /// Which bit (taken modulo 8).
        bit: u8,
    },
    /// A byte dropped.
    DropByte {
        /// Which byte.
        at: usize,
    },
    /// A byte repeated.
    RepeatByte {
        /// Which byte.
        at: usize,
    },
    /// A span of bytes cut out.
    CutSpan {
        /// Where it starts.
        at: usize,
        /// How long it is (at least one byte, at most the rest of the body).
        len: usize,
    },
    /// A line holding a JSON object (an SSE `data:` line or an NDJSON line) repeated.
    RepeatEvent {
        /// Which of the JSON lines.
        line: usize,
    },
    /// A JSON line emptied.
    DropEvent {
        /// Which of the JSON lines.
        line: usize,
    },
    /// A value of a JSON line removed (a key, from an object) or set to null.
    RemoveValue {
        /// Which of the JSON lines.
        line: usize,
        /// Which of its values (in document order, the whole object first).
        path: usize,
    },
    /// A value of a JSON line replaced with `with`, of another type.
    ReplaceValue {
        /// Which of the JSON lines.
        line: usize,
        /// Which of its values.
        path: usize,
        /// The replacement.
        with: Value,
    },
}

impl Damage {
    /// `body` with this damage, and what was done (positions resolved); `None` when the
    /// body has nothing to damage this way (it is empty, or has no JSON line).
    pub fn apply(&self, body: &[u8]) -> Option<(Vec<u8>, String)> {
        let mut out = body.to_vec();
        let pick = |at: usize| if body.is_empty() { None } else { Some(at % body.len()) };
        let done = match *self {
            Self::FlipBit { at, bit } => {
                let at = pick(at)?;
                out[at] ^= 1 << (bit % 8);
                format!("bit {} of byte {at} flipped ({:?} to {:?})", bit % 8, body[at] as char, out[at] as char)
            }
            Self::DropByte { at } => {
                let at = pick(at)?;
                out.remove(at);
                format!("byte {at} ({:?}) dropped", body[at] as char)
            }
            Self::RepeatByte { at } => {
                let at = pick(at)?;
                out.insert(at, body[at]);
                format!("byte {at} ({:?}) repeated", body[at] as char)
            }
            Self::CutSpan { at, len } => {
                let at = pick(at)?;
                let end = (at + len.max(1)).min(body.len());
                out.drain(at..end);
                format!("bytes {at}..{end} cut out ({:?})", clip(&String::from_utf8_lossy(&body[at..end]), 40))
            }
            Self::RepeatEvent { .. }
            | Self::DropEvent { .. }
            | Self::RemoveValue { .. }
            | Self::ReplaceValue { .. } => {
                return self.apply_json(body);
            }
        };
        Some((out, done))
    }

    fn apply_json(&self, body: &[u8]) -> Option<(Vec<u8>, String)> {
        let text = std::str::from_utf8(body).ok()?;
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        let json_lines: Vec<usize> = (0..lines.len()).filter(|&i| json_of(&lines[i]).is_some()).collect();
        let (Self::RepeatEvent { line }
        | Self::DropEvent { line }
        | Self::RemoveValue { line, .. }
        | Self::ReplaceValue { line, .. }) = *self
        else {
            return None;
        };
        let at = *json_lines.get(line % json_lines.len().max(1))?;
        let done = match self {
            Self::RepeatEvent { .. } => {
                let copy = lines[at].clone();
                lines.insert(at, copy);
                format!("the JSON event on line {} repeated", at + 1)
            }
            Self::DropEvent { .. } => {
                lines[at].clear();
                format!("the JSON event on line {} dropped", at + 1)
            }
            Self::RemoveValue { path, .. } | Self::ReplaceValue { path, .. } => {
                let (prefix, mut value, suffix) = json_of(&lines[at])?;
                let paths = json_pointers(&value);
                let pointer = paths[path % paths.len()].clone();
                let what = match self {
                    Self::ReplaceValue { with, .. } => {
                        if let Some(slot) = value.pointer_mut(&pointer) {
                            *slot = with.clone();
                        }
                        format!("replaced by {}", clip(&with.to_string(), 40))
                    }
                    _ => remove(&mut value, &pointer),
                };
                lines[at] = format!("{prefix}{value}{suffix}");
                format!("line {}: the value at `{pointer}` {what}", at + 1)
            }
            _ => return None,
        };
        Some((lines.join("\n").into_bytes(), done))
    }
}

/// A line's prefix (`data: ` or nothing), its JSON object and a kept trailing CR.
fn json_of(line: &str) -> Option<(&'static str, Value, &'static str)> {
    let (line, suffix) = match line.strip_suffix('\r') {
        Some(line) => (line, "\r"),
        None => (line, ""),
    };
    let (prefix, json) = match line.strip_prefix("data:") {
        Some(rest) => ("data: ", rest.trim_start()),
        None => ("", line),
    };
    let value: Value = serde_json::from_str(json).ok()?;
    value.is_object().then_some((prefix, value, suffix))
}

/// JSON pointers (RFC 6901) of every value in `value`, the root (`""`) first: the places a
/// JSON damage can hit, for damages of your own.
pub fn json_pointers(value: &Value) -> Vec<String> {
    fn walk(value: &Value, at: &str, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map.iter().map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v)).collect(),
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => return,
        };
        for (key, child) in children {
            let path = format!("{at}/{key}");
            out.push(path.clone());
            walk(child, &path, out);
        }
    }
    let mut out = vec![String::new()];
    walk(value, "", &mut out);
    out
}

/// Removes the value at `pointer` from its object, or sets it to null elsewhere.
fn remove(root: &mut Value, pointer: &str) -> String {
    if let Some((parent, key)) = pointer.rsplit_once('/') {
        if let Some(Value::Object(map)) = root.pointer_mut(parent) {
            map.remove(&key.replace("~1", "/").replace("~0", "~"));
            return "removed".into();
        }
    }
    if let Some(slot) = root.pointer_mut(pointer) {
        *slot = Value::Null;
    }
    "set to null".into()
}

/// One to four damages to apply in order: mostly bytes, often one JSON damage.
pub fn damages() -> impl Strategy<Value = Vec<Damage>> {
    let index = || any::<usize>();
    let byte = prop_oneof![
        (index(), any::<u8>()).prop_map(|(at, bit)| Damage::FlipBit { at, bit }),
        index().prop_map(|at| Damage::DropByte { at }),
        index().prop_map(|at| Damage::RepeatByte { at }),
        (index(), 1..64usize).prop_map(|(at, len)| Damage::CutSpan { at, len }),
    ];
    let other = prop_oneof![
        Just(Value::Null),
        Just(Value::Bool(true)),
        Just(json!(-1)),
        Just(json!(1e300)),
        Just(json!(u64::MAX)),
        Just(Value::String(String::new())),
        (1..8usize).prop_map(|n| Value::String("\u{0}\u{fffd}𝄞".repeat(n))),
        Just(json!([])),
        Just(json!({})),
    ];
    let json_damage = prop_oneof![
        1 => index().prop_map(|line| Damage::RepeatEvent { line }),
        1 => index().prop_map(|line| Damage::DropEvent { line }),
        2 => (index(), index()).prop_map(|(line, path)| Damage::RemoveValue { line, path }),
        4 => (index(), index(), other).prop_map(|(line, path, with)| Damage::ReplaceValue { line, path, with }),
    ];
    prop_oneof![vec(byte, 1..=4), json_damage.prop_map(|d| vec![d])]
}

/// Each sample, damaged `config.cases` times ([`damages`]), decodes without a panic and
/// well formed ([`well_formed`]).
pub fn check_damage(dialect: Dialect, samples: &[Sample], config: &Config) -> Result<(), CheckFailure> {
    if samples.is_empty() {
        return Ok(());
    }
    let fail = |case: String, detail: String| CheckFailure::new(Check::Damage, dialect.name(), case, detail);
    run(
        config,
        (0..samples.len(), damages()),
        |(i, damages)| {
            let sample = &samples[i];
            let mut body = sample.body.clone();
            let mut done = Vec::new();
            for damage in &damages {
                if let Some((damaged, what)) = damage.apply(&body) {
                    body = damaged;
                    done.push(what);
                }
            }
            if done.is_empty() {
                return Ok(());
            }
            let case = || format!("sample `{}`, {}", sample.name, done.join(", then "));
            let decoded = decode(dialect, &config.model_id, &body, &[]).map_err(|p| fail(case(), p.to_string()))?;
            well_formed(&body, &decoded).map_err(|e| {
                let shown = clip(&String::from_utf8_lossy(&body), 600);
                fail(case(), format!("ill-formed: {e}\n  damaged body: {shown:?}"))
            })
        },
        |why| fail("generated damages".into(), why),
    )
}
