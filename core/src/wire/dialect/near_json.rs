//! Inputs for the differential property tests of the hot-event readers (Anthropic's
//! `hot::exact`, Chat Completions' `fast::chunk`): JSON built near a plain shape, each
//! case taking its parts in their plain form except for a few classes of change
//! ([`Wild`]), each applied to some of the places it can go. Whatever a fast reader
//! accepts, the serde decoder must read the same.

use std::fmt::Write as _;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use std::cell::Cell;

use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// How many classes of change there are (the bits of [`Wild`]).
pub(crate) const CLASSES: u32 = 7;

// Differential properties: whatever the fast path reads, the decoder reads the same.
// Inputs are built near the hot shape: a case takes its parts in their plain form
// (read by the fast path) except for a few classes of change ([`Wild`]), each
// applied to some of the places it can go.

/// The classes of change a case applies, one bit each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wild(u32);

impl Wild {
    /// Whitespace at token boundaries.
    pub(crate) const SPACE: u32 = 0;
    /// The payload cut short, or bytes after it.
    pub(crate) const END: u32 = 1;
    /// Objects: keys shuffled, repeated, escaped, added or left out.
    pub(crate) const SHAPE: u32 = 2;
    /// Numbers in any form: twenty digits and more, leading zeros, signs, fractions.
    pub(crate) const NUMBER: u32 = 3;
    /// Strings with escapes, quotes, backslashes, control characters, written escaped.
    pub(crate) const STRING: u32 = 4;
    /// Values of another type: a scalar for an object, an object for a string.
    pub(crate) const TYPE: u32 = 5;
    /// Values and keys this file's format names otherwise (see [`CLASSES`]).
    pub(crate) const OTHER: u32 = 6;

    pub(crate) fn on(self, class: u32) -> bool {
        self.0 & (1 << class) != 0
    }

    /// `normal`, or when `class` is on, `normal` or `odd` alike.
    pub(crate) fn either<T: std::fmt::Debug + 'static>(
        self,
        class: u32,
        normal: BoxedStrategy<T>,
        odd: BoxedStrategy<T>,
    ) -> BoxedStrategy<T> {
        if self.on(class) {
            prop_oneof![normal, odd].boxed()
        } else {
            normal
        }
    }

    /// No class (a third of the cases), one, two, or any.
    pub(crate) fn any() -> BoxedStrategy<Self> {
        prop_oneof![
            3 => Just(0),
            4 => (0..CLASSES).prop_map(|a| 1 << a),
            2 => (0..CLASSES, 0..CLASSES).prop_map(|(a, b)| (1 << a) | (1 << b)),
            1 => any::<u32>().prop_map(|m| m & ((1 << CLASSES) - 1)),
        ]
        .prop_map(Wild)
        .boxed()
    }
}

/// A JSON value by its tokens: scalars as written (a number, `null`, an encoded
/// string, or text that is not JSON at all), objects and arrays by their parts
/// (keys unencoded, with whether to escape them).
#[derive(Debug, Clone)]
pub(crate) enum J {
    Raw(String),
    Obj(Vec<(String, Self, bool)>),
    Arr(Vec<Self>),
}

pub(crate) fn raw(text: &str) -> J {
    J::Raw(text.to_string())
}

impl J {
    pub(crate) fn tokens(&self, out: &mut Vec<String>) {
        match self {
            Self::Raw(text) => out.push(text.clone()),
            Self::Obj(entries) => {
                out.push("{".into());
                for (i, (key, value, escaped)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(",".into());
                    }
                    out.push(encode(key, if *escaped { Enc::AllEscaped } else { Enc::Raw }));
                    out.push(":".into());
                    value.tokens(out);
                }
                out.push("}".into());
            }
            Self::Arr(items) => {
                out.push("[".into());
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(",".into());
                    }
                    item.tokens(out);
                }
                out.push("]".into());
            }
        }
    }
}

/// How a string is written: as is (not JSON if it holds a quote, a backslash or a
/// control character), escaped by serde_json, every UTF-16 unit as `\uXXXX`, or
/// escaped by serde_json with `/` as `\/`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Enc {
    Raw,
    Serde,
    AllEscaped,
    SlashEscaped,
}

pub(crate) fn encode(text: &str, enc: Enc) -> String {
    match enc {
        Enc::Raw => format!("\"{text}\""),
        Enc::Serde => serde_json::to_string(text).unwrap(),
        Enc::AllEscaped => {
            let mut out = String::from("\"");
            for unit in text.encode_utf16() {
                write!(out, "\\u{unit:04x}").unwrap();
            }
            out + "\""
        }
        Enc::SlashEscaped => serde_json::to_string(text).unwrap().replace('/', "\\/"),
    }
}

