//! The text protocols' parsers against a floor measured in the same run (issue 14).
//!
//! The input: 1 MiB of prose with a tool call every ~4 KiB, in the protocol's own format
//! (`format_call`), the prose sprinkled with the characters that could begin a delimiter
//! (`<` and backticks). Fed in pieces of 64 bytes, as a stream's text deltas come.
//!
//! - `parse`: the protocol's parser over the whole input (`feed` per piece, `finish`).
//! - `baseline`: the least any parser must do: a memchr scan of the same bytes for the
//!   first byte of the protocol's opening delimiter, per piece.
//!
//! Report `parse / baseline` per protocol: after divan's table, the same pairs run again
//! interleaved and their ratio is printed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::time::Instant;

use divan::{black_box, Bencher};
use omni_protocol::text_tools::Hermes;
use omni_protocol::text_tools::Json;
use omni_protocol::text_tools::Xml;
use omni_protocol::text_tools::{Parsed, TextProtocol};
use omni_protocol::ToolSpec;
use serde_json::{json, Map, Value};

const SIZE: usize = 1 << 20;
const PIECE: usize = 64;
const PROTOCOLS: [&str; 3] = ["xml", "json", "hermes"];

fn main() {
    divan::main();
    if std::env::args().any(|a| a == "--bench") {
        interleaved(20);
    }
}

fn protocol(name: &str) -> Box<dyn TextProtocol> {
    match name {
        "xml" => Box::new(Xml),
        "hermes" => Box::new(Hermes),
        _ => Box::new(Json),
    }
}

/// The byte that begins the protocol's opening delimiter.
fn first_byte(name: &str) -> u8 {
    // `<tool_call>` (xml, hermes) or ` ```tool_call ` (json).
    if name == "json" {
        b'`'
    } else {
        b'<'
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}),
    }]
}

/// About [`SIZE`] bytes of prose and calls (see the module's doc).
fn input(protocol: &dyn TextProtocol) -> String {
    let prose = "The forecast says a < b when the `wind` turns; models write prose like this. ";
    let mut arguments = Map::new();
    arguments.insert("city".into(), Value::String("Paris".into()));
    arguments.insert("days".into(), Value::from(3));
    let call = protocol.format_call("get_weather", &arguments);
    let mut text = String::with_capacity(SIZE + 4096);
    while text.len() < SIZE {
        while text.len() % 4096 < 4096 - prose.len() && text.len() < SIZE {
            text.push_str(prose);
        }
        text.push_str(&call);
        text.push('\n');
    }
    text
}

/// The input in pieces of [`PIECE`] bytes, cut at character boundaries.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / PIECE + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + PIECE).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// Parses every piece; returns the number of calls read.
fn parse(protocol: &dyn TextProtocol, tools: &[ToolSpec], pieces: &[&str]) -> usize {
    let mut parser = protocol.parser(tools);
    let mut out = Vec::new();
    let mut calls = 0;
    for piece in pieces {
        parser.feed(piece, &mut out);
        calls += out.iter().filter(|e| matches!(e, Parsed::CallEnd { .. })).count();
        out.clear();
    }
    parser.finish(&mut out);
    calls + out.iter().filter(|e| matches!(e, Parsed::CallEnd { .. })).count()
}

/// The floor: a memchr scan of every piece for the delimiter's first byte.
fn baseline(byte: u8, pieces: &[&str]) -> usize {
    pieces.iter().map(|p| memchr::memchr_iter(byte, p.as_bytes()).count()).sum()
}

#[divan::bench(args = PROTOCOLS)]
fn parse_1_mib(bencher: Bencher, name: &str) {
    let protocol = protocol(name);
    let (text, tools) = (input(&*protocol), tools());
    let pieces = pieces(&text);
    assert!(parse(&*protocol, &tools, &pieces) > 200, "the calls are read");
    bencher
        .counter(divan::counter::BytesCount::new(text.len()))
        .bench(|| parse(&*protocol, &tools, black_box(&pieces)));
}

#[divan::bench(args = PROTOCOLS)]
fn baseline_1_mib(bencher: Bencher, name: &str) {
    let protocol = protocol(name);
    let text = input(&*protocol);
    let pieces = pieces(&text);
    let byte = first_byte(name);
    bencher.counter(divan::counter::BytesCount::new(text.len())).bench(|| baseline(byte, black_box(&pieces)));
}

/// `rounds` of parse and baseline, alternating; prints the median ratio per protocol.
fn interleaved(rounds: usize) {
    println!("\ntext protocol parse of 1 MiB in 64-byte pieces, x the memchr floor ({rounds} interleaved rounds)");
    for name in PROTOCOLS {
        let protocol = protocol(name);
        let (text, tools) = (input(&*protocol), tools());
        let pieces = pieces(&text);
        let byte = first_byte(name);
        let mut ratios = Vec::with_capacity(rounds);
        let mut parse_us = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let started = Instant::now();
            black_box(parse(&*protocol, &tools, black_box(&pieces)));
            let parsed = started.elapsed();
            let started = Instant::now();
            black_box(baseline(byte, black_box(&pieces)));
            let floor = started.elapsed();
            ratios.push(parsed.as_secs_f64() / floor.as_secs_f64().max(1e-9));
            parse_us.push(parsed.as_secs_f64() * 1e6);
        }
        ratios.sort_by(f64::total_cmp);
        parse_us.sort_by(f64::total_cmp);
        let mb_s = text.len() as f64 / parse_us[rounds / 2];
        println!(
            "{name:6} parse median {:8.0} µs ({mb_s:6.0} MB/s), x floor {:6.2}",
            parse_us[rounds / 2],
            ratios[rounds / 2]
        );
    }
}
