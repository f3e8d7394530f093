//! The SSE and NDJSON frame decoders on arbitrary bytes, whole and in chunks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| omni_fuzz::framing(data));