/// Text a JSON string holds unescaped: arbitrary Unicode but quotes, backslashes
/// and control characters.
pub(crate) fn plain() -> BoxedStrategy<String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9 .,:{}\\[\\]]{1,6}",
        2 => select(&["é", "😀", "</", "</script>", "\u{2028}", "\u{7f}", "\u{feff}", "}}", "]}", "\u{10ffff}", "null"][..])
            .prop_map(String::from),
        1 => any::<char>().prop_map(String::from),
    ];
    let strip = |s: String| s.replace(|c: char| c == '"' || c == '\\' || c < ' ', "");
    prop_oneof![
        1 => Just(String::new()),
        6 => vec(piece, 1..5).prop_map(move |pieces| strip(pieces.concat())),
        2 => any::<String>().prop_map(strip),
    ]
    .boxed()
}

/// Text with what a JSON string must escape, or what a scanner could trip on.
pub(crate) fn odd_text() -> BoxedStrategy<String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9 .,:{}\\[\\]]{1,6}",
        4 => select(&["\"", "\\", "\\u0041", "\\ud83d\\ude00", "\\n", "\\\"", "\"}}", "\",\"", "\"]}", "\":\""][..])
            .prop_map(String::from),
        2 => prop_oneof![0u32..0x20, Just(0x1f)].prop_map(|c| char::from_u32(c).unwrap().to_string()),
        1 => any::<char>().prop_map(String::from),
    ];
    prop_oneof![3 => vec(piece, 1..5).prop_map(|pieces| pieces.concat()), 1 => any::<String>()].boxed()
}

/// A string: plain text as is; odd text or written escaped under [`Wild::STRING`].
pub(crate) fn string(w: Wild) -> BoxedStrategy<J> {
    let normal = plain().prop_map(|text| J::Raw(encode(&text, Enc::Raw))).boxed();
    let enc = prop_oneof![
        3 => Just(Enc::Raw),
        3 => Just(Enc::Serde),
        1 => Just(Enc::AllEscaped),
        1 => Just(Enc::SlashEscaped),
    ];
    let odd = (prop_oneof![plain(), odd_text()], enc).prop_map(|(text, enc)| J::Raw(encode(&text, enc))).boxed();
    w.either(Wild::STRING, normal, odd)
}

/// A non-negative integer, small mostly, in any form under [`Wild::NUMBER`].
pub(crate) fn number(w: Wild) -> BoxedStrategy<J> {
    let normal = prop_oneof![
        6 => (0u64..20).prop_map(|n| n.to_string()),
        1 => (0u64..=9_999_999_999_999_999_999).prop_map(|n| n.to_string()),
    ];
    let odd = prop_oneof![
        2 => any::<u64>().prop_map(|n| n.to_string()),
        2 => "[0-9]{1,22}".boxed(),
        1 => select(&["18446744073709551615", "18446744073709551616", "10000000000000000000", "-0", "0.0"][..])
            .prop_map(String::from),
        1 => "-[0-9]{1,3}".boxed(),
        1 => "[0-9]{1,3}\\.[0-9]{1,3}".boxed(),
        1 => "-?[0-9]{1,2}(\\.[0-9])?[eE][+-]?[0-9]{1,2}".boxed(),
    ];
    w.either(Wild::NUMBER, normal.prop_map(J::Raw).boxed(), odd.prop_map(J::Raw).boxed())
}

/// Any scalar, or a small object or array.
pub(crate) fn scalar(w: Wild) -> BoxedStrategy<J> {
    prop_oneof![
        3 => number(w),
        3 => string(w),
        3 => Just(raw("null")),
        1 => select(&["true", "false", "{}", "[]", "{\"a\":[1,\"b\"]}", "[null]", "nul", "tru"][..]).prop_map(raw),
    ]
    .boxed()
}

/// `value`, or under [`Wild::TYPE`] any other value.
pub(crate) fn typed(w: Wild, value: BoxedStrategy<J>) -> BoxedStrategy<J> {
    w.either(Wild::TYPE, value, scalar(w))
}

/// An object of `fields` (the entries present, in order); under [`Wild::SHAPE`]
/// shuffled, with a key repeated, a key escaped or keys from `extra` added.
pub(crate) fn object(
    w: Wild,
    fields: BoxedStrategy<Vec<(String, J)>>,
    extra: &'static [&'static str],
) -> BoxedStrategy<J> {
    let plain = fields.clone().prop_map(|fields| J::Obj(fields.into_iter().map(|(k, v)| (k, v, false)).collect()));
    if !w.on(Wild::SHAPE) {
        return plain.boxed();
    }
    let extras = vec((select(extra), scalar(w)), 1..3);
    let shape = (
        prop::option::weighted(0.3, any::<u64>()),
        prop::option::weighted(0.3, any::<usize>()),
        prop::option::weighted(0.3, extras),
        prop::option::weighted(0.1, any::<usize>()),
    );
    let odd = (fields, shape).prop_map(|(fields, (shuffle, repeat, extras, escape))| {
        let mut entries: Vec<(String, J, bool)> = fields.into_iter().map(|(k, v)| (k, v, false)).collect();
        entries.extend(extras.into_iter().flatten().map(|(k, v)| (k.to_string(), v, false)));
        let len = entries.len();
        if let (Some(i), true) = (repeat, len > 0) {
            entries.push(entries[i % len].clone());
        }
        if let Some(mut seed) = shuffle {
            for i in (1..entries.len()).rev() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                entries.swap(i, (seed >> 33) as usize % (i + 1));
            }
        }
        if let (Some(i), true) = (escape, len > 0) {
            entries[i % len].2 = true;
        }
        J::Obj(entries)
    });
    prop_oneof![plain, odd].boxed()
}

