//! What the fuzz targets check (one function per target; see `fuzz_targets/`).
//!
//! Every target feeds its input whole and again in chunks, and holds the decoders to
//! what the project promises for any input: no panic, no abort, one terminal event, last,
//! and the same outcome however the bytes are split.

use std::sync::OnceLock;

use omni_protocol::dialect::{Frame, FrameDecoder, Framing};
use omni_protocol::Catalogue;
use omni_protocol::{
    dialect::{RequestSpec, StreamDecoder},
    ApiKey, Context, Dialect, Model, Options, Provider, StreamEvent,
};
use serde_json::Value;

/// The stack each input is handled on. Small, so that a recursion without a bound crashes
/// the fuzzer at a modest depth (the main thread's 8 MiB would hide all but the deepest);
/// twice the unit tests' 256 KiB, for the sanitizer's red zones.
const STACK: usize = 512 * 1024;

/// Runs `f` on a thread with a [`STACK`]; its panic is the input's.
fn on_small_stack(f: impl FnOnce() + Send) {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().stack_size(STACK).spawn_scoped(scope, f).expect("a thread");
        if let Err(panic) = thread.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

/// Chunk sizes a second decode splits the input into, picked by the input's length so
/// that the corpus can stay raw response bodies (the fixtures) with no prefix byte.
const CHUNKS: [usize; 7] = [1, 2, 3, 7, 16, 61, 257];

fn chunk_size(data: &[u8]) -> usize {
    CHUNKS[data.len() % CHUNKS.len()]
}

/// Decodes `data` as a `dialect` response body whole and in chunks: both end with exactly
/// one terminal event, last, and agree on every event and on the response.
pub fn decode(dialect: Dialect, data: &[u8]) {
    on_small_stack(|| check_decode(dialect, data));
}

fn check_decode(dialect: Dialect, data: &[u8]) {
    let (whole_events, whole) = run_decoder(dialect, data, data.len().max(1));
    let (events, response) = run_decoder(dialect, data, chunk_size(data));
    let terminal = |e: &StreamEvent| matches!(e, StreamEvent::Done { .. } | StreamEvent::Error { .. });
    assert_eq!(whole_events.iter().filter(|e| terminal(e)).count(), 1, "one terminal event");
    assert!(whole_events.last().is_some_and(terminal), "the terminal event comes last");
    assert_eq!(whole_events, events, "the same events whole and in chunks");
    assert_eq!(whole, response, "the same response whole and in chunks");
    // Serialising walks everything the decoder built (a deep value would overflow here).
    serde_json::to_string(&response).expect("a response serialises");
}

fn run_decoder(dialect: Dialect, data: &[u8], chunk: usize) -> (Vec<StreamEvent>, omni_protocol::Response) {
    let mut decoder = StreamDecoder::new(dialect, "fuzz");
    let mut events = Vec::new();
    for piece in data.chunks(chunk) {
        decoder.feed(piece, &mut events);
    }
    decoder.finish(&mut events);
    (events, decoder.into_response())
}

/// Frames `data` as SSE and as NDJSON, whole and in chunks: the same frames, the same end.
pub fn framing(data: &[u8]) {
    on_small_stack(|| check_framing(data));
}

fn check_framing(data: &[u8]) {
    for framing in [Framing::Sse, Framing::Ndjson, Framing::Json] {
        let whole = run_framing(framing, data, data.len().max(1));
        let chunked = run_framing(framing, data, chunk_size(data));
        assert_eq!(whole, chunked, "{framing:?}: the same frames whole and in chunks");
    }
}

/// Frames as owned text, and how the body ended (or why it failed).
type Framed = (Vec<String>, String);

fn run_framing(framing: Framing, data: &[u8], chunk: usize) -> Framed {
    // A small event limit, so the fuzzer reaches the size check with short inputs.
    let mut decoder = FrameDecoder::with_max_event_bytes(framing, 512);
    let mut frames = Vec::new();
    let mut record = |frame: Frame<'_>| frames.push(format!("{frame:?}"));
    for piece in data.chunks(chunk) {
        if let Err(e) = decoder.feed(piece, &mut record) {
            return (frames, format!("failed: {e:?}"));
        }
    }
    let end = decoder.finish(&mut record);
    (frames, format!("{end:?}"))
}

/// Builds a request from `{"model": …, "context": …, "options": …}` (the shape of the
/// request fixtures' `input.json`) with every dialect: either a typed refusal, or a
/// request whose body is JSON, whose URL has no space or control character and whose
/// headers cannot inject a line.
pub fn request(data: &[u8]) {
    on_small_stack(|| check_request(data));
}

fn check_request(data: &[u8]) {
    let Ok(input) = serde_json::from_slice::<Value>(data) else { return };
    let Ok(context) = serde_json::from_value::<Context>(input.get("context").cloned().unwrap_or_default()) else {
        return;
    };
    let options = input.get("options").cloned().and_then(|o| serde_json::from_value::<Options>(o).ok());
    let options = options.unwrap_or_default();
    let model: Option<Model> = input.get("model").cloned().and_then(|m| serde_json::from_value(m).ok());
    let key = ApiKey::new("sk-fuzz");
    for dialect in Dialect::ALL {
        let provider = provider_for(dialect);
        let mut model = model.clone().unwrap_or_else(|| Model::new(provider.id.clone(), "fuzz-model", dialect));
        model.dialect = dialect;
        let spec = RequestSpec { model: &model, provider, context: &context, options: &options, api_key: Some(&key) };
        let Ok(built) = dialect.build_request(&spec) else { continue };
        let request = built.request;
        serde_json::from_slice::<Value>(&request.body).expect("the body is JSON");
        assert!(!request.url.chars().any(|c| c.is_control() || c.is_whitespace()), "URL {:?}", request.url);
        for header in &request.headers {
            assert!(!header.name.contains(['\r', '\n']) && !header.value.contains(['\r', '\n']), "header line");
        }
    }
}

fn provider_for(dialect: Dialect) -> &'static Provider {
    static PROVIDERS: OnceLock<Vec<Provider>> = OnceLock::new();
    let providers = PROVIDERS.get_or_init(|| {
        let catalogue = Catalogue::builtin().expect("the built-in catalogue");
        ["anthropic", "openai", "openai", "google", "ollama"]
            .iter()
            .map(|id| catalogue.provider(id).cloned().expect("a built-in provider"))
            .collect()
    });
    let at = Dialect::ALL.iter().position(|d| *d == dialect).expect("a dialect");
    &providers[at]
}
