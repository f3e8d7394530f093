//! Where [`Dialect::build_request`] applies a provider's hooks ([`crate::data::hooks`]) and
//! an [`Auth::Query`] key: the body hook on the dialect's body, then the URL hook on the
//! provider's URL of the dialect's path, then the key in the query.

use crate::data::error::RequestError;
use crate::data::hooks::{add_query, HookContext};
use crate::data::provider::{ApiKey, Auth};
use crate::wire::dialect::{Dialect, DialectRequest, RequestSpec};
use crate::wire::query::is_secret_query_name;

fn context<'a>(spec: &RequestSpec<'a>, dialect: Dialect) -> HookContext<'a> {
    HookContext::new(&spec.model.id, dialect, spec.options)
}

/// `part` with the provider's body hook applied to its body (a JSON object; every
/// dialect builds one).
pub(super) fn apply_body(part: DialectRequest, spec: &RequestSpec<'_>, dialect: Dialect) -> DialectRequest {
    let Some(hook) = &spec.provider.hooks.body else { return part };
    let mut part = part;
    if let serde_json::Value::Object(body) = &mut part.body {
        hook.get()(body, &context(spec, dialect));
    }
    part
}

/// The request's URL: the provider's URL of `path`, through the URL hook, then with an
/// [`Auth::Query`] key (whose parameter name must be one omni redacts).
pub(super) fn url(
    spec: &RequestSpec<'_>,
    dialect: Dialect,
    path: &str,
    key: Option<&ApiKey>,
) -> Result<String, RequestError> {
    let mut url = spec.provider.url(path);
    if let Some(hook) = &spec.provider.hooks.url {
        hook.get()(&mut url, &context(spec, dialect));
    }
    if let (Auth::Query { name }, Some(key)) = (&spec.provider.auth, key) {
        let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        if !plain || !is_secret_query_name(name) {
            return Err(RequestError::Unsupported {
                message: format!(
                    "the key's query parameter {:?} is not a name omni redacts from URLs (key, api-key, token, \
                     sig, code ...: omni_protocol::transport::is_secret_query_name)",
                    name.escape_debug().to_string()
                ),
            });
        }
        // A fragment is never sent: the key goes at the end of the query.
        let without_fragment = url.split('#').next().unwrap_or_default().len();
        url.truncate(without_fragment);
        add_query(&mut url, name, key.expose());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::data::message::Context;
    use crate::data::model::Model;
    use crate::data::options::Options;
    use crate::data::provider::Provider;
    use crate::wire::decoder::StreamDecoder;
    use crate::wire::http::HttpRequest;
    use crate::wire::secret::Secrets;

    const KEY: &str = "sk-hook-key/0123+456789";

    fn build(provider: &Provider, model: &str, options: &Options) -> Result<HttpRequest, RequestError> {
        let model = Model::new(provider.id.clone(), model, provider.dialect);
        let context = Context::from_prompt("hi");
        let key = ApiKey::new(KEY);
        let spec = RequestSpec { model: &model, provider, context: &context, options, api_key: Some(&key) };
        provider.dialect.build_request(&spec).map(|built| built.request)
    }

    fn body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).expect("JSON")
    }

    /// Azure OpenAI: the deployment in the path, `api-version` in the query, the key in
    /// `api-key`, no `model` in the body.
    fn azure(base_url: &str) -> Provider {
        Provider {
            auth: Auth::Header { name: "api-key".into() },
            ..Provider::openai_compatible("azure", base_url, Some("AZURE_OPENAI_API_KEY"))
        }
        .url_hook(|url, cx| {
            let path = format!("/openai/deployments/{}/chat/completions", cx.model);
            *url = url.replacen("/chat/completions", &path, 1);
            crate::data::hooks::add_query(url, "api-version", "2024-10-21");
        })
        .body_hook(|body, _| {
            body.remove("model");
        })
    }

    #[test]
    fn an_azure_style_provider_moves_the_model_to_the_path() {
        let request = build(&azure("https://r.openai.azure.com"), "gpt-4o-prod", &Options::default()).unwrap();
        assert_eq!(
            request.url,
            "https://r.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(request.header("api-key"), Some(KEY));
        assert!(request.headers.iter().all(|h| h.name != "authorization"));
        assert!(request.headers.iter().any(|h| h.name == "api-key" && h.sensitive));
        let body = body(&request);
        assert!(body.get("model").is_none() && body["stream"] == json!(true), "{body}");
    }

    #[test]
    fn an_openrouter_style_provider_adds_routing_and_headers() {
        let provider = Provider::openai_compatible("openrouter", "https://openrouter.ai/api/v1", Some("OR_KEY"))
            .header("HTTP-Referer", "https://app.example")
            .header("X-Title", "My app")
            .body_hook(|body, cx| {
                body.insert("provider".into(), json!({"order": ["anthropic", "openai"], "allow_fallbacks": false}));
                // The context: the model, the dialect and the options, read-only.
                body.insert("seen".into(), json!([cx.model, cx.dialect.name(), cx.options.temperature]));
            });
        let options = Options { temperature: Some(0.5), ..Options::default() };
        let request = build(&provider, "anthropic/claude-sonnet-4.5", &options).unwrap();
        assert_eq!(request.url, "https://openrouter.ai/api/v1/chat/completions");
        assert_eq!(request.header("http-referer"), Some("https://app.example"));
        assert_eq!(request.header("x-title"), Some("My app"));
        assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
        let body = body(&request);
        assert_eq!(body["provider"], json!({"order": ["anthropic", "openai"], "allow_fallbacks": false}));
        assert_eq!(body["seen"], json!(["anthropic/claude-sonnet-4.5", "openai_completions", 0.5]));
        assert_eq!(body["model"], json!("anthropic/claude-sonnet-4.5"), "the dialect's fields stay");
    }

    #[test]
    fn a_query_key_is_added_last_encoded_and_never_shown() {
        let provider = Provider {
            auth: Auth::Query { name: "key".into() },
            ..Provider::openai_compatible("g", "https://g.example/v1beta?x=1", Some("G_KEY"))
        }
        .url_hook(|url, _| {
            assert!(!url.contains("0123"), "a hook never sees the key");
            url.push_str("#fragment");
        });
        let request = build(&provider, "m", &Options::default()).unwrap();
        assert_eq!(request.url, "https://g.example/v1beta/chat/completions?x=1&key=sk-hook-key%2F0123%2B456789");
        assert!(request.headers.iter().all(|h| !h.value.contains("0123")), "not in a header");
        let printed = format!("{request:?} {request:#?}");
        assert!(!printed.contains("0123") && printed.contains("key=<redacted>"), "{printed}");
        // A transport error that quotes the URL (reqwest's do), or a server's echo of the
        // decoded key: both cut.
        let secrets = Secrets::of_request(&request);
        let mut text = format!("error sending request for url ({}): {KEY}", request.url);
        secrets.scrub(&mut text);
        assert!(!text.contains("0123"), "{text}");
    }

    #[test]
    fn a_query_key_under_a_name_omni_does_not_redact_is_refused() {
        for name in ["user", "", "a b", "x&key"] {
            let provider = Provider {
                auth: Auth::Query { name: name.into() },
                ..Provider::openai_compatible("g", "https://g.example/v1", Some("G_KEY"))
            };
            let error = build(&provider, "m", &Options::default()).unwrap_err();
            assert!(matches!(error, RequestError::Unsupported { .. }), "{name}: {error:?}");
            assert!(!format!("{error} {error:?}").contains("0123"), "{name}");
        }
    }

    #[test]
    fn no_hook_changes_nothing() {
        let plain = Provider::openai_compatible("p", "https://h/v1", Some("K"));
        let hooked = plain.clone().body_hook(|_, _| {}).url_hook(|_, _| {});
        let options = Options::default();
        assert_eq!(build(&plain, "m", &options).unwrap(), build(&hooked, "m", &options).unwrap());
        assert_ne!(plain, hooked);
        assert_eq!(hooked.clone(), hooked, "clones share their hooks");
    }

    #[test]
    fn an_event_hook_rewrites_each_event_before_the_dialect_reads_it() {
        // A gateway that calls the delta's text `text` where Chat Completions says `content`.
        let provider = Provider::openai_compatible("gw", "http://gw/v1", None).event_hook(|_, data| {
            for choice in data["choices"].as_array_mut().into_iter().flatten() {
                if let Some(text) = choice["delta"].as_object_mut().and_then(|d| d.remove("text")) {
                    choice["delta"]["content"] = text;
                }
            }
        });
        let body = concat!(
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"text\":\"Hel\"}}]}\n\n",
            ": keep-alive\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"text\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let decode = |hook| {
            let mut decoder = StreamDecoder::new(Dialect::OpenaiCompletions, "m").with_event_hook(hook);
            let mut events = Vec::new();
            decoder.feed(body.as_bytes(), &mut events);
            decoder.finish(&mut events);
            decoder.into_response()
        };
        assert_eq!(decode(provider.hooks.event.clone()).text(), "Hello");
        assert_eq!(decode(None).text(), "", "without the hook the dialect finds no text");
        // A payload that is not JSON reaches the dialect as it came: its error, unchanged.
        let bad = "data: {not json\n\n";
        let mut events = Vec::new();
        let mut hooked = StreamDecoder::new(Dialect::OpenaiCompletions, "m").with_event_hook(provider.hooks.event);
        hooked.feed(bad.as_bytes(), &mut events);
        let mut plain_events = Vec::new();
        StreamDecoder::new(Dialect::OpenaiCompletions, "m").feed(bad.as_bytes(), &mut plain_events);
        assert_eq!(format!("{events:?}"), format!("{plain_events:?}"));
    }
}
