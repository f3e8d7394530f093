//! Providers: where a request goes and how it authenticates.
//!
//! A provider is data (base URL, auth scheme, key variable, extra headers) plus a few
//! named quirks that dialects consult. The built-in list is in the catalogue.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::data::dialect::Dialect;
use crate::data::hooks::{HookContext, ProviderHooks};
use crate::data::secret::{is_secret_name, RedactedHeaders};

/// An API key. Never printed: `Debug` and `Display` show `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The secret itself, for building the auth header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for ApiKey {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for ApiKey {
    fn from(s: String) -> Self {
        Self::new(s)
    }
}

/// How the key is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Auth {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// A named header carrying the raw key, e.g. `x-api-key`.
    Header {
        /// Header name.
        name: String,
    },
    /// The key as a query parameter, `?name=<key>` (percent-encoded), added after the URL
    /// hook. The name must be one whose value omni redacts wherever a URL is shown
    /// ([`crate::data::secret::is_secret_query_name`]: `key`, `api-key`, `token`, `sig`,
    /// `code` ...): any other is refused when the request is built. Prefer a header where
    /// the provider takes one: a URL goes to more places than a header does.
    Query {
        /// Parameter name, e.g. `key`.
        name: String,
    },
    /// No key (local servers).
    None,
}

/// Small per-provider adjustments that dialects consult.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Quirks {
    /// Field carrying reasoning text on OpenAI-compatible chat deltas and messages
    /// (`reasoning_content` for DeepSeek, Moonshot, Z.ai, Alibaba; `reasoning` for
    /// OpenRouter and others). Sent back on assistant messages when set.
    pub reasoning_field: Option<String>,
    /// The provider rejects `stream_options` (some OpenAI-compatible servers do).
    pub no_stream_options: bool,
    /// Use `max_tokens` instead of `max_completion_tokens` on chat completions.
    pub legacy_max_tokens: bool,
    /// Structured output goes as `{"type": "json_object", "schema": ..}` (llama-cpp-python,
    /// whose server refuses OpenAI's `json_schema` type) rather than OpenAI's form.
    pub json_object_schema: bool,
}

/// A provider: where and how to send requests. Its `Debug` never shows the value of a
/// secret header ([`crate::data::secret::is_secret_name`], or named in `secret_headers`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Provider {
    /// Id used in model names, e.g. `anthropic` in `anthropic:claude-sonnet-4-5`.
    pub id: String,
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// Base URL without a trailing slash, e.g. `https://api.anthropic.com/v1`.
    pub base_url: String,
    /// Default dialect of the provider's models.
    pub dialect: Dialect,
    /// How the key is sent.
    pub auth: Auth,
    /// Environment variable holding the key (read by drivers, never by the core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra headers on every request. Those that carry credentials are secrets like the
    /// key by their name ([`crate::data::secret::is_secret_name`]: `authorization`, `x-api-key`,
    /// `cookie` ...) or by being named in `secret_headers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// Names of headers (any case) whose values are secrets besides those the built-in
    /// rule knows: never printed, never logged, cut out of errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_headers: Vec<String>,
    /// Dialect adjustments.
    #[serde(default)]
    pub quirks: Quirks,
    /// Functions that adjust the built body, the URL and each decoded event
    /// ([`ProviderHooks`](crate::data::hooks::ProviderHooks)). Not serialized; compared by identity.
    #[serde(skip)]
    pub hooks: ProviderHooks,
    /// The text tool-call protocol every model of this provider needs (a gateway without
    /// native tool calling), unless the model names its own; the `tool_protocol` option's
    /// default after the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_protocol: Option<crate::data::tool_protocol::ToolProtocol>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("dialect", &self.dialect)
            .field("auth", &self.auth)
            .field("api_key_env", &self.api_key_env)
            .field("headers", &RedactedHeaders { headers: &self.headers, marked: &self.secret_headers })
            .field("secret_headers", &self.secret_headers)
            .field("quirks", &self.quirks)
            .field("tool_protocol", &self.tool_protocol)
            .field("hooks", &self.hooks)
            .finish()
    }
}

