//! What [`Dialect::build_request`] does the same for every dialect: the URL under a base
//! URL with a query, and which headers are secrets.

use super::*;

fn provider(base_url: &str, dialect: Dialect) -> Provider {
    Provider {
        dialect,
        auth: Auth::Header { name: "x-api-key".into() },
        headers: vec![("x-org".into(), "org-1".into()), ("cookie".into(), "sid=provider-cookie".into())],
        secret_headers: vec!["x-org".into()],
        ..Provider::openai_compatible("p", base_url, Some("P_KEY"))
    }
}

fn build(dialect: Dialect, provider: &Provider, options: &Options) -> HttpRequest {
    let model = Model::new("p", "m-1", dialect);
    let context = Context::from_prompt("hi");
    let key = ApiKey::new("sk-key-0123456789");
    let spec = RequestSpec { model: &model, provider, context: &context, options, api_key: Some(&key) };
    dialect.build_request(&spec).expect("built").request
}

#[test]
fn a_base_url_query_stays_after_the_path_for_every_dialect() {
    for dialect in Dialect::ALL {
        let plain = build(dialect, &provider("https://h.example/v1", dialect), &Options::default()).url;
        let with_query =
            build(dialect, &provider("https://h.example/v1?api-version=2024-10-21", dialect), &Options::default()).url;
        let (path, query) = plain.split_once('?').map_or((plain.as_str(), None), |(p, q)| (p, Some(q)));
        let expected = match query {
            Some(query) => format!("{path}?{query}&api-version=2024-10-21"),
            None => format!("{path}?api-version=2024-10-21"),
        };
        assert_eq!(with_query, expected, "{dialect}");
        assert!(path.starts_with("https://h.example/v1/") && path.len() > "https://h.example/v1/".len(), "{dialect}");
    }
}

#[test]
fn credential_headers_from_provider_and_options_are_secret_for_every_dialect() {
    let options = Options::default()
        .header("Authorization", "Bearer opt-token-1")
        .secret_header("x-tenant", "tenant-1")
        .header("x-trace", "visible");
    for dialect in Dialect::ALL {
        let request = build(dialect, &provider("http://h/v1", dialect), &options);
        let secret = |name: &str| request.headers.iter().find(|h| h.name == name).map(|h| h.sensitive);
        for name in ["x-api-key", "authorization", "cookie", "x-org", "x-tenant"] {
            assert_eq!(secret(name), Some(true), "{dialect}: {name}");
        }
        assert_eq!(secret("x-trace"), Some(false), "{dialect}");
        let printed = format!("{request:?}");
        for value in ["0123456789", "opt-token-1", "tenant-1", "provider-cookie", "org-1"] {
            assert!(!printed.contains(value), "{dialect}: {printed}");
        }
    }
}
