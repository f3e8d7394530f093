//! Every dialect's request builder on an arbitrary `{model, context, options}` document.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| omni_fuzz::request(data));
