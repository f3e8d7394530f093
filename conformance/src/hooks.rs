//! The provider-hooks suite every driver runs ([`omni_protocol::hooks`]): an Azure-style
//! provider (the deployment in the path, `api-version` in the query, the key in `api-key`,
//! no `model` in the body) and an OpenRouter-style one (routing preferences in the body,
//! `HTTP-Referer` and `X-Title` headers) each stream a short reply from the replay server,
//! which records what was sent; and a key sent in the query (`Auth::Query`) reaches the
//! provider, follows a same-origin redirect, never another origin, and no error shows it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::generate::{GenerateError, GenerateEvent};
use omni_protocol::hooks::add_query;
use omni_protocol::transport::RedirectError;
use omni_protocol::{Auth, Dialect, Model, Provider};
use serde_json::{json, Value};

use crate::http_suite::{finished_text, Setup, StreamingDriver};
use crate::replay::{RecordedRequest, ReplayServer};
use crate::scenarios::paced;
use crate::sim::Reply;
use crate::wires::bodies::{openai_completions, Answer};

/// The key of the suite's clients. The `/` and `+` must be percent-encoded in a query.
pub const KEY: &str = "sk-hooks/key+q7Zx9Wv4Lm";
/// The part of [`KEY`] no text may show, encoded or not.
pub const KEY_TAIL: &str = "q7Zx9Wv4Lm";

/// A Chat Completions reply of "Hi there".
pub fn hi_there() -> Reply {
    paced(&openai_completions(&Answer { text: &["Hi", " there"], calls: &[], finished: true }), Duration::ZERO)
}

fn body(request: &RecordedRequest) -> Value {
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

/// The one request `server` recorded, after a call that answered "Hi there".
fn the_request(server: &ReplayServer, events: &[GenerateEvent], case: &str) -> RecordedRequest {
    assert_eq!(finished_text(events).as_deref(), Some("Hi there"), "{case}: {:?}", events.last());
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{case}");
    requests[0].clone()
}

/// Every case through `driver`.
pub fn hooks_suite(driver: &impl StreamingDriver) {
    azure_style(driver);
    openrouter_style(driver);
    a_query_key_stays_with_its_origin(driver);
}

/// An Azure OpenAI-style provider at `base_url`: `…/openai/deployments/{model}/chat/
/// completions?api-version=2024-10-21`, the key in `api-key`, no `model` in the body; its
/// event hook counts the events it sees into `seen`.
pub fn azure_provider(id: &str, base_url: &str, seen: Arc<AtomicUsize>) -> Provider {
    Provider { auth: Auth::Header { name: "api-key".into() }, ..Provider::openai_compatible(id, base_url, None) }
        .url_hook(|url, cx| {
            let path = format!("/openai/deployments/{}/chat/completions", cx.model);
            *url = url.replacen("/chat/completions", &path, 1);
            add_query(url, "api-version", "2024-10-21");
        })
        .body_hook(|body, _| {
            body.remove("model");
        })
        .event_hook(move |_, _| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
}

fn azure_style(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![hi_there()]).expect("server");
    let seen = Arc::new(AtomicUsize::new(0));
    let provider = azure_provider("azure-hooks", &server.base_url(), seen.clone());
    let client = driver.client(&Setup { provider: Some(provider), ..Setup::new(server.base_url(), KEY) });
    let events =
        driver.stream_model(&client, Model::new("azure-hooks", "gpt-4o-prod", Dialect::OpenaiCompletions).into());
    let request = the_request(&server, &events, "azure");
    assert_eq!(request.path, "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21");
    assert_eq!(request.header("api-key"), Some(KEY));
    assert_eq!(request.header("authorization"), None);
    let body = body(&request);
    assert!(body.get("model").is_none(), "the body hook removed it: {body}");
    assert_eq!((&body["stream"], &body["messages"][0]["role"]), (&json!(true), &json!("user")), "{body}");
    // Five JSON events (role, two pieces, finish, usage); `[DONE]` is no JSON event.
    assert_eq!(seen.load(Ordering::SeqCst), 5, "the event hook saw every event");
}

fn openrouter_style(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![hi_there()]).expect("server");
    let provider = Provider::openai_compatible("router-hooks", format!("{}/api/v1", server.base_url()), None)
        .header("HTTP-Referer", "https://app.example")
        .header("X-Title", "Hooks suite")
        .body_hook(|body, _| {
            body.insert("provider".into(), json!({"order": ["anthropic", "openai"], "allow_fallbacks": false}));
        });
    let provider = Provider { auth: Auth::Bearer, ..provider };
    let client = driver.client(&Setup { provider: Some(provider), ..Setup::new(server.base_url(), KEY) });
    let model = Model::new("router-hooks", "anthropic/claude-sonnet-4.5", Dialect::OpenaiCompletions);
    let request = the_request(&server, &driver.stream_model(&client, model.into()), "openrouter");
    assert_eq!(request.path, "/api/v1/chat/completions");
    assert_eq!(request.header("http-referer"), Some("https://app.example"));
    assert_eq!(request.header("x-title"), Some("Hooks suite"));
    assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let body = body(&request);
    assert_eq!(body["provider"], json!({"order": ["anthropic", "openai"], "allow_fallbacks": false}));
    assert_eq!(body["model"], json!("anthropic/claude-sonnet-4.5"));
}

