//! A logger that keeps every record, at every level, for tests that prove a key never
//! reaches a log (the HTTP crates under the drivers log what they write at trace level),
//! and that test itself ([`secrets_are_sent_but_never_logged`]).

use std::sync::Mutex;
use std::time::Duration;

use crate::connect_proxy::{encoded_credentials, ConnectProxy, CREDENTIALS, PASSWORD};
use crate::http_suite::{finished_text, Setup, StreamingDriver};
use crate::keepalive::{reuse_body, KeepAliveServer, Plan};
use crate::redirects::{carries_every_credential, secret_setup, KEY as SECRET_KEY, SECRET_HEADERS};
use crate::replay::ReplayServer;
use crate::scenarios::{paced, text_events};

/// A key shaped like Anthropic's, for those tests.
pub const KEY: &str = "sk-ant-api03-never-log-me";

struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        let line = format!("{} {}", record.target(), record.args());
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    fn flush(&self) {}
}

static LOGS: Capture = Capture(Mutex::new(Vec::new()));

/// Installs the capturing logger for this process, every level on. Panics if another
/// logger is installed: call it once, in a test binary of its own.
pub fn capture_all() {
    log::set_logger(&LOGS).expect("the only logger of this test binary");
    log::set_max_level(log::LevelFilter::Trace);
}

/// Checks the records so far: `target` logged something (so logging was really on), and
/// neither [`KEY`] nor any 6-byte piece of its secret part appears (ureq-proto logs
/// written bytes in rows of 16).
pub fn assert_key_not_logged(target: &str) {
    let logs = LOGS.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(logs.iter().any(|l| l.starts_with(target)), "trace logging of {target} was on");
    let all = logs.join("\n");
    assert!(!all.contains(KEY), "the key was logged");
    let pieces: Vec<&str> = (0..KEY.len() - 6).filter_map(|i| KEY.get(i..i + 6)).collect();
    assert!(!pieces.iter().any(|p| all.contains(p) && !"sk-ant-api03".contains(p)), "part of the key was logged");
}

/// Checks that no record so far holds `secret` or any 6-byte piece of it (the proxy
/// credentials of [`crate::connect_proxy::CREDENTIALS`], say).
pub fn assert_not_logged(secret: &str) {
    let all = LOGS.0.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
    let pieces: Vec<&str> = (0..=secret.len().saturating_sub(6)).filter_map(|i| secret.get(i..i + 6)).collect();
    assert!(!pieces.iter().any(|p| all.contains(p)), "part of a secret was logged");
}

