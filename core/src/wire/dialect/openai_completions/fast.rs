//! A `chat.completion.chunk` read without a JSON parser, when it has the plain shape
//! OpenAI and most compatible servers write: no whitespace, keys and strings without
//! escapes, scalar values but for `choices` (at most one), its `delta` and a delta's
//! one tool call. Nearly every chunk of a stream is one; reading it by a few scans
//! costs a fraction of a JSON parse.
//!
//! It fills the same [`Chunk`] the decoder does, and only when it reads the payload
//! exactly as the decoder would: anything else (whitespace, an escape, a repeated key,
//! a number other than a plain integer, an object or array where a scalar was expected,
//! `usage`, `error`, more choices or calls) is `None`, and the caller decodes the
//! payload as JSON, which also reports any error.

use std::borrow::Cow;

use super::wire::{Arguments, Choice, Chunk, ChunkDelta, FunctionDelta, Text, ToolCallDelta, ToolCalls};
use crate::wire::dialect::in_place::OptU64;

/// Reads `data` into a chunk, or `None` when it is not in the plain shape.
pub(super) fn chunk(data: &str) -> Option<Chunk<'_>> {
    let mut s = Scan { rest: data };
    let mut chunk = Chunk::default();
    let mut seen = 0u8;
    s.object(|s, key| {
        match key {
            "id" => chunk.id = Text(s.once(&mut seen, 0)?.opt_str()?),
            "model" => chunk.model = Text(s.once(&mut seen, 1)?.opt_str()?),
            "choices" => chunk.choice = s.once(&mut seen, 2)?.choices()?,
            // Present, these are rare: left to the decoder. Repeated, the decoder refuses them.
            "usage" => s.once(&mut seen, 3)?.null()?,
            "x_groq" => s.once(&mut seen, 4)?.null()?,
            "error" => s.once(&mut seen, 5)?.null()?,
            _ => s.skip_scalar()?,
        }
        Some(())
    })?;
    s.rest.is_empty().then_some(chunk)
}

/// The unread rest of the payload.
struct Scan<'a> {
    rest: &'a str,
}

impl<'a> Scan<'a> {
    fn eat(&mut self, token: &str) -> Option<()> {
        self.rest = self.rest.strip_prefix(token)?;
        Some(())
    }

    fn peek(&self) -> Option<u8> {
        self.rest.as_bytes().first().copied()
    }

    /// Marks key `n` as read: a repeated key is the decoder's error to report.
    fn once(&mut self, seen: &mut u8, n: u8) -> Option<&mut Self> {
        let bit = 1 << n;
        if *seen & bit != 0 {
            return None;
        }
        *seen |= bit;
        Some(self)
    }

