//! The `openai_completions` stream decoder on arbitrary bytes, whole and in chunks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| omni_fuzz::decode(omni_protocol::Dialect::OpenaiCompletions, data));
