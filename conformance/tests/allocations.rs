//! Allocation budget of the decoding pipeline, counted (not timed) with a counting
//! global allocator: at most one allocation per text delta, amortised, in every dialect.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// A global allocator cannot be written without `unsafe`; this test file is the only place.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use omni_conformance::synth::text_stream;
use omni_core::{Dialect, StreamDecoder};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY-free wrapper: forwards to the system allocator and counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The counter is the process's: tests that read it take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn at_most_one_allocation_per_text_delta() {
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    const DELTAS: usize = 20_000;
    let mut report = Vec::new();
    for dialect in Dialect::ALL {
        let body = text_stream(dialect, DELTAS, "token ");
        let mut decoder = StreamDecoder::new(dialect, "bench");
        let mut events = Vec::with_capacity(1024);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for chunk in body.chunks(16 * 1024) {
            decoder.feed(chunk, &mut events);
            events.clear();
        }
        decoder.finish(&mut events);
        let used = ALLOCATIONS.load(Ordering::Relaxed) - before;
        let per_delta = used as f64 / DELTAS as f64;
        report.push(format!("{dialect}: {per_delta:.3} allocations per text delta"));
        assert_eq!(decoder.response().text().len(), DELTAS * 6, "{dialect} decoded every delta");
        assert!(per_delta <= 1.05, "{dialect}: {per_delta:.3} allocations per text delta (budget: 1)");
    }
    println!("{}", report.join("\n"));
}

/// An OpenAI Chat Completions stream with one tool call whose arguments (`bytes` long)
/// arrive in fragments of `fragment` bytes, one chunk each, in the documented shape
/// (`choices[0].delta.tool_calls[0].function.arguments`).
fn openai_tool_args_stream(bytes: usize, fragment: usize) -> Vec<u8> {
    let head = r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":"#;
    let mut s = format!(
        "data: {head}{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"index\":0,\"id\":\"call_bench\",\"type\":\"function\",\"function\":{{\"name\":\"store\",\"arguments\":\"\"}}}}]}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
    );
    // Digits: a JSON number, whole once joined, with nothing to unescape.
    let args = "1".repeat(bytes);
    for piece in args.as_bytes().chunks(fragment) {
        let piece = std::str::from_utf8(piece).unwrap_or_default();
        s.push_str(&format!(
            "data: {head}{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{piece}\"}}}}]}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
        ));
    }
    s.push_str(&format!("data: {head}{{}},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}}]}}\n\n"));
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

#[test]
fn at_most_one_allocation_per_tool_argument_fragment() {
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    const BYTES: usize = 64 * 1024;
    const FRAGMENT: usize = 4;
    // OpenAI Chat sends each fragment in an array of calls: no allocation for that array.
    // (Anthropic's fragments are not arrays; what its tool input costs is building the
    // input's JSON value, which depends on the input, not on the fragments.)
    let streams = [(Dialect::OpenaiCompletions, openai_tool_args_stream(BYTES, FRAGMENT))];
    let mut report = Vec::new();
    for (dialect, body) in streams {
        let mut decoder = StreamDecoder::new(dialect, "bench");
        let mut events = Vec::with_capacity(1024);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for chunk in body.chunks(16 * 1024) {
            decoder.feed(chunk, &mut events);
            events.clear();
        }
        decoder.finish(&mut events);
        let used = ALLOCATIONS.load(Ordering::Relaxed) - before;
        let fragments = BYTES.div_ceil(FRAGMENT);
        let per_fragment = used as f64 / fragments as f64;
        report.push(format!("{dialect}: {per_fragment:.3} allocations per tool-argument fragment"));
        let calls = decoder.response().message.tool_uses().count();
        assert_eq!(calls, 1, "{dialect} decoded the call");
        assert!(per_fragment <= 1.1, "{dialect}: {per_fragment:.3} allocations per fragment (budget: 1.1)");
    }
    println!("{}", report.join("\n"));
}
