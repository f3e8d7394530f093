//! The upstream corpus: real provider streams recorded by other projects, loaded in place.
//!
//! `../shared/fixtures/upstream/` holds one folder per wire format (`anthropic`, `openai-chat`,
//! `openai-responses`, `gemini`, `ollama`); its `SOURCES.md` documents every file. The files
//! come in several container formats (raw bodies, vercel JSON-lines, three kinds of YAML
//! cassette, httprr transcripts); [`load_corpus`] unwraps them all into [`Recording`]s: one
//! per recorded HTTP response, with the body bytes exactly as the provider sent them.
//! `../shared/fixtures/local-peers/` (streams from real llama.cpp servers) loads the same way
//! with [`load_local_peers`].
//!
//! ```text
//!  file ─► container format ─► interactions ─► Recording { dialect, status, headers, body }
//! ```
//!
//! Loading never skips a file silently: a file that cannot be unwrapped is a [`LoadError`]
//! naming it. Expectations for each recording (our own oracle, written by reading the
//! recordings) live in `conformance/upstream-expectations.json`; see [`expect`].

mod cassette;
pub mod expect;
mod http;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use omni_protocol::Dialect;

/// The shared fixtures folder (holding `upstream/` and `local-peers/`): the one named by
/// `OMNI_SHARED_FIXTURES`, else the `shared/fixtures` found walking up from this crate
/// (the workspace's sibling in a checkout, further up from a git worktree). `None` when
/// there is none; tests that need it then say so and pass.
pub fn shared_fixtures_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("OMNI_SHARED_FIXTURES") {
        return Some(PathBuf::from(dir)).filter(|d| d.is_dir());
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().map(|dir| dir.join("shared/fixtures")).find(|d| d.is_dir())
}

/// Every recording of the shared fixtures (the upstream corpus, then the
/// local peers), or `None` when the fixtures are absent. A corpus that fails to load
/// panics: a broken file is never skipped silently.
pub fn load_shared_recordings() -> Option<Corpus> {
    let dir = shared_fixtures_dir()?;
    let upstream = dir.join("upstream");
    if !upstream.is_dir() {
        return None;
    }
    let mut corpus = load_corpus_report(&upstream).unwrap_or_else(|e| panic!("{e}"));
    let peers = dir.join("local-peers");
    if peers.is_dir() {
        corpus.recordings.extend(load_local_peers(&peers).unwrap_or_else(|e| panic!("{e}")));
    }
    Some(corpus)
}

/// How a corpus file wraps its response(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContainerFormat {
    /// The response body itself (SSE or NDJSON), nothing around it.
    RawBody,
    /// vercel/ai `*.chunks.txt`: one SSE `data:` payload per line.
    JsonLines,
    /// vcrpy cassette (pydantic-ai): `interactions[].response.body.string`.
    VcrpyCassette,
    /// go-vcr v2 cassette (fantasy): `interactions[].response.body`.
    GoVcrCassette,
    /// httpmock cassette (rig): one `when:`/`then:` YAML document per turn.
    HttpmockCassette,
    /// httprr transcript (langchaingo): raw HTTP/1.1 request and response.
    Httprr,
    /// A local-peer capture: `<name>.body`, `<name>.headers`, `<name>.request.json`.
    LocalPeer,
}

impl ContainerFormat {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::RawBody => "raw body",
            Self::JsonLines => "json-lines",
            Self::VcrpyCassette => "vcrpy cassette",
            Self::GoVcrCassette => "go-vcr cassette",
            Self::HttpmockCassette => "httpmock cassette",
            Self::Httprr => "httprr transcript",
            Self::LocalPeer => "local peer",
        }
    }
}

/// One recorded HTTP response.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Path relative to the corpus root, e.g. `anthropic/omni__anthropic_text.sse`
    /// (`local-peers/<name>.body` for local peers).
    pub file: String,
    /// Position of this response among the file's interactions, from 0 (skipped ones count).
    pub interaction: usize,
    /// The wire format, from the folder (or, for local peers, the request path).
    pub dialect: Dialect,
    /// The container the file uses.
    pub format: ContainerFormat,
    /// HTTP status (200 where the container records only a body).
    pub status: u16,
    /// Response headers as recorded (empty where the container records only a body).
    pub headers: Vec<(String, String)>,
    /// The response body, byte for byte (chunked transfer encoding removed).
    pub body: Vec<u8>,
    /// The request body, where the container recorded it and it is JSON.
    pub request_body: Option<serde_json::Value>,
}

