use super::*;
use crate::wire::http::Header;

fn post(url: &str) -> HttpRequest {
    HttpRequest {
        method: Method::Post,
        url: url.into(),
        headers: vec![Header::secret("x-api-key", "sk-secret"), Header::new("content-type", "application/json")],
        body: b"{\"prompt\":1}".to_vec(),
    }
}

fn location(url: &str) -> Vec<(String, String)> {
    vec![("Location".into(), url.into())]
}

fn decide(request: &HttpRequest, status: u16, to: &str) -> Result<HttpRequest, RedirectError> {
    Redirects::default().on_head(request, status, &location(to)).expect("a redirect status")
}

#[test]
fn statuses_that_are_not_redirects_are_left_alone() {
    let request = post("http://h/v1/messages");
    for status in [200, 204, 300, 304, 305, 306, 400, 500] {
        assert!(Redirects::default().on_head(&request, status, &location("/x")).is_none(), "{status}");
    }
}

#[test]
fn same_origin_307_and_308_keep_method_headers_and_body() {
    let request = post("http://h:8080/v1/messages");
    for status in [307, 308] {
        let next = decide(&request, status, "/v2/messages?beta=1").unwrap();
        assert_eq!(next.url, "http://h:8080/v2/messages?beta=1");
        assert_eq!((next.method, &next.headers, &next.body), (request.method, &request.headers, &request.body));
    }
}

#[test]
fn relative_locations_resolve_against_the_url_requested() {
    let request = post("https://api.example.com/v1/chat/completions?api-version=1");
    let cases = [
        ("completions2", "https://api.example.com/v1/chat/completions2"),
        ("../x", "https://api.example.com/v1/x"),
        ("./../../../../y", "https://api.example.com/y"),
        ("?v=2", "https://api.example.com/v1/chat/completions?v=2"),
        ("#frag", "https://api.example.com/v1/chat/completions?api-version=1"),
        ("/a/./b/../c", "https://api.example.com/a/c"),
        ("//API.example.com:443/z", "https://api.example.com/z"),
        ("HTTPS://api.example.com/w#f", "https://api.example.com/w"),
        ("/a%20b/ü\\", "https://api.example.com/a%20b/%C3%BC%5C"),
    ];
    for (to, expected) in cases {
        assert_eq!(decide(&request, 307, to).map(|r| r.url), Ok(expected.to_string()), "{to}");
    }
}

#[test]
fn another_origin_is_refused_naming_the_location_without_credentials() {
    let request = post("http://127.0.0.1:8080/v1/messages");
    for status in [301, 302, 303, 307, 308] {
        for to in [
            "http://127.0.0.1:8081/v1/messages",
            "http://localhost:8080/v1/messages",
            "https://127.0.0.1:8080/v1/messages",
            "//evil.example/v1",
            "ftp://127.0.0.1:8080/x",
            "http:evil.example",
            "\\\\evil.example/x",
            "/\\evil.example/x",
            "http://user:hunter2@evil.example/x",
        ] {
            let error = decide(&request, status, to).unwrap_err();
            assert!(
                matches!(error, RedirectError::OtherOrigin { status: s, .. } if s == status),
                "{status} {to}: {error:?}"
            );
            assert!(!error.to_string().contains("hunter2"), "{error}");
        }
    }
    let error = decide(&request, 307, "http://user:hunter2@evil.example/x").unwrap_err();
    assert_eq!(error.location(), Some("http://evil.example/x"));
}

#[test]
fn the_followed_url_keeps_the_original_authority_byte_for_byte() {
    // Whatever the Location says, a followed request goes to the authority already trusted.
    let request = post("http://127.0.0.1:8080/v1/messages");
    let next = decide(&request, 307, "http://127.0.0.1:8080\\@evil.example/").unwrap();
    assert!(next.url.starts_with("http://127.0.0.1:8080/"), "{}", next.url);
    assert_eq!(decide(&request, 308, "http://127.0.0.1:80/x").unwrap_err().location(), Some("http://127.0.0.1:80/x"));
    let request = post("http://h/v1");
    assert_eq!(decide(&request, 308, "http://h:80/x").unwrap().url, "http://h/x");
}

