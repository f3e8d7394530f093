//! Providers: where a request goes and how it authenticates.
//!
//! A provider is data (base URL, auth scheme, key variable, extra headers) plus a few
//! named quirks that dialects consult. The built-in list is in the catalogue.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::dialect::Dialect;

/// An API key. Never printed: `Debug` and `Display` show `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
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
        ApiKey::new(s)
    }
}

impl From<String> for ApiKey {
    fn from(s: String) -> Self {
        ApiKey::new(s)
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

/// A provider: where and how to send requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Extra headers on every request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// Dialect adjustments.
    #[serde(default)]
    pub quirks: Quirks,
}

impl Provider {
    /// A generic OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a proxy ...):
    /// the `openai_completions` dialect, `Authorization: Bearer` when `api_key_env`
    /// names a key variable, no auth otherwise. A trailing `/` on `base_url` is dropped.
    ///
    /// ```
    /// use omni_core::{Auth, Provider};
    /// let local = Provider::openai_compatible("llamacpp", "http://localhost:8080/v1/", None);
    /// assert_eq!(local.base_url, "http://localhost:8080/v1");
    /// assert_eq!(local.auth, Auth::None);
    /// ```
    pub fn openai_compatible(id: impl Into<String>, base_url: impl Into<String>, api_key_env: Option<&str>) -> Self {
        let id = id.into();
        let base_url = base_url.into();
        Provider {
            name: id.clone(),
            id,
            base_url: base_url.trim_end_matches('/').to_string(),
            dialect: Dialect::OpenaiCompletions,
            auth: if api_key_env.is_some() { Auth::Bearer } else { Auth::None },
            api_key_env: api_key_env.map(str::to_string),
            headers: Vec::new(),
            quirks: Quirks::default(),
        }
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
            quirks: Quirks::default(),
        };
        let env = |name: &str| (name == "X_KEY").then(|| "env".to_string());
        let call = ApiKey::new("call");
        let conf = ApiKey::new("conf");
        assert_eq!(p.resolve_key(Some(&call), Some(&conf), env).unwrap().expose(), "call");
        assert_eq!(p.resolve_key(None, Some(&conf), env).unwrap().expose(), "conf");
        assert_eq!(p.resolve_key(None, None, env).unwrap().expose(), "env");
        assert!(p.resolve_key(None, None, |_| None).is_none());
    }
}
