//! The redirect suite every driver runs: the core decides redirects once
//! (`omni_protocol::transport`), the drivers' HTTP clients follow none themselves. A redirect
//! to another origin fails typed and no request at all (so no credential) reaches that
//! origin; a same-origin 307/308 is followed with its method, body and credentials; a
//! 301/302/303 to the POST is refused; a loop fails after the bound.

use omni_protocol::generate::{GenerateError, GenerateEvent};
use omni_protocol::transport::{RedirectError, MAX_REDIRECTS};

use crate::http_suite::{finished_text, Setup, StreamingDriver};
use crate::replay::{RecordedRequest, ReplayServer};
use crate::scenarios::{paced, text_events};
use crate::sim::Reply;

/// The key of the suite's client.
pub const KEY: &str = "sk-redirect-key-0123456789";

/// Secret headers the suite's client sends besides the key: the provider's
/// (`x-goog-api-key` by its name, `x-tenant` marked secret) and the options'
/// (`authorization`, `cookie`).
pub const SECRET_HEADERS: [(&str, &str); 4] = [
    ("x-goog-api-key", "goog-secret-0123456"),
    ("x-tenant", "tenant-secret-4567"),
    ("authorization", "Bearer opt-secret-89ab"),
    ("cookie", "sid=cookie-secret-cdef"),
];

/// A client setup for the server at `base_url` that sends [`KEY`] and [`SECRET_HEADERS`].
pub fn secret_setup(base_url: String) -> Setup {
    let own = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    Setup {
        provider_headers: (own(&SECRET_HEADERS[..2]), vec!["X-Tenant".into()]),
        option_headers: (own(&SECRET_HEADERS[2..]), Vec::new()),
        ..Setup::new(base_url, KEY)
    }
}

/// True when `request` carried the key and every secret header.
pub fn carries_every_credential(request: &RecordedRequest) -> bool {
    request.header("x-api-key") == Some(KEY) && SECRET_HEADERS.iter().all(|(n, v)| request.header(n) == Some(*v))
}

fn redirect(status: u16, location: &str) -> Reply {
    Reply::error(status, &[("location", location)], "")
}

fn hi() -> Reply {
    paced(&text_events(&["Hi"]), std::time::Duration::ZERO)
}

/// The error a call ended with (panics when it finished).
fn failure(events: &[GenerateEvent], case: &str) -> GenerateError {
    match events.last() {
        Some(GenerateEvent::Failed { error, .. }) => (**error).clone(),
        other => panic!("{case}: expected a failure, got {other:?}"),
    }
}

/// Runs every redirect case through `driver`.
pub fn redirect_suite(driver: &impl StreamingDriver) {
    other_origins_get_nothing(driver);
    same_origin_is_followed(driver);
    a_post_is_not_turned_into_a_get(driver);
    a_loop_fails_after_the_bound(driver);
}

/// 301, 302, 307 and 308 to another port, another host name for the same port, another
/// scheme: a typed error naming the location (without the credentials a server put in
/// it), one request to the provider and none anywhere else, no retry.
fn other_origins_get_nothing(driver: &impl StreamingDriver) {
    let elsewhere = ReplayServer::start(vec![hi(), hi(), hi(), hi(), hi(), hi()]).expect("server");
    let port = |s: &ReplayServer| s.addr().port();
    for status in [301, 302, 307, 308] {
        for (to, shown) in [
            (format!("{}/v1/messages", elsewhere.base_url()), None),
            (
                format!("http://user:hunter2@127.0.0.1:{}/v1/messages", port(&elsewhere)),
                Some(format!("http://127.0.0.1:{}/v1/messages", port(&elsewhere))),
            ),
            ("http://localhost:{port}/v1/messages".into(), None),
            ("https://127.0.0.1:{port}/v1/messages".into(), None),
        ] {
            let provider = ReplayServer::start(Vec::new()).expect("server");
            let to = to.replace("{port}", &port(&provider).to_string());
            provider.push_replies([redirect(status, &to), hi(), hi()]);
            let client = driver.client(&secret_setup(format!("{}/v1", provider.base_url())));
            let events = driver.stream(&client);
            let case = format!("{status} to {to}");
            let error = failure(&events, &case);
            let expected = shown.unwrap_or_else(|| to.clone());
            assert!(
                matches!(&error, GenerateError::Redirect(RedirectError::OtherOrigin { status: s, location })
                    if *s == status && *location == expected),
                "{case}: {error:?}"
            );
            assert!(!error.to_string().contains("hunter2"), "{case}: {error}");
            assert!(!events.iter().any(|e| matches!(e, GenerateEvent::Retry { .. })), "{case}: not retried");
            let requests = provider.requests();
            assert_eq!(requests.len(), 1, "{case}: only the first request reached the provider's port");
            assert!(carries_every_credential(&requests[0]), "{case}: the provider got its credentials");
        }
    }
    assert!(elsewhere.requests().is_empty(), "no request (so no key) reached the other origin");
}