impl Recording {
    /// True for a 2xx response, which is replayed as a stream.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first header of that name (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// An interaction that was recorded but is not a streamed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Path relative to the corpus root.
    pub file: String,
    /// Position among the file's interactions.
    pub interaction: usize,
    /// Why it was not loaded.
    pub reason: String,
}

/// Everything [`load_corpus_report`] found.
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    /// The streamed responses (and HTTP error responses to streaming requests).
    pub recordings: Vec<Recording>,
    /// Interactions left out, with the reason.
    pub skipped: Vec<Skipped>,
}

/// Why the corpus could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// A file or folder could not be read.
    Io {
        /// What was being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file's contents do not match its container format.
    Malformed {
        /// Path relative to the corpus root.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A folder that maps to no dialect.
    UnknownFolder {
        /// Folder name.
        folder: String,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::Malformed { file, reason } => write!(f, "{file}: {reason}"),
            Self::UnknownFolder { folder } => write!(f, "corpus folder {folder:?} maps to no dialect"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The dialect of an upstream corpus folder.
pub fn folder_dialect(folder: &str) -> Option<Dialect> {
    match folder {
        "anthropic" => Some(Dialect::AnthropicMessages),
        "openai-chat" => Some(Dialect::OpenaiCompletions),
        "openai-responses" => Some(Dialect::OpenaiResponses),
        "gemini" => Some(Dialect::GoogleGemini),
        "ollama" => Some(Dialect::OllamaChat),
        _ => None,
    }
}

/// The dialect a request path speaks, e.g. `/v1/messages` -> Anthropic Messages.
pub fn path_dialect(path: &str) -> Option<Dialect> {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/chat/completions") {
        Some(Dialect::OpenaiCompletions)
    } else if path.ends_with("/messages") {
        Some(Dialect::AnthropicMessages)
    } else if path.ends_with("/responses") {
        Some(Dialect::OpenaiResponses)
    } else if path.ends_with(":streamGenerateContent") {
        Some(Dialect::GoogleGemini)
    } else if path.ends_with("/api/chat") {
        Some(Dialect::OllamaChat)
    } else {
        None
    }
}

/// Loads every recording of the upstream corpus rooted at `root` (the folder holding
/// `SOURCES.md`), in a stable order (folder, file name, interaction).
pub fn load_corpus(root: &Path) -> Result<Vec<Recording>, LoadError> {
    load_corpus_report(root).map(|c| c.recordings)
}

/// Like [`load_corpus`], also reporting interactions that were left out and why.
pub fn load_corpus_report(root: &Path) -> Result<Corpus, LoadError> {
    let mut corpus = Corpus::default();
    for folder in sorted_entries(root)? {
        let name = file_name(&folder);
        if !folder.is_dir() || name == "LICENSES" {
            continue; // SOURCES.md and the license texts are documentation.
        }
        let dialect = folder_dialect(&name).ok_or(LoadError::UnknownFolder { folder: name.clone() })?;
        for path in sorted_entries(&folder)? {
            let rel = format!("{name}/{}", file_name(&path));
            let bytes = fs::read(&path).map_err(|source| LoadError::Io { path: path.clone(), source })?;
            let file = FileContext { rel, dialect, bytes };
            load_file(&file, &mut corpus)?;
        }
    }
    Ok(corpus)
}

/// Loads the local-peer captures in `dir` (`<name>.body`, `.headers`, `.request.json`); each
/// case's dialect comes from its endpoint in the folder's `README.md` table.
pub fn load_local_peers(dir: &Path) -> Result<Vec<Recording>, LoadError> {
    let readme_path = dir.join("README.md");
    let readme = fs::read_to_string(&readme_path).map_err(|source| LoadError::Io { path: readme_path, source })?;
    let endpoints = http::local_peer_endpoints(&readme);
    let mut out = Vec::new();
    for path in sorted_entries(dir)? {
        let name = file_name(&path);
        let Some(case) = name.strip_suffix(".body") else { continue };
        let rel = format!("local-peers/{name}");
        let malformed = |reason: String| LoadError::Malformed { file: rel.clone(), reason };
        let endpoint =
            endpoints.get(case).ok_or_else(|| malformed(format!("no endpoint for case {case:?} in README.md")))?;
        let dialect = path_dialect(endpoint).ok_or_else(|| malformed(format!("unknown endpoint {endpoint:?}")))?;
        let read = |p: PathBuf| fs::read(&p).map_err(|source| LoadError::Io { path: p, source });
        let body = read(path.clone())?;
        let head = read(dir.join(format!("{case}.headers")))?;
        let (status, headers) = http::parse_curl_headers(&head).map_err(malformed)?;
        let request = read(dir.join(format!("{case}.request.json")))?;
        let request_body =
            serde_json::from_slice(&request).map_err(|e| malformed(format!("{case}.request.json is not JSON: {e}")))?;
        out.push(Recording {
            file: rel.clone(),
            interaction: 0,
            dialect,
            format: ContainerFormat::LocalPeer,
            status,
            headers,
            body,
            request_body: Some(request_body),
        });
    }
    Ok(out)
}

/// One corpus file being loaded.
pub(crate) struct FileContext {
    /// Path relative to the corpus root.
    pub rel: String,
    /// Dialect of its folder.
    pub dialect: Dialect,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl FileContext {
    /// A [`LoadError::Malformed`] for this file.
    pub(crate) fn malformed(&self, reason: impl Into<String>) -> LoadError {
        LoadError::Malformed { file: self.rel.clone(), reason: reason.into() }
    }

    /// The file as UTF-8 text.
    pub(crate) fn text(&self) -> Result<&str, LoadError> {
        std::str::from_utf8(&self.bytes).map_err(|e| self.malformed(format!("not UTF-8: {e}")))
    }

    /// A recording of this file.
    pub(crate) fn recording(&self, interaction: usize, format: ContainerFormat, response: Response) -> Recording {
        Recording {
            file: self.rel.clone(),
            interaction,
            dialect: self.dialect,
            format,
            status: response.status,
            headers: response.headers,
            body: response.body,
            request_body: response.request_body,
        }
    }
}

/// One response unwrapped from a container, before it becomes a [`Recording`].
#[derive(Debug, Default)]
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub request_body: Option<serde_json::Value>,
}

fn load_file(file: &FileContext, corpus: &mut Corpus) -> Result<(), LoadError> {
    let name = file.rel.rsplit('/').next().unwrap_or(&file.rel);
    if name.ends_with(".chunks.txt") {
        for (i, body) in json_lines_bodies(file)?.into_iter().enumerate() {
            let response = Response { status: 200, body, ..Response::default() };
            corpus.recordings.push(file.recording(i, ContainerFormat::JsonLines, response));
        }
        Ok(())
    } else if name.ends_with(".yaml") || name.ends_with(".yml") {
        cassette::load(file, corpus)
    } else if name.ends_with(".httprr") {
        http::load_httprr(file, corpus)
    } else {
        let response = Response { status: 200, body: file.bytes.clone(), ..Response::default() };
        corpus.recordings.push(file.recording(0, ContainerFormat::RawBody, response));
        Ok(())
    }
}

/// Re-wraps vercel JSON-lines as SSE: `data: <line>\n\n`, preceded by `event: <type>\n` for
/// Anthropic (whose SSE names every event). OpenAI Responses files may hold several
/// responses back to back; each `response.created` after the first starts a new one.
fn json_lines_bodies(file: &FileContext) -> Result<Vec<Vec<u8>>, LoadError> {
    #[derive(serde::Deserialize)]
    struct Typed<'a> {
        #[serde(borrow, rename = "type")]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let text = file.text()?;
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut body = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        // Some upstream lines are not valid JSON (documented in SOURCES.md); they are kept
        // as they are, as malformed input, and only lose their `event:` name.
        let kind = serde_json::from_str::<Typed<'_>>(line).ok().and_then(|t| t.kind);
        if file.dialect == Dialect::OpenaiResponses && kind.as_deref() == Some("response.created") && !body.is_empty() {
            bodies.push(std::mem::take(&mut body));
        }
        if file.dialect == Dialect::AnthropicMessages {
            let kind = kind.ok_or_else(|| file.malformed(format!("line {}: no \"type\" to name the event", n + 1)))?;
            body.extend_from_slice(format!("event: {kind}\n").as_bytes());
        }
        body.extend_from_slice(b"data: ");
        body.extend_from_slice(line.as_bytes());
        body.extend_from_slice(b"\n\n");
    }
    if body.is_empty() && bodies.is_empty() {
        return Err(file.malformed("no JSON lines"));
    }
    if !body.is_empty() {
        bodies.push(body);
    }
    Ok(bodies)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |source| LoadError::Io { path: dir.to_path_buf(), source };
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        paths.push(entry.map_err(io)?.path());
    }
    paths.sort();
    Ok(paths)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// True when a request (by its JSON body or URL) asked for a streamed response.
pub(crate) fn is_streaming_request(request_body: Option<&serde_json::Value>, url: &str) -> bool {
    let flag = request_body.and_then(|b| b.get("stream")).and_then(|s| s.as_bool());
    flag == Some(true) || url.contains("streamGenerateContent") || url.contains("alt=sse")
}

/// Decides whether a recorded interaction is a streamed response (or an HTTP error to a
/// streaming request) and so belongs in the corpus; `Err` carries the reason to skip it.
pub(crate) fn check_streaming(
    request_body: Option<&serde_json::Value>,
    url: &str,
    response: &Response,
    dialect: Dialect,
) -> Result<(), String> {
    if is_streaming_request(request_body, url) {
        return Ok(());
    }
    // Ollama streams unless told otherwise; the other APIs need an explicit flag or URL.
    let flag = request_body.and_then(|b| b.get("stream")).and_then(|s| s.as_bool());
    if dialect == Dialect::OllamaChat && flag != Some(false) {
        return Ok(());
    }
    let content_type = response
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.to_ascii_lowercase())
        .unwrap_or_default();
    if content_type.contains("event-stream") || content_type.contains("ndjson") {
        return Ok(()); // a stream, whatever the request said
    }
    Err(format!("non-streaming request (stream flag {flag:?}, content-type {content_type:?})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_lines(dialect: Dialect, text: &str) -> Result<Vec<Vec<u8>>, LoadError> {
        json_lines_bodies(&FileContext { rel: "d/f.chunks.txt".into(), dialect, bytes: text.as_bytes().to_vec() })
    }

    #[test]
    fn json_lines_become_sse_with_anthropic_event_names() {
        let bodies =
            json_lines(Dialect::AnthropicMessages, "{\"type\":\"ping\"}\n{\"type\":\"message_stop\"}").unwrap();
        let expected =
            "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        assert_eq!(bodies, vec![expected.as_bytes().to_vec()]);
        assert!(json_lines(Dialect::AnthropicMessages, "not json\n").is_err());
        assert!(json_lines(Dialect::OpenaiCompletions, "\n\n").is_err());
    }

    #[test]
    fn responses_json_lines_split_at_each_response_created() {
        let text = "{\"type\":\"response.created\"}\n{\"type\":\"response.completed\"}\n{\"type\":\"response.created\"}\n{bad\n";
        let bodies = json_lines(Dialect::OpenaiResponses, text).unwrap();
        assert_eq!(bodies.len(), 2);
        assert_eq!(bodies[1], b"data: {\"type\":\"response.created\"}\n\ndata: {bad\n\n");
    }

    #[test]
    fn request_paths_map_to_dialects() {
        assert_eq!(path_dialect("/v1/chat/completions"), Some(Dialect::OpenaiCompletions));
        assert_eq!(path_dialect("/v1/messages?beta=true"), Some(Dialect::AnthropicMessages));
        assert_eq!(path_dialect("/v1/responses"), Some(Dialect::OpenaiResponses));
        assert_eq!(path_dialect("/v1beta/models/g:streamGenerateContent?alt=sse"), Some(Dialect::GoogleGemini));
        assert_eq!(path_dialect("/api/chat"), Some(Dialect::OllamaChat));
        assert_eq!(path_dialect("/api/generate"), None);
    }
}