/// The test, through `driver`: a call carries the key and no record holds any piece of it
/// (`target`, the crate that logs written bytes, must have logged); then a call with
/// secret headers from the provider and the options ([`crate::redirects::SECRET_HEADERS`]),
/// sent and never logged; then a call through a proxy with credentials, which no record
/// holds either and the client does not print. Installs the capturing logger: run it in a
/// test binary of its own.
pub fn secrets_are_sent_but_never_logged<D: StreamingDriver>(driver: &D, target: &str)
where
    D::Client: std::fmt::Debug,
{
    capture_all();
    let server = ReplayServer::start(vec![paced(&text_events(&["Hi"]), Duration::ZERO)]).expect("server");
    let client = driver.client(&Setup::new(format!("{}/v1", server.base_url()), KEY));
    assert_eq!(finished_text(&driver.stream(&client)).as_deref(), Some("Hi"));
    assert_eq!(server.requests()[0].header("x-api-key"), Some(KEY), "the key was sent");
    assert_key_not_logged(target);

    let server = ReplayServer::start(vec![paced(&text_events(&["Hi"]), Duration::ZERO)]).expect("server");
    let client = driver.client(&secret_setup(format!("{}/v1", server.base_url())));
    assert_eq!(finished_text(&driver.stream(&client)).as_deref(), Some("Hi"));
    assert!(carries_every_credential(&server.requests()[0]), "the secret headers were sent");
    for (_, value) in SECRET_HEADERS {
        assert_not_logged(value.rsplit([' ', '=']).next().unwrap_or(value));
    }
    assert_secret_headers_never_printed(&client);

    // A key in the query (`Auth::Query`): in the request line, where HTTP crates log.
    let server = ReplayServer::start(vec![crate::hooks::hi_there()]).expect("server");
    let client = driver.client(&crate::hooks::query_setup(&server.base_url()));
    let events = driver.stream_model(&client, crate::hooks::query_model().into());
    assert_eq!(finished_text(&events).as_deref(), Some("Hi there"));
    assert!(server.requests()[0].path.contains(crate::hooks::KEY_TAIL), "the key was sent");
    assert_not_logged(crate::hooks::KEY_TAIL);
    assert!(!format!("{client:?}").contains(crate::hooks::KEY_TAIL), "nor printed");

    let proxy = ConnectProxy::start(Some(CREDENTIALS)).expect("proxy");
    let (server, ca) = KeepAliveServer::start_tls(reuse_body(), Plan::Serve).expect("server");
    let setup = Setup {
        root_certificate: Some(ca),
        proxy: Some(proxy.url(Some(CREDENTIALS))),
        ..Setup::new(server.base_url(), KEY)
    };
    let client = driver.client(&setup);
    assert_eq!(finished_text(&driver.stream(&client)).as_deref(), Some("Hi"));
    assert_eq!(proxy.heads().len(), 1, "the call went through the proxy");
    assert_not_logged(PASSWORD);
    assert_not_logged(&encoded_credentials());
    assert!(!format!("{client:?}").contains(PASSWORD), "nor printed");
}

/// Checks that `client` (built from [`secret_setup`]) prints neither the key nor any
/// secret header value in its `Debug` (plain or pretty).
pub fn assert_secret_headers_never_printed(client: &impl std::fmt::Debug) {
    let printed = format!("{client:?} {client:#?}");
    assert!(!printed.contains(SECRET_KEY), "the key was printed");
    for (name, value) in SECRET_HEADERS {
        let secret = value.rsplit([' ', '=']).next().unwrap_or(value);
        assert!(!printed.contains(secret), "the value of {name} was printed: {printed}");
    }
}

/// Through `driver`: a client with secret headers from its provider and its options sends
/// them and prints none (no logger needed; every driver runs it).
pub fn secret_headers_are_sent_but_never_printed<D: StreamingDriver>(driver: &D)
where
    D::Client: std::fmt::Debug,
{
    let server = ReplayServer::start(vec![paced(&text_events(&["Hi"]), Duration::ZERO)]).expect("server");
    let client = driver.client(&secret_setup(format!("{}/v1", server.base_url())));
    assert_eq!(finished_text(&driver.stream(&client)).as_deref(), Some("Hi"));
    assert!(carries_every_credential(&server.requests()[0]), "the secret headers were sent");
    assert_secret_headers_never_printed(&client);

    // A server that echoes the credentials back in its error: the error shows none.
    let echo = SECRET_HEADERS.iter().map(|(_, v)| *v).chain([SECRET_KEY]).collect::<Vec<_>>().join(", ");
    let body = serde_json::json!({"error": {"type": "authentication_error", "message": format!("bad: {echo}")}});
    let server = ReplayServer::start(vec![crate::sim::Reply::error(401, &[], &body.to_string())]).expect("server");
    let client = driver.client(&secret_setup(format!("{}/v1", server.base_url())));
    let events = driver.stream(&client);
    let Some(omni_protocol::generate::GenerateEvent::Failed { error, partial }) = events.last() else {
        panic!("expected a failure: {events:?}")
    };
    let omni_protocol::generate::GenerateError::Provider(provider_error) = &**error else { panic!("{error:?}") };
    assert_eq!(provider_error.status, Some(401));
    assert!(provider_error.message.starts_with("bad: <redacted>"), "{}", provider_error.message);
    let shown = format!("{error} {error:?} {partial:?} {:?}", provider_error.body);
    assert_secret_headers_never_printed(&shown);
}