impl Provider {
    /// A generic OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a proxy ...):
    /// the `openai_completions` dialect, `Authorization: Bearer` when `api_key_env`
    /// names a key variable, no auth otherwise. A trailing `/` on `base_url` is dropped.
    ///
    /// ```
    /// use omni_protocol::{Auth, Provider};
    /// let local = Provider::openai_compatible("llamacpp", "http://localhost:8080/v1/", None);
    /// assert_eq!(local.base_url, "http://localhost:8080/v1");
    /// assert_eq!(local.auth, Auth::None);
    /// ```
    pub fn openai_compatible(id: impl Into<String>, base_url: impl Into<String>, api_key_env: Option<&str>) -> Self {
        let id = id.into();
        let base_url = base_url.into();
        Self {
            name: id.clone(),
            id,
            base_url: base_url.trim_end_matches('/').to_string(),
            dialect: Dialect::OpenaiCompletions,
            auth: if api_key_env.is_some() { Auth::Bearer } else { Auth::None },
            api_key_env: api_key_env.map(str::to_string),
            headers: Vec::new(),
            secret_headers: Vec::new(),
            quirks: Quirks::default(),
            hooks: ProviderHooks::default(),
            tool_protocol: None,
        }
    }

    /// This provider with an extra header on every request (secret by its name, or when
    /// named in `secret_headers`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// This provider with `f` applied to every body a dialect builds, after any body hook
    /// already set ([`ProviderHooks`](crate::data::hooks::ProviderHooks)).
    ///
    /// ```
    /// use omni_protocol::Provider;
    /// let p = Provider::openai_compatible("router", "https://router.example/v1", Some("ROUTER_KEY"))
    ///     .body_hook(|body, _| {
    ///         body.insert("provider".into(), serde_json::json!({"order": ["a", "b"]}));
    ///     });
    /// assert!(p.hooks.body.is_some());
    /// ```
    pub fn body_hook(
        mut self,
        f: impl Fn(&mut serde_json::Map<String, serde_json::Value>, &HookContext<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.add_body(f);
        self
    }

    /// This provider with `f` applied to every request's URL, after any URL hook already
    /// set and before an [`Auth::Query`] key ([`ProviderHooks`](crate::data::hooks::ProviderHooks)).
    pub fn url_hook(mut self, f: impl Fn(&mut String, &HookContext<'_>) + Send + Sync + 'static) -> Self {
        self.hooks.add_url(f);
        self
    }

    /// This provider with `f` applied to each decoded JSON event (its SSE type, `""` when
    /// none, and its payload) before the dialect parses it, after any event hook already
    /// set ([`ProviderHooks`](crate::data::hooks::ProviderHooks)).
    pub fn event_hook(mut self, f: impl Fn(&str, &mut serde_json::Value) + Send + Sync + 'static) -> Self {
        self.hooks.add_event(f);
        self
    }

    /// True when this provider's header `name` carries a credential.
    pub fn is_secret_header(&self, name: &str) -> bool {
        is_secret_name(name) || self.secret_headers.iter().any(|s| s.eq_ignore_ascii_case(name))
    }

    /// The URL of `path` (which may carry its own query, e.g. `?alt=sse`) under the base
    /// URL. The path goes after the base URL's path and before its query, and both
    /// queries are kept (the path's first): a base URL such as Azure OpenAI's
    /// `https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21` gives
    /// `…/d/chat/completions?api-version=2024-10-21`. A fragment on the base URL (never
    /// sent by HTTP) is dropped.
    ///
    /// ```
    /// use omni_protocol::Provider;
    /// let p = Provider::openai_compatible("azure", "https://r.example/openai/deployments/d?api-version=1", None);
    /// assert_eq!(p.url("/chat/completions"), "https://r.example/openai/deployments/d/chat/completions?api-version=1");
    /// assert_eq!(p.url("/m:stream?alt=sse"), "https://r.example/openai/deployments/d/m:stream?alt=sse&api-version=1");
    /// ```
    pub fn url(&self, path: &str) -> String {
        let base = self.base_url.split('#').next().unwrap_or_default();
        let (base_path, base_query) = match base.split_once('?') {
            Some((p, q)) => (p, Some(q).filter(|q| !q.is_empty())),
            None => (base, None),
        };
        let (path, path_query) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q).filter(|q| !q.is_empty())),
            None => (path, None),
        };
        let mut url = format!("{}{}", base_path.trim_end_matches('/'), path);
        let queries: Vec<&str> = path_query.into_iter().chain(base_query).collect();
        if !queries.is_empty() {
            url.push('?');
            url.push_str(&queries.join("&"));
        }
        url
    }

    /// True when requests need a key.
    pub fn needs_key(&self) -> bool {
        self.auth != Auth::None
    }

    /// Resolves the key: call site first, then client configuration, then the
    /// environment variable read through `env` (drivers pass `std::env::var`).
    pub fn resolve_key(
        &self,
        call_site: Option<&ApiKey>,
        config: Option<&ApiKey>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Option<ApiKey> {
        call_site
            .or(config)
            .cloned()
            .or_else(|| self.api_key_env.as_deref().and_then(env).filter(|k| !k.is_empty()).map(ApiKey::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_never_prints() {
        let key = ApiKey::new("sk-secret-123");
        assert!(!format!("{key:?}").contains("secret"));
        assert!(!format!("{key}").contains("secret"));
    }

    #[test]
    fn key_resolution_order() {
        let p = Provider {
            id: "x".into(),
            name: String::new(),
            base_url: "http://x".into(),
            dialect: Dialect::OpenaiCompletions,
            auth: Auth::Bearer,
            api_key_env: Some("X_KEY".into()),
            headers: vec![],
            secret_headers: Vec::new(),
            quirks: Quirks::default(),
            hooks: ProviderHooks::default(),
            tool_protocol: None,
        };
        let env = |name: &str| (name == "X_KEY").then(|| "env".to_string());
        let call = ApiKey::new("call");
        let conf = ApiKey::new("conf");
        assert_eq!(p.resolve_key(Some(&call), Some(&conf), env).unwrap().expose(), "call");
        assert_eq!(p.resolve_key(None, Some(&conf), env).unwrap().expose(), "conf");
        assert_eq!(p.resolve_key(None, None, env).unwrap().expose(), "env");
        assert!(p.resolve_key(None, None, |_| None).is_none());
    }

    #[test]
    fn debug_never_shows_a_secret_header() {
        let mut p = Provider::openai_compatible("x", "http://x/v1", Some("X_KEY"));
        p.headers = vec![
            ("Authorization".into(), "Bearer sk-provider-1".into()),
            ("cookie".into(), "sid=provider-cookie".into()),
            ("x-tenant".into(), "tenant-secret".into()),
            ("x-trace".into(), "visible".into()),
        ];
        p.secret_headers = vec!["X-Tenant".into()];
        let printed = format!("{p:?} {p:#?}");
        for secret in ["sk-provider-1", "provider-cookie", "tenant-secret"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(printed.contains("visible"));
        assert!(p.is_secret_header("x-tenant") && p.is_secret_header("cookie") && !p.is_secret_header("x-trace"));
    }

    #[test]
    fn urls_keep_the_base_query_after_the_path() {
        let p = |base: &str| Provider::openai_compatible("x", base, None);
        assert_eq!(p("http://h/v1").url("/chat/completions"), "http://h/v1/chat/completions");
        assert_eq!(p("http://h/v1/").url("/responses"), "http://h/v1/responses");
        assert_eq!(p("http://h/v1?a=1").url("/responses"), "http://h/v1/responses?a=1");
        assert_eq!(p("http://h/v1/?a=1&b=2").url("/x?alt=sse"), "http://h/v1/x?alt=sse&a=1&b=2");
        assert_eq!(p("http://h/v1?").url("/x"), "http://h/v1/x");
        assert_eq!(p("http://h/v1#frag").url("/x"), "http://h/v1/x");
    }
}