    /// An object, each key handed to `field` to read its value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat("{")?;
        if self.eat("}").is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(":")?;
            field(self, key)?;
            if self.eat("}").is_some() {
                return Some(());
            }
            self.eat(",")?;
        }
    }

    /// A string without escapes or control characters (the decoder refuses those).
    fn string(&mut self) -> Option<&'a str> {
        let rest = self.rest.strip_prefix('"')?;
        let end = memchr::memchr2(b'"', b'\\', rest.as_bytes())?;
        let (text, tail) = rest.split_at(end);
        // Without an early exit, so the loop vectorises.
        if text.bytes().fold(false, |control, b| control | (b < 0x20)) {
            return None;
        }
        self.rest = tail.strip_prefix('"')?;
        Some(text)
    }

    /// A string or `null`.
    fn opt_str(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.eat("null").is_some() {
            return Some(None);
        }
        self.string().map(|s| Some(Cow::Borrowed(s)))
    }

    fn null(&mut self) -> Option<()> {
        self.eat("null")
    }

    /// A non-negative integer (at most 19 digits, so it fits) or `null`.
    fn opt_u64(&mut self) -> Option<OptU64> {
        if self.eat("null").is_some() {
            return Some(OptU64(None));
        }
        let digits = self.integer_len(false)?;
        let (number, rest) = self.rest.split_at(digits);
        self.rest = rest;
        number.parse().ok().map(|n| OptU64(Some(n)))
    }

    /// The length of the integer the rest starts with: `-?(0|[1-9][0-9]*)`, at most 19
    /// digits. A fraction or an exponent after it fails later, at the next token.
    fn integer_len(&self, signed: bool) -> Option<usize> {
        let sign = usize::from(signed && self.rest.starts_with('-'));
        let body = self.rest.get(sign..)?;
        let digits = body.bytes().take_while(u8::is_ascii_digit).count();
        let leading_zero = digits > 1 && body.starts_with('0');
        (digits > 0 && digits <= 19 && !leading_zero).then_some(sign + digits)
    }

    /// The value of a key not read: a string, an integer, `true`, `false` or `null`.
    fn skip_scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b't' => self.eat("true"),
            b'f' => self.eat("false"),
            b'n' => self.eat("null"),
            _ => {
                let len = self.integer_len(true)?;
                self.rest = self.rest.get(len..)?;
                Some(())
            }
        }
    }

    /// `choices`: `null`, `[]` or one choice; kept when its index is 0 or missing.
    fn choices(&mut self) -> Option<Option<Choice<'a>>> {
        if self.eat("null").is_some() || self.eat("[]").is_some() {
            return Some(None);
        }
        self.eat("[")?;
        let mut choice = Choice::default();
        let mut seen = 0u8;
        self.object(|s, key| {
            match key {
                "index" => choice.index = s.once(&mut seen, 0)?.opt_u64()?,
                "delta" => choice.delta = s.once(&mut seen, 1)?.delta()?,
                "finish_reason" => choice.finish_reason = Text(s.once(&mut seen, 2)?.opt_str()?),
                "usage" => s.once(&mut seen, 3)?.null()?,
                _ => s.skip_scalar()?,
            }
            Some(())
        })?;
        self.eat("]")?;
        Some((choice.index.0.unwrap_or(0) == 0).then_some(choice))
    }

    /// A choice's `delta`, or `null`.
    fn delta(&mut self) -> Option<Option<ChunkDelta<'a>>> {
        if self.eat("null").is_some() {
            return Some(None);
        }
        let mut delta = ChunkDelta::default();
        let mut seen = 0u8;
        self.object(|s, key| {
            match key {
                "content" => delta.content = Text(s.once(&mut seen, 0)?.opt_str()?),
                "reasoning_content" => delta.reasoning_content = Text(s.once(&mut seen, 1)?.opt_str()?),
                "reasoning" => delta.reasoning = Text(s.once(&mut seen, 2)?.opt_str()?),
                "refusal" => delta.refusal = Text(s.once(&mut seen, 3)?.opt_str()?),
                "tool_calls" => delta.tool_calls = s.once(&mut seen, 4)?.tool_calls()?,
                "function_call" => s.once(&mut seen, 5)?.null()?,
                _ => s.skip_scalar()?,
            }
            Some(())
        })?;
        Some(Some(delta))
    }

    /// `tool_calls`: `null` or one call.
    fn tool_calls(&mut self) -> Option<Option<ToolCalls<'a>>> {
        if self.eat("null").is_some() {
            return Some(None);
        }
        self.eat("[")?;
        let mut call = ToolCallDelta { index: None, id: Text::default(), function: None };
        let mut seen = 0u8;
        self.object(|s, key| {
            match key {
                "index" => call.index = s.once(&mut seen, 0)?.opt_u64()?.0,
                "id" => call.id = Text(s.once(&mut seen, 1)?.opt_str()?),
                "function" => call.function = s.once(&mut seen, 2)?.function()?,
                _ => s.skip_scalar()?,
            }
            Some(())
        })?;
        self.eat("]")?;
        Some(Some(ToolCalls::one(call)))
    }

    /// A call's `function`, or `null`.
    fn function(&mut self) -> Option<Option<FunctionDelta<'a>>> {
        if self.eat("null").is_some() {
            return Some(None);
        }
        let mut function = FunctionDelta { name: Text::default(), arguments: Arguments::default() };
        let mut seen = 0u8;
        self.object(|s, key| {
            match key {
                "name" => function.name = Text(s.once(&mut seen, 0)?.opt_str()?),
                "arguments" => function.arguments = Arguments(s.once(&mut seen, 1)?.opt_str()?),
                _ => s.skip_scalar()?,
            }
            Some(())
        })?;
        Some(Some(function))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::fmt::Write as _;

    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::select;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    use super::*;
    use crate::wire::dialect::in_place;
    use crate::wire::dialect::openai_completions::wire::WireUsage;

    type Usage =
        (Option<u64>, Option<u64>, Option<(Option<u64>, Option<u64>)>, Option<Option<u64>>, Option<u64>, Option<u64>);
    type Function = (Option<String>, Option<String>);
    type Call = (Option<u64>, Option<String>, Option<Function>);

    /// Every field of a chunk, owned, to compare the two readings.
    #[derive(Debug, PartialEq)]
    struct Owned {
        id: Option<String>,
        model: Option<String>,
        choice: Option<OwnedChoice>,
        usage: Option<Usage>,
        x_groq: Option<Option<Usage>>,
        error: Option<serde_json::Value>,
    }

    #[derive(Debug, PartialEq)]
    struct OwnedChoice {
        index: Option<u64>,
        delta: Option<OwnedDelta>,
        finish_reason: Option<String>,
        usage: Option<Usage>,
    }

    #[derive(Debug, PartialEq)]
    struct OwnedDelta {
        content: Option<String>,
        reasoning_content: Option<String>,
        reasoning: Option<String>,
        refusal: Option<String>,
        tool_calls: Option<Vec<Call>>,
        function_call: Option<Function>,
    }

    fn owned(chunk: Chunk<'_>) -> Owned {
        fn s(text: Option<Cow<'_, str>>) -> Option<String> {
            text.map(Cow::into_owned)
        }
        fn usage(u: WireUsage) -> Usage {
            let WireUsage {
                prompt_tokens,
                completion_tokens,
                prompt_tokens_details,
                completion_tokens_details,
                prompt_cache_hit_tokens,
                cached_tokens,
            } = u;
            (
                prompt_tokens,
                completion_tokens,
                prompt_tokens_details.map(|d| (d.cached_tokens, d.cache_write_tokens)),
                completion_tokens_details.map(|d| d.reasoning_tokens),
                prompt_cache_hit_tokens,
                cached_tokens,
            )
        }
        fn function(f: FunctionDelta<'_>) -> Function {
            let FunctionDelta { name, arguments } = f;
            (s(name.0), s(arguments.0))
        }
        let Chunk { id, model, choice, usage: chunk_usage, x_groq, error } = chunk;
        let choice = choice.map(|choice| {
            let Choice { index, delta, finish_reason, usage: choice_usage } = choice;
            let delta = delta.map(|delta| {
                let ChunkDelta { content, reasoning_content, reasoning, refusal, tool_calls, function_call } = delta;
                let calls = tool_calls.map(|calls| {
                    let calls = calls
                        .into_iter()
                        .map(|ToolCallDelta { index, id, function: f }| (index, s(id.0), f.map(function)));
                    calls.collect()
                });
                OwnedDelta {
                    content: s(content.0),
                    reasoning_content: s(reasoning_content.0),
                    reasoning: s(reasoning.0),
                    refusal: s(refusal.0),
                    tool_calls: calls,
                    function_call: function_call.map(|f| function(*f)),
                }
            });
            OwnedChoice {
                index: index.0,
                delta,
                finish_reason: s(finish_reason.0),
                usage: choice_usage.map(|u| usage(*u)),
            }
        });
        Owned {
            id: s(id.0),
            model: s(model.0),
            choice,
            usage: chunk_usage.map(|u| usage(*u)),
            x_groq: x_groq.map(|x| x.usage.map(|u| usage(*u))),
            error: error.map(|e| *e),
        }
    }

    #[test]
    fn the_plain_shape_reads_as_the_decoder_does_and_any_other_is_left_to_it() {
        let head = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":["#;
        let read = [
            format!(
                r#"{head}{{"index":0,"delta":{{"content":"Hi é"}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
            ),
            format!(
                r#"{head}{{"index":0,"delta":{{"role":"assistant","content":"","refusal":null}},"logprobs":null,"finish_reason":null}}]}}"#
            ),
            format!(r#"{head}{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"stop"}}],"usage":null}}"#),
            format!(
                r#"{head}{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"f","arguments":""}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(
                r#"{head}{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"abcd"}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(r#"{head}{{"index":1,"delta":{{"content":"other choice"}}}}]}}"#),
            format!(
                r#"{head}{{"delta":{{"reasoning_content":"hmm","content":null}},"obfuscation":"x1","n":-3,"ok":true}}]}}"#
            ),
            r#"{"id":"x","choices":[],"model":null}"#.to_string(),
            r#"{"choices":null}"#.to_string(),
            "{}".to_string(),
        ];
        for data in &read {
            let fast = chunk(data).unwrap_or_else(|| panic!("read by its parts: {data}"));
            let mut full = Chunk::default();
            in_place::parse_into(data, &mut full).unwrap();
            assert_eq!(owned(fast), owned(full), "{data}");
        }
        let left = [
            // Escapes, control characters, whitespace, a repeated key.
            format!(r#"{head}{{"index":0,"delta":{{"content":"a\"b"}}}}]}}"#),
            format!("{head}{{\"index\":0,\"delta\":{{\"content\":\"a\nb\"}}}}]}}"),
            format!(r#"{head} {{"index":0,"delta":{{"content":"x"}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"content":"x","content":"y"}}}}]}}"#),
            r#"{"id":"a","id":"b"}"#.to_string(),
            // Found by the property below: a rare key repeated with `null` (read as absent
            // by the fast path but refused by the decoder).
            r#"{"object":"chat.completion.chunk","created":0,"model":"","choices":[{}],"usage":null,"usage":null}"#
                .to_string(),
            r#"{"x_groq":null,"x_groq":null}"#.to_string(),
            r#"{"error":null,"error":null}"#.to_string(),
            format!(r#"{head}{{"index":0,"delta":{{}},"usage":null,"usage":null}}]}}"#),
            // Values the decoder reads otherwise or refuses.
            format!(r#"{head}{{"index":0,"delta":{{"content":1}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"content":[{{"type":"text"}}]}}}}]}}"#),
            format!(r#"{head}{{"index":-1,"delta":{{"content":"x"}}}}]}}"#),
            format!(r#"{head}{{"index":0.0,"delta":{{"content":"x"}}}}]}}"#),
            format!(r#"{head}{{"index":01,"delta":{{"content":"x"}}}}]}}"#),
            r#"{"created":1.5}"#.to_string(),
            r#"{"created":1e3}"#.to_string(),
            r#"{"logprobs":{"content":[]}}"#.to_string(),
            // Rare parts: usage, errors, more choices or calls, a legacy function call.
            r#"{"choices":[],"usage":{"prompt_tokens":1}}"#.to_string(),
            r#"{"error":{"message":"m"}}"#.to_string(),
            format!(r#"{head}{{"index":0,"delta":{{}}}},{{"index":1,"delta":{{}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"tool_calls":[{{"index":0}},{{"index":1}}]}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"tool_calls":[]}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"function_call":{{"name":"f"}}}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"tool_calls":[{{"function":{{"arguments":{{"a":1}}}}}}]}}}}]}}"#),
            // Not an object, or more after it.
            "[]".to_string(),
            "{} {}".to_string(),
            r#"{"id":"x""#.to_string(),
        ];
        for data in &left {
            assert!(chunk(data).is_none(), "left to the decoder: {data}");
        }
    }

    // Differential properties: whatever the fast path reads, the decoder reads the same.
    // Inputs are built near the hot shape: a case takes its parts in their plain form
    // (read by the fast path) except for a few classes of change ([`Wild`]), each
    // applied to some of the places it can go.

    /// The classes of change a case applies, one bit each.
    #[derive(Debug, Clone, Copy)]
    struct Wild(u32);

    impl Wild {
        /// Whitespace at token boundaries.
        const SPACE: u32 = 0;
        /// The payload cut short, or bytes after it.
        const END: u32 = 1;
        /// Objects: keys shuffled, repeated, escaped, added or left out.
        const SHAPE: u32 = 2;
        /// Numbers in any form: twenty digits and more, leading zeros, signs, fractions.
        const NUMBER: u32 = 3;
        /// Strings with escapes, quotes, backslashes, control characters, written escaped.
        const STRING: u32 = 4;
        /// Values of another type: a scalar for an object, an object for a string.
        const TYPE: u32 = 5;
        /// Values and keys this file's format names otherwise (see [`CLASSES`]).
        const OTHER: u32 = 6;

        fn on(self, class: u32) -> bool {
            self.0 & (1 << class) != 0
        }

        /// `normal`, or when `class` is on, `normal` or `odd` alike.
        fn either<T: std::fmt::Debug + 'static>(
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
        fn any() -> BoxedStrategy<Self> {
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
    enum J {
        Raw(String),
        Obj(Vec<(String, Self, bool)>),
        Arr(Vec<Self>),
    }

    fn raw(text: &str) -> J {
        J::Raw(text.to_string())
    }

    impl J {
        fn tokens(&self, out: &mut Vec<String>) {
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
    enum Enc {
        Raw,
        Serde,
        AllEscaped,
        SlashEscaped,
    }

    fn encode(text: &str, enc: Enc) -> String {
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
    fn plain() -> BoxedStrategy<String> {
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
    fn odd_text() -> BoxedStrategy<String> {
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
    fn string(w: Wild) -> BoxedStrategy<J> {
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
    fn number(w: Wild) -> BoxedStrategy<J> {
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
    fn scalar(w: Wild) -> BoxedStrategy<J> {
        prop_oneof![
            3 => number(w),
            3 => string(w),
            3 => Just(raw("null")),
            1 => select(&["true", "false", "{}", "[]", "{\"a\":[1,\"b\"]}", "[null]", "nul", "tru"][..]).prop_map(raw),
        ]
        .boxed()
    }

    /// `value`, or under [`Wild::TYPE`] any other value.
    fn typed(w: Wild, value: BoxedStrategy<J>) -> BoxedStrategy<J> {
        w.either(Wild::TYPE, value, scalar(w))
    }

    /// An object of `fields` (the entries present, in order); under [`Wild::SHAPE`]
    /// shuffled, with a key repeated, a key escaped or keys from `extra` added.
    fn object(w: Wild, fields: BoxedStrategy<Vec<(String, J)>>, extra: &'static [&'static str]) -> BoxedStrategy<J> {
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
    fn field(w: Wild, key: &'static str, p: f64, value: BoxedStrategy<J>) -> BoxedStrategy<Option<(String, J)>> {
        let value = value.prop_map(move |v| (key.to_string(), v));
        let p = if w.on(Wild::SHAPE) { p.min(0.85) } else { p };
        if p >= 1.0 {
            value.prop_map(Some).boxed()
        } else {
            prop::option::weighted(p, value).boxed()
        }
    }

    /// The fields present.
    fn present(fields: Vec<BoxedStrategy<Option<(String, J)>>>) -> BoxedStrategy<Vec<(String, J)>> {
        fields.prop_map(|fields| fields.into_iter().flatten().collect()).boxed()
    }

    /// The payload of `json`: under [`Wild::SPACE`] with whitespace at token boundaries
    /// (`ws` cycled through), under [`Wild::END`] cut short or with bytes after it.
    fn render(json: &J, ws: &[u8], end: Option<(bool, usize, &str)>) -> String {
        const WS: &[&str] = &["", "", "", "", " ", "\n", "\t", "\r\n", "  "];
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

    fn payload(w: Wild, json: BoxedStrategy<J>) -> BoxedStrategy<String> {
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
    fn runner() -> TestRunner {
        let config = Config::default();
        TestRunner::new(Config { cases: config.cases.max(2000), failure_persistence: None, ..config })
    }

    /// Under [`Wild::OTHER`], the rare parts: `usage`, `error`, `x_groq`, `logprobs` and a
    /// legacy `function_call` as objects, two choices or two calls, no calls, arguments
    /// as JSON.
    const CLASSES: u32 = 7;

    fn null() -> BoxedStrategy<J> {
        Just(raw("null")).boxed()
    }

    /// A string field: a string or `null`.
    fn text(w: Wild) -> BoxedStrategy<J> {
        typed(w, prop_oneof![4 => string(w), 1 => null()].boxed())
    }

    /// A string from `names`, or any string under [`Wild::STRING`].
    fn name(w: Wild, names: &'static [&'static str]) -> BoxedStrategy<J> {
        let normal = select(names).prop_map(|n| J::Raw(encode(n, Enc::Raw))).boxed();
        w.either(Wild::STRING, normal, string(w))
    }

    /// `value`, or under [`Wild::OTHER`] `rare` alike.
    fn rare(w: Wild, value: BoxedStrategy<J>, rare: BoxedStrategy<J>) -> BoxedStrategy<J> {
        w.either(Wild::OTHER, value, rare)
    }

    fn usage(w: Wild) -> BoxedStrategy<J> {
        let count = |w| typed(w, prop_oneof![6 => number(w), 1 => null()].boxed());
        let prompt_details = object(
            w,
            present(vec![field(w, "cached_tokens", 0.8, count(w)), field(w, "cache_write_tokens", 0.3, count(w))]),
            &["x", "audio_tokens"],
        );
        let completion_details =
            object(w, present(vec![field(w, "reasoning_tokens", 0.8, count(w))]), &["x", "audio_tokens"]);
        let fields = present(vec![
            field(w, "prompt_tokens", 0.9, count(w)),
            field(w, "completion_tokens", 0.9, count(w)),
            field(w, "total_tokens", 0.9, count(w)),
            field(w, "prompt_tokens_details", 0.5, typed(w, prop_oneof![3 => prompt_details, 1 => null()].boxed())),
            field(
                w,
                "completion_tokens_details",
                0.5,
                typed(w, prop_oneof![3 => completion_details, 1 => null()].boxed()),
            ),
            field(w, "prompt_cache_hit_tokens", 0.2, count(w)),
            field(w, "cached_tokens", 0.2, count(w)),
        ]);
        object(w, fields, &["x", "prompt_tokens", "cached_tokens"])
    }

    fn function(w: Wild) -> BoxedStrategy<J> {
        let json = select(&["{}", "{\"a\":1}", "[1,\"b\"]", "{\"a\":\"</\"}"][..]).prop_map(raw).boxed();
        let fields = present(vec![field(w, "name", 0.5, text(w)), field(w, "arguments", 0.9, rare(w, text(w), json))]);
        object(w, fields, &["x", "name", "arguments"])
    }

    fn call(w: Wild) -> BoxedStrategy<J> {
        let fields = present(vec![
            field(w, "index", 0.9, typed(w, prop_oneof![6 => number(w), 1 => null()].boxed())),
            field(w, "id", 0.5, text(w)),
            field(w, "type", 0.5, typed(w, prop_oneof![3 => name(w, &["function"]), 1 => null()].boxed())),
            field(w, "function", 0.9, typed(w, prop_oneof![6 => function(w), 1 => null()].boxed())),
        ]);
        object(w, fields, &["x", "index", "id", "type", "function"])
    }

    fn delta(w: Wild) -> BoxedStrategy<J> {
        let calls = rare(
            w,
            prop_oneof![6 => call(w).prop_map(|c| J::Arr(vec![c])), 1 => null()].boxed(),
            prop_oneof![Just(J::Arr(Vec::new())), (call(w), call(w)).prop_map(|(a, b)| J::Arr(vec![a, b]))].boxed(),
        );
        let fields = present(vec![
            field(w, "role", 0.3, typed(w, prop_oneof![3 => name(w, &["assistant"]), 1 => null()].boxed())),
            field(w, "content", 0.7, text(w)),
            field(w, "reasoning_content", 0.2, text(w)),
            field(w, "reasoning", 0.1, text(w)),
            field(w, "refusal", 0.3, text(w)),
            field(w, "tool_calls", 0.3, typed(w, calls)),
            field(w, "function_call", 0.05, rare(w, null(), function(w))),
        ]);
        let extra = &["x", "role", "content", "reasoning", "refusal", "tool_calls", "function_call", "audio"];
        object(w, fields, extra)
    }

    fn choice(w: Wild) -> BoxedStrategy<J> {
        let logprobs = object(w, Just(vec![("content".to_string(), J::Arr(Vec::new()))]).boxed(), &["x"]);
        let reasons = &["stop", "length", "tool_calls", "content_filter", "error"];
        let fields = present(vec![
            field(w, "index", 0.9, typed(w, prop_oneof![4 => Just(raw("0")), 2 => number(w), 1 => null()].boxed())),
            field(w, "delta", 0.95, typed(w, prop_oneof![8 => delta(w), 1 => null()].boxed())),
            field(w, "logprobs", 0.5, rare(w, null(), logprobs)),
            field(w, "finish_reason", 0.7, typed(w, prop_oneof![4 => null(), 3 => name(w, reasons)].boxed())),
            field(w, "usage", 0.2, rare(w, null(), usage(w))),
        ]);
        object(w, fields, &["x", "index", "delta", "finish_reason", "usage", "logprobs"])
    }

    /// A `chat.completion.chunk` near the plain shape.
    fn near_chunk(w: Wild) -> BoxedStrategy<String> {
        let choices = rare(
            w,
            prop_oneof![8 => choice(w).prop_map(|c| J::Arr(vec![c])), 1 => null(), 1 => Just(J::Arr(Vec::new()))]
                .boxed(),
            (choice(w), choice(w)).prop_map(|(a, b)| J::Arr(vec![a, b])).boxed(),
        );
        let x_groq = object(w, present(vec![field(w, "usage", 0.9, usage(w))]), &["x", "id"]);
        let error = object(
            w,
            present(vec![field(w, "message", 0.9, string(w)), field(w, "code", 0.5, number(w))]),
            &["x", "type"],
        );
        let fields = present(vec![
            field(w, "id", 0.9, text(w)),
            field(w, "object", 0.9, typed(w, name(w, &["chat.completion.chunk"]))),
            field(w, "created", 0.9, typed(w, number(w))),
            field(w, "model", 0.9, text(w)),
            field(w, "system_fingerprint", 0.5, text(w)),
            field(w, "choices", 0.95, typed(w, choices)),
            field(w, "usage", 0.3, rare(w, null(), usage(w))),
            field(w, "service_tier", 0.1, text(w)),
            field(w, "obfuscation", 0.1, string(w)),
            field(w, "x_groq", 0.1, rare(w, null(), x_groq)),
            field(w, "error", 0.1, rare(w, null(), error)),
        ]);
        payload(w, object(w, fields, &["x", "id", "model", "choices", "usage", "x_groq", "error", "created"]))
    }

    /// Whenever the fast path reads a chunk, the decoder reads it too, and the same.
    fn agrees(data: &str) -> Result<bool, TestCaseError> {
        let Some(fast) = chunk(data) else { return Ok(false) };
        let mut full = Chunk::default();
        let decoded = in_place::parse_into(data, &mut full);
        prop_assert!(decoded.is_ok(), "read by its parts but refused by the decoder: {:?}", data);
        prop_assert_eq!(owned(fast), owned(full), "{:?}", data);
        Ok(true)
    }

    #[test]
    fn what_the_fast_path_reads_near_the_plain_shape_the_decoder_reads_the_same() {
        let (read, seen) = (Cell::new(0u32), Cell::new(0u32));
        let result = runner().run(&Wild::any().prop_flat_map(near_chunk), |data| {
            seen.set(seen.get() + 1);
            read.set(read.get() + u32::from(agrees(&data)?));
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        // Not vacuous: a fair share is read by the fast path, and a fair share is not.
        let (read, seen) = (read.get(), seen.get());
        eprintln!("openai, near the plain shape: the fast path read {read} of {seen}");
        assert!(read * 4 >= seen && read * 4 <= seen * 3, "the fast path read {read} of {seen}");
    }

    #[test]
    fn the_fast_path_reads_every_chunk_of_the_plain_shape() {
        let head = (plain(), 0u64..=4_000_000_000, plain(), plain());
        let delta = prop_oneof![
            plain().prop_map(|c| format!(r#"{{"content":"{c}"}}"#)),
            plain().prop_map(|c| format!(r#"{{"role":"assistant","content":"{c}","refusal":null}}"#)),
            plain().prop_map(|c| format!(r#"{{"reasoning_content":"{c}","content":null}}"#)),
            (0u64..10, plain(), plain(), plain()).prop_map(|(i, id, name, args)| format!(
                r#"{{"tool_calls":[{{"index":{i},"id":"{id}","type":"function","function":{{"name":"{name}","arguments":"{args}"}}}}]}}"#
            )),
            (0u64..10, plain()).prop_map(|(i, args)| format!(r#"{{"tool_calls":[{{"index":{i},"function":{{"arguments":"{args}"}}}}]}}"#)),
            Just("{}".to_string()),
        ];
        let finish = select(&["null", "\"stop\"", "\"length\"", "\"tool_calls\""][..]);
        let usage = select(&["", r#","usage":null"#][..]);
        let chunk = (head, delta, finish, usage).prop_map(|((id, created, model, fp), delta, finish, usage)| {
            format!(
                r#"{{"id":"{id}","object":"chat.completion.chunk","created":{created},"model":"{model}","system_fingerprint":"{fp}","choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]{usage}}}"#
            )
        });
        let (read, seen) = (Cell::new(0u32), Cell::new(0u32));
        let result = runner().run(&chunk, |data| {
            seen.set(seen.get() + 1);
            prop_assert!(agrees(&data)?, "not read by its parts: {:?}", data);
            read.set(read.get() + 1);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        let (read, seen) = (read.get(), seen.get());
        eprintln!("openai, the plain shape: the fast path read {read} of {seen}");
        assert!(read == seen && seen >= 2000, "the fast path read {read} of {seen}");
    }
}
