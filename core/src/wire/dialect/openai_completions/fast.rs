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

    use proptest::prelude::*;
    use proptest::sample::select;
    use proptest::test_runner::TestCaseError;

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

    use crate::wire::dialect::near_json::*;

    // Under [`Wild::OTHER`], the rare parts: `usage`, `error`, `x_groq`, `logprobs` and a
    // legacy `function_call` as objects, two choices or two calls, no calls, arguments
    // as JSON.

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
        let counts = count_read(Wild::any().prop_flat_map(near_chunk), agrees);
        assert_fair_share("openai, near the plain shape", counts);
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
        let counts = count_read(chunk, |data| {
            let read = agrees(data)?;
            prop_assert!(read, "not read by its parts: {:?}", data);
            Ok(read)
        });
        assert_all_read("openai, the plain shape", counts);
    }
}
