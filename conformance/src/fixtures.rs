//! The project's own fixtures: layout, loading, decoding and blessing.
//!
//! ```text
//! conformance/fixtures/<dialect>/<case>/
//!     body.sse | body.ndjson   raw response body bytes
//!     case.json                {"description", "model", "docs"}
//!     events.jsonl             expected consumer events, one JSON object per line
//!     response.json            expected final response
//! conformance/fixtures/<dialect>/requests/<case>/
//!     input.json               {"model": Model, "context": Context, "options": Options, "provider"?: Provider}
//!     request.json             expected HTTP request: method, url, headers (secrets redacted), body
//! ```
//!
//! With `OMNI_BLESS=1` the tests write the expected files instead of comparing.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use omni_protocol::{dialect::StreamDecoder, Context, Dialect, Model, Options, Provider, Response, StreamEvent};
use serde::Deserialize;
use serde_json::{json, Value};

/// The fixtures folder of this crate.
pub fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// True when expected files should be (re)written.
pub fn blessing() -> bool {
    std::env::var("OMNI_BLESS").is_ok_and(|v| v == "1")
}

/// Metadata of a stream case.
#[derive(Debug, Clone, Deserialize)]
pub struct CaseInfo {
    /// What the stream shows.
    #[serde(default)]
    pub description: String,
    /// Model id the response starts with.
    #[serde(default = "default_model")]
    pub model: String,
    /// Where the format comes from.
    #[serde(default)]
    pub docs: String,
}

fn default_model() -> String {
    "model".into()
}

/// A recorded response body and its expectations.
#[derive(Debug, Clone)]
pub struct StreamCase {
    /// `<dialect>/<case>`.
    pub name: String,
    /// The case folder.
    pub dir: PathBuf,
    /// Dialect from the parent folder name.
    pub dialect: Dialect,
    /// Raw body bytes.
    pub body: Vec<u8>,
    /// Metadata.
    pub info: CaseInfo,
}

/// A request-building case.
#[derive(Debug, Clone)]
pub struct RequestCase {
    /// `<dialect>/requests/<case>`.
    pub name: String,
    /// The case folder.
    pub dir: PathBuf,
    /// The parsed input.
    pub input: RequestInput,
}

/// Input of a request case.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestInput {
    /// The model.
    pub model: Model,
    /// The context.
    #[serde(default)]
    pub context: Context,
    /// Options.
    #[serde(default)]
    pub options: Options,
    /// The provider; when absent, the catalogue's provider of the model.
    #[serde(default)]
    pub provider: Option<Provider>,
}

/// A fixture that cannot be read.
#[derive(Debug)]
pub struct FixtureError(pub String);