/// A provider at `base_url` that takes its key as `?key=`.
pub fn query_key_provider(base_url: &str) -> Provider {
    Provider {
        auth: Auth::Query { name: "key".into() },
        ..Provider::openai_compatible("query-hooks", format!("{base_url}/v1"), None)
    }
}

/// A model of [`query_key_provider`].
pub fn query_model() -> Model {
    Model::new("query-hooks", "m", Dialect::OpenaiCompletions)
}

/// A client setup for [`query_key_provider`] at `base_url`, with [`KEY`], no retries.
pub fn query_setup(base_url: &str) -> Setup {
    Setup { provider: Some(query_key_provider(base_url)), no_retries: true, ..Setup::new(base_url, KEY) }
}

/// The error a call ended with; neither it nor the partial response shows the key.
fn failure_without_key(events: &[GenerateEvent], case: &str) -> GenerateError {
    let Some(GenerateEvent::Failed { error, partial }) = events.last() else {
        panic!("{case}: expected a failure, got {:?}", events.last())
    };
    let shown = format!("{error} {error:?} {partial:?}");
    assert!(!shown.contains(KEY_TAIL), "{case}: the key was shown: {shown}");
    (**error).clone()
}

fn a_query_key_stays_with_its_origin(driver: &impl StreamingDriver) {
    const ENCODED: &str = "key=sk-hooks%2Fkey%2Bq7Zx9Wv4Lm";
    let server = ReplayServer::start(vec![hi_there()]).expect("server");
    let client = driver.client(&query_setup(&server.base_url()));
    let request = the_request(&server, &driver.stream_model(&client, query_model().into()), "query key");
    assert_eq!(request.path, format!("/v1/chat/completions?{ENCODED}"));
    assert!(!request.any_header_contains(KEY_TAIL), "in the query only: {:?}", request.headers());

    // A same-origin 307: followed, with the key.
    let server = ReplayServer::start(vec![Reply::error(307, &[("location", "/v2/chat/completions")], ""), hi_there()])
        .expect("server");
    let client = driver.client(&query_setup(&server.base_url()));
    let events = driver.stream_model(&client, query_model().into());
    assert_eq!(finished_text(&events).as_deref(), Some("Hi there"), "{:?}", events.last());
    assert_eq!(server.requests()[1].path, format!("/v2/chat/completions?{ENCODED}"));

    // A 307 to another origin, its location echoing the key: not followed, nothing reaches
    // the other origin, and the error's location has the key cut out.
    let elsewhere = ReplayServer::start(vec![hi_there()]).expect("server");
    let to = format!("{}/v1/chat/completions?{ENCODED}&k2={KEY}", elsewhere.base_url());
    let server = ReplayServer::start(vec![Reply::error(307, &[("location", to.as_str())], "")]).expect("server");
    let client = driver.client(&query_setup(&server.base_url()));
    let error = failure_without_key(&driver.stream_model(&client, query_model().into()), "another origin");
    assert!(matches!(error, GenerateError::Redirect(RedirectError::OtherOrigin { .. })), "{error:?}");
    assert!(elsewhere.requests().is_empty(), "no request (so no key) reached the other origin");
    assert_eq!(server.requests().len(), 1);

    // Nothing listens: whatever the driver's HTTP client says (reqwest quotes the URL), the
    // transport error does not show the key.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let client = driver.client(&query_setup(&format!("http://127.0.0.1:{port}")));
    let error = failure_without_key(&driver.stream_model(&client, query_model().into()), "connection refused");
    assert!(matches!(error, GenerateError::Transport(_)), "{error:?}");
}