#[test]
fn a_post_is_not_turned_into_a_get() {
    let request = post("http://h/v1/messages");
    for status in [301, 302, 303] {
        assert!(matches!(decide(&request, status, "/v2"), Err(RedirectError::MethodChange { .. })), "{status}");
    }
    let get = HttpRequest { method: Method::Get, body: Vec::new(), ..request };
    for status in [301, 302, 303, 307, 308] {
        assert_eq!(decide(&get, status, "/v2").unwrap().url, "http://h/v2");
    }
}

#[test]
fn locations_that_are_missing_doubled_or_malformed_are_typed_errors() {
    let request = post("http://h/v1/messages");
    let mut redirects = Redirects::default();
    let none = redirects.on_head(&request, 307, &[]).unwrap();
    assert_eq!(none, Err(RedirectError::BadLocation { status: 307, location: None }));
    let two = vec![("location".to_string(), "/a".to_string()), ("location".to_string(), "/b".to_string())];
    assert!(matches!(redirects.on_head(&request, 307, &two), Some(Err(RedirectError::BadLocation { .. }))));
    for bad in ["", "/a b", "/a\tb", "/a\u{7f}", "http://h:99999/x", "http://h:8x/", "http:///x", "http://user:pw@h/x"]
    {
        let result = decide(&request, 307, bad);
        assert!(matches!(result, Err(RedirectError::BadLocation { .. })), "{bad:?}: {result:?}");
        assert!(!result.unwrap_err().to_string().contains("pw@"));
    }
}

#[test]
fn a_loop_fails_after_the_bound_and_hops_resolve_against_the_last() {
    let request = post("http://h/v1/messages");
    let mut redirects = Redirects::default();
    let mut url = request.url.clone();
    for hop in 0..MAX_REDIRECTS {
        let next = redirects.on_head(&request, 307, &location(&format!("h{hop}/"))).unwrap().unwrap();
        url = next.url;
    }
    assert_eq!(url, "http://h/v1/h0/h1/h2/h3/h4/");
    let error = redirects.on_head(&request, 307, &location("/v1/messages")).unwrap().unwrap_err();
    assert_eq!(error, RedirectError::TooMany { limit: MAX_REDIRECTS, location: "/v1/messages".into() });
}

#[test]
fn a_huge_location_is_cut_in_the_error() {
    let request = post("http://h/v1");
    let huge = format!("http://other/{}", "a".repeat(100_000));
    let error = decide(&request, 307, &huge).unwrap_err();
    assert!(error.location().unwrap().len() <= MAX_SHOWN + 4);
}

#[test]
fn a_key_in_the_query_stays_on_a_same_origin_hop_and_never_goes_elsewhere() {
    let request = post("https://h.example/v1/x?alt=sse&key=AIza-query-secret");
    let cases = [
        ("/v2/x", "https://h.example/v2/x?key=AIza-query-secret"),
        ("/v2/x?alt=sse", "https://h.example/v2/x?alt=sse&key=AIza-query-secret"),
        ("/v2/x?key=AIza-query-secret&b=1", "https://h.example/v2/x?key=AIza-query-secret&b=1"),
    ];
    for (to, expected) in cases {
        assert_eq!(decide(&request, 307, to).map(|r| r.url), Ok(expected.to_string()), "{to}");
    }
    // Another origin: refused, whatever the location says; the error's location is the
    // server's (the machine's scrubber cuts an echoed key out of it).
    let refused = decide(&request, 307, "https://elsewhere.example/v1/x");
    assert!(matches!(refused, Err(RedirectError::OtherOrigin { .. })), "{refused:?}");
}