impl std::fmt::Display for FixtureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FixtureError {}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>, FixtureError> {
    let read = fs::read_dir(dir).map_err(|e| FixtureError(format!("{}: {e}", dir.display())))?;
    let mut dirs: Vec<PathBuf> = read.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    Ok(dirs)
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Every stream case under `root`, sorted by name.
pub fn stream_cases(root: &Path) -> Result<Vec<StreamCase>, FixtureError> {
    let mut cases = Vec::new();
    for dialect_dir in sorted_dirs(root)? {
        let dialect_name = file_name(&dialect_dir);
        let dialect = Dialect::from_name(&dialect_name)
            .ok_or_else(|| FixtureError(format!("{}: not a dialect name", dialect_dir.display())))?;
        for dir in sorted_dirs(&dialect_dir)? {
            if file_name(&dir) == "requests" {
                continue;
            }
            let body_path = ["body.sse", "body.ndjson"].iter().map(|f| dir.join(f)).find(|p| p.exists());
            let body_path =
                body_path.ok_or_else(|| FixtureError(format!("{}: no body.sse or body.ndjson", dir.display())))?;
            let body = fs::read(&body_path).map_err(|e| FixtureError(format!("{}: {e}", body_path.display())))?;
            let info_path = dir.join("case.json");
            let info: CaseInfo = read_json(&info_path)?;
            cases.push(StreamCase { name: format!("{dialect_name}/{}", file_name(&dir)), dir, dialect, body, info });
        }
    }
    Ok(cases)
}

/// Every request case under `root`, sorted by name.
pub fn request_cases(root: &Path) -> Result<Vec<RequestCase>, FixtureError> {
    let mut cases = Vec::new();
    for dialect_dir in sorted_dirs(root)? {
        let requests = dialect_dir.join("requests");
        if !requests.is_dir() {
            continue;
        }
        for dir in sorted_dirs(&requests)? {
            let input: RequestInput = read_json(&dir.join("input.json"))?;
            cases.push(RequestCase {
                name: format!("{}/requests/{}", file_name(&dialect_dir), file_name(&dir)),
                dir,
                input,
            });
        }
    }
    Ok(cases)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, FixtureError> {
    let text = fs::read_to_string(path).map_err(|e| FixtureError(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| FixtureError(format!("{}: {e}", path.display())))
}

/// Decodes a body fed in pieces ending at `splits` (sorted byte offsets).
pub fn decode_split(dialect: Dialect, model: &str, body: &[u8], splits: &[usize]) -> (Vec<StreamEvent>, Response) {
    let mut decoder = StreamDecoder::new(dialect, model);
    let mut events = Vec::new();
    let mut start = 0;
    for &end in splits.iter().chain(std::iter::once(&body.len())) {
        let end = end.clamp(start, body.len());
        decoder.feed(&body[start..end], &mut events);
        start = end;
    }
    decoder.finish(&mut events);
    (events, decoder.into_response())
}

/// Decodes a body fed in chunks of `size` bytes.
pub fn decode_chunked(dialect: Dialect, model: &str, body: &[u8], size: usize) -> (Vec<StreamEvent>, Response) {
    let splits: Vec<usize> = (size.max(1)..body.len()).step_by(size.max(1)).collect();
    decode_split(dialect, model, body, &splits)
}

/// Events as JSON lines, the `events.jsonl` format.
pub fn events_to_jsonl(events: &[StreamEvent]) -> String {
    let mut out = String::new();
    for e in events {
        let line = serde_json::to_string(e).unwrap_or_else(|err| format!("{{\"unserializable\":\"{err}\"}}"));
        let _ = writeln!(out, "{line}");
    }
    out
}

/// A response as pretty JSON, the `response.json` format.
pub fn response_to_json(response: &Response) -> String {
    let mut s = serde_json::to_string_pretty(response).unwrap_or_default();
    s.push('\n');
    s
}

/// A request as JSON, the `request.json` format: secrets redacted, body parsed.
pub fn request_to_json(request: &omni_protocol::dialect::HttpRequest) -> String {
    let headers: Vec<Value> = request.headers.iter().map(|h| json!([h.name, h.display_value()])).collect();
    let body: Value =
        serde_json::from_slice(&request.body).unwrap_or_else(|_| json!(String::from_utf8_lossy(&request.body)));
    let value = json!({ "method": request.method.as_str(), "url": request.url, "headers": headers, "body": body });
    let mut s = serde_json::to_string_pretty(&value).unwrap_or_default();
    s.push('\n');
    s
}

/// Compares `actual` with the file at `path`, or writes it when blessing.
/// Returns a description of the difference.
pub fn check_or_bless(path: &Path, actual: &str) -> Result<(), String> {
    if blessing() {
        return fs::write(path, actual).map_err(|e| format!("{}: {e}", path.display()));
    }
    let expected = fs::read_to_string(path)
        .map_err(|e| format!("{}: {e} (run with OMNI_BLESS=1 to create it, then review it)", path.display()))?;
    if expected == actual {
        return Ok(());
    }
    let first_diff = expected.lines().zip(actual.lines()).position(|(a, b)| a != b);
    let line = first_diff.unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    Err(format!(
        "{} differs at line {}:\n  expected: {}\n  actual:   {}",
        path.display(),
        line + 1,
        expected.lines().nth(line).unwrap_or("<end>"),
        actual.lines().nth(line).unwrap_or("<end>")
    ))
}

/// The provider of a request case: its own, or the catalogue's for the model.
pub fn provider_for(input: &RequestInput) -> Result<Provider, FixtureError> {
    if let Some(p) = &input.provider {
        return Ok(p.clone());
    }
    Err(FixtureError(format!("no provider given for model {}", input.model.id)))
}