/// `key` with a value from `value`: present with probability `p`, and at most as
/// often as 0.85 under [`Wild::SHAPE`].
pub(crate) fn field(w: Wild, key: &'static str, p: f64, value: BoxedStrategy<J>) -> BoxedStrategy<Option<(String, J)>> {
    let value = value.prop_map(move |v| (key.to_string(), v));
    let p = if w.on(Wild::SHAPE) { p.min(0.85) } else { p };
    if p >= 1.0 {
        value.prop_map(Some).boxed()
    } else {
        prop::option::weighted(p, value).boxed()
    }
}

/// The fields present.
pub(crate) fn present(fields: Vec<BoxedStrategy<Option<(String, J)>>>) -> BoxedStrategy<Vec<(String, J)>> {
    fields.prop_map(|fields| fields.into_iter().flatten().collect()).boxed()
}

/// The payload of `json`: under [`Wild::SPACE`] with whitespace at token boundaries
/// (`ws` cycled through), under [`Wild::END`] cut short or with bytes after it.
pub(crate) fn render(json: &J, ws: &[u8], end: Option<(bool, usize, &str)>) -> String {
    pub(crate) const WS: &[&str] = &["", "", "", "", " ", "\n", "\t", "\r\n", "  "];
    let mut tokens = Vec::new();
    json.tokens(&mut tokens);
    tokens.push(String::new());
    let mut out = String::new();
    for (i, token) in tokens.iter().enumerate() {
        if let Some(w) = ws.get(i % ws.len().max(1)) {
            out += WS[usize::from(*w) % WS.len()];
        }
        out += token;
    }
    match end {
        None => {}
        Some((true, n, _)) => {
            let mut cut = out.len().saturating_sub(1 + n % out.len().max(1));
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
        }
        Some((false, _, tail)) => out += tail,
    }
    out
}

pub(crate) fn payload(w: Wild, json: BoxedStrategy<J>) -> BoxedStrategy<String> {
    let ws = if w.on(Wild::SPACE) { vec(any::<u8>(), 1..40).boxed() } else { Just(Vec::new()).boxed() };
    let end = if w.on(Wild::END) {
        let tails = select(&[" ", "\n", "}", "]", "x", ",", "{}", "\"", "\u{0}", "\u{a0}"][..]);
        (any::<bool>(), any::<usize>(), tails).prop_map(Some).boxed()
    } else {
        Just(None).boxed()
    };
    (json, ws, end).prop_map(|(json, ws, end)| render(&json, &ws, end)).boxed()
}

/// 2,000 cases, or more with `PROPTEST_CASES`.
pub(crate) fn runner() -> TestRunner {
    let config = Config::default();
    TestRunner::new(Config { cases: config.cases.max(2000), failure_persistence: None, ..config })
}

/// Runs `agrees` on every input `inputs` makes: it tells whether the fast reader read the
/// input, and fails the case when the reading differs from the decoder's. How many it
/// read, and of how many.
pub(crate) fn count_read(
    inputs: impl Strategy<Value = String>,
    agrees: impl Fn(&str) -> Result<bool, TestCaseError>,
) -> (u32, u32) {
    let (read, seen) = (Cell::new(0u32), Cell::new(0u32));
    let result = runner().run(&inputs, |data| {
        seen.set(seen.get() + 1);
        read.set(read.get() + u32::from(agrees(&data)?));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (read.get(), seen.get())
}

/// Not vacuous: of inputs near the plain shape, a fair share is read by the fast reader,
/// and a fair share is not.
pub(crate) fn assert_fair_share(what: &str, (read, seen): (u32, u32)) {
    eprintln!("{what}: the fast path read {read} of {seen}");
    assert!(read * 4 >= seen && read * 4 <= seen * 3, "{what}: the fast path read {read} of {seen}");
}

/// Every input of the plain shape is read by the fast reader.
pub(crate) fn assert_all_read(what: &str, (read, seen): (u32, u32)) {
    eprintln!("{what}: the fast path read {read} of {seen}");
    assert!(read == seen && seen >= 2000, "{what}: the fast path read {read} of {seen}");
}