/// 307 and 308 to the same origin, by absolute path, relative path and absolute URL: the
/// call finishes with the answer from there, and the second request is the first again
/// (method, body, key and secret headers) at the new path.
fn same_origin_is_followed(driver: &impl StreamingDriver) {
    for status in [307, 308] {
        for (to, path) in [
            ("/v2/messages?beta=1".to_string(), "/v2/messages?beta=1"),
            ("messages-moved".to_string(), "/v1/messages-moved"),
            ("{base}/v1/elsewhere".to_string(), "/v1/elsewhere"),
        ] {
            let provider = ReplayServer::start(Vec::new()).expect("server");
            let to = to.replace("{base}", &provider.base_url());
            provider.push_replies([redirect(status, &to), hi()]);
            let client = driver.client(&secret_setup(format!("{}/v1", provider.base_url())));
            let events = driver.stream(&client);
            let case = format!("{status} to {to}");
            assert_eq!(finished_text(&events).as_deref(), Some("Hi"), "{case}: {:?}", events.last());
            let requests = provider.requests();
            assert_eq!(requests.len(), 2, "{case}");
            let (first, second) = (&requests[0], &requests[1]);
            assert_eq!((first.method.as_str(), first.path.as_str()), ("POST", "/v1/messages"), "{case}");
            assert_eq!((second.method.as_str(), second.path.as_str()), ("POST", path), "{case}");
            assert_eq!(second.body, first.body, "{case}: the body is kept");
            assert!(!second.body.is_empty(), "{case}");
            assert!(carries_every_credential(second), "{case}: credentials stay with their origin");
        }
    }
}

/// 301, 302 and 303 to the streaming POST, same origin: following would send a GET without
/// the prompt, so the call fails typed after one request.
fn a_post_is_not_turned_into_a_get(driver: &impl StreamingDriver) {
    for status in [301, 302, 303] {
        let provider = ReplayServer::start(vec![redirect(status, "/v2/messages"), hi()]).expect("server");
        let client = driver.client(&secret_setup(format!("{}/v1", provider.base_url())));
        let error = failure(&driver.stream(&client), &format!("{status}"));
        assert!(
            matches!(&error, GenerateError::Redirect(RedirectError::MethodChange { status: s, location })
                if *s == status && location == "/v2/messages"),
            "{status}: {error:?}"
        );
        assert_eq!(provider.requests().len(), 1, "{status}");
    }
}

/// A server that redirects to itself for ever: [`MAX_REDIRECTS`] hops are followed, the
/// next fails typed, and nothing is retried.
fn a_loop_fails_after_the_bound(driver: &impl StreamingDriver) {
    let hops = MAX_REDIRECTS as usize + 1;
    let provider = ReplayServer::start(vec![redirect(307, "/v1/messages"); hops + 5]).expect("server");
    let client = driver.client(&secret_setup(format!("{}/v1", provider.base_url())));
    let events = driver.stream(&client);
    let error = failure(&events, "loop");
    assert!(
        matches!(&error, GenerateError::Redirect(RedirectError::TooMany { limit: MAX_REDIRECTS, location })
            if location == "/v1/messages"),
        "{error:?}"
    );
    assert_eq!(provider.requests().len(), hops, "the first request and {MAX_REDIRECTS} redirected ones");
    assert!(provider.requests().iter().all(carries_every_credential));
}
