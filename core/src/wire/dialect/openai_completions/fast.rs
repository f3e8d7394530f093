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
            // Present, these are rare: left to the decoder.
            "usage" | "x_groq" | "error" => s.null()?,
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
                "usage" => s.null()?,
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
    use super::*;
    use crate::wire::dialect::in_place;

    /// What the stream reads of a chunk, to compare the two readings.
    fn summary(chunk: Chunk<'_>) -> String {
        let text = |t: &Text<'_>| format!("{:?}", t.0);
        let mut out = format!("id={} model={} usage={} ", text(&chunk.id), text(&chunk.model), chunk.usage.is_some());
        if let Some(choice) = chunk.choice {
            out += &format!("index={:?} finish={} ", choice.index.0, text(&choice.finish_reason));
            if let Some(mut d) = choice.delta {
                out += &format!(
                    "content={} rc={} r={} ref={} ",
                    text(&d.content),
                    text(&d.reasoning_content),
                    text(&d.reasoning),
                    text(&d.refusal)
                );
                for call in d.tool_calls.take().into_iter().flatten() {
                    let f = call.function.map(|f| (f.name.0, f.arguments.0));
                    out += &format!("call {:?} {} {f:?} ", call.index, text(&call.id));
                }
            }
        }
        out
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
            assert_eq!(summary(fast), summary(full), "{data}");
        }
        let left = [
            // Escapes, control characters, whitespace, a repeated key.
            format!(r#"{head}{{"index":0,"delta":{{"content":"a\"b"}}}}]}}"#),
            format!("{head}{{\"index\":0,\"delta\":{{\"content\":\"a\nb\"}}}}]}}"),
            format!(r#"{head} {{"index":0,"delta":{{"content":"x"}}}}]}}"#),
            format!(r#"{head}{{"index":0,"delta":{{"content":"x","content":"y"}}}}]}}"#),
            r#"{"id":"a","id":"b"}"#.to_string(),
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
}
