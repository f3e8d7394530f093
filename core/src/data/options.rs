//! Request options, validated once at the entry point with clear errors.
//!
//! An option that a dialect cannot honour is not silently dropped: the request builder
//! reports it as a [`Warning`](crate::data::response::Warning) on the response.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::data::secret::{is_secret_name, RedactedHeaders};

/// How the model may use tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool(String),
}

/// Reasoning effort levels, mapped per dialect (budgets on Anthropic and Gemini 2.5,
/// `reasoning.effort` on OpenAI, `thinkingLevel` on Gemini 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    /// Minimal reasoning.
    Low,
    /// The usual default.
    Medium,
    /// More reasoning.
    High,
    /// Beyond high where the provider has such a level.
    Xhigh,
    /// The most the model allows.
    Max,
}

impl Effort {
    /// A token budget for dialects that take budgets: the same numbers everywhere.
    pub fn budget_tokens(self) -> u32 {
        match self {
            Self::Low => 1_024,
            Self::Medium => 4_096,
            Self::High => 16_384,
            Self::Xhigh => 32_768,
            Self::Max => 65_536,
        }
    }
}

/// The `thinking` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reasoning {
    /// No reasoning (where the model allows turning it off).
    Off,
    /// An effort level.
    Effort(Effort),
    /// An explicit budget in tokens.
    Budget(u32),
}

/// How long cached prompt prefixes should live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheRetention {
    /// The provider's short default (about 5 minutes).
    Short,
    /// Long retention (1 hour on Anthropic, 24 hours on OpenAI).
    Long,
}

/// A JSON Schema the reply must follow (structured output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSchema {
    /// A name for the schema (required by OpenAI).
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
}

/// Options for one request. Build with `Options::default()` and the setters. Its `Debug`
/// never shows the value of a secret header.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Options {
    /// Output token limit; dialects that require one use the model's maximum.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, 0.0 ..= 2.0.
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0.0 ..= 1.0.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// How the tools reach the model: native tool calls or a text protocol. `None`: the
    /// model's own (`Model::tool_protocol`), else native.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_protocol: Option<crate::data::tool_protocol::ToolProtocol>,
    /// Reasoning configuration.
    pub thinking: Option<Reasoning>,
    /// Prompt cache retention.
    pub cache: Option<CacheRetention>,
    /// Request metadata (e.g. Anthropic `metadata.user_id`, OpenAI `metadata`).
    pub metadata: BTreeMap<String, String>,
    /// Structured output schema.
    pub output: Option<OutputSchema>,
    /// Total time for one request.
    #[serde(with = "opt_secs")]
    pub timeout: Option<Duration>,
    /// Maximum model requests in a tool loop.
    pub max_steps: Option<u32>,
    /// With a text protocol: how many times a reply whose tool call could not be read
    /// (broken before the tool's name, and no call read) is answered with a correction
    /// showing the layout, so that the model tries again. `None`: once (the text
    /// protocols' default); `Some(0)`: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_retries: Option<u32>,
    /// Time limit for one tool call.
    #[serde(with = "opt_secs")]
    pub tool_timeout: Option<Duration>,
    /// Extra HTTP headers. Those that carry credentials are secrets like the key by their
    /// name ([`crate::data::secret::is_secret_name`]: `authorization`, `x-api-key`, `cookie` ...) or
    /// by being named in `secret_headers` ([`Options::secret_header`] does both).
    pub headers: Vec<(String, String)>,
    /// Names of headers (any case) whose values are secrets besides those the built-in
    /// rule knows: never printed, never logged, cut out of errors.
    pub secret_headers: Vec<String>,
    /// Provider-specific parameters, merged into the request body by the dialect under
    /// their wire names (`top_k`, `seed`, `num_ctx`, `safetySettings` ...): a key the
    /// dialect knows goes where the provider expects it and its type is checked; another
    /// is sent at the top level as given, with a warning. A key for a field omni's own
    /// options set is an error. The README lists the keys each dialect knows.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
    /// `Some(true)`: an unknown or mistyped extra option fails the request
    /// ([`RequestError::InvalidExtraOption`](crate::data::error::RequestError::InvalidExtraOption))
    /// instead of a warning on the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_extra: Option<bool>,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("max_tokens", &self.max_tokens)
            .field("temperature", &self.temperature)
            .field("top_p", &self.top_p)
            .field("stop", &self.stop)
            .field("tool_choice", &self.tool_choice)
            .field("tool_protocol", &self.tool_protocol)
            .field("thinking", &self.thinking)
            .field("cache", &self.cache)
            .field("metadata", &self.metadata)
            .field("output", &self.output)
            .field("timeout", &self.timeout)
            .field("max_steps", &self.max_steps)
            .field("tool_call_retries", &self.tool_call_retries)
            .field("tool_timeout", &self.tool_timeout)
            .field("headers", &RedactedHeaders { headers: &self.headers, marked: &self.secret_headers })
            .field("secret_headers", &self.secret_headers)
            .field("extra", &ExtraKeys(&self.extra))
            .field("strict_extra", &self.strict_extra)
            .finish()
    }
}

/// The extra options' keys, without their values: `Debug` stays short.
struct ExtraKeys<'a>(&'a BTreeMap<String, Value>);

impl fmt::Debug for ExtraKeys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// What is wrong with an [`Options`] value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionsError {
    /// A number outside its allowed range.
    OutOfRange {
        /// Option name.
        option: &'static str,
        /// Allowed range, human-readable.
        allowed: &'static str,
        /// The value given.
        value: String,
    },
    /// A value that cannot be used.
    Invalid {
        /// Option name.
        option: &'static str,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfRange { option, allowed, value } => {
                write!(f, "option `{option}` must be {allowed}, got {value}")
            }
            Self::Invalid { option, reason } => write!(f, "option `{option}` is invalid: {reason}"),
        }
    }
}

impl std::error::Error for OptionsError {}

impl Options {
    /// The options of a step that follows tool calls of the same call (or agent turn), if
    /// they differ: a tool choice that forces a call (`required`, a named tool) holds only
    /// until the model has called a tool. Forcing it again would make every step call a
    /// tool until `max_steps`, and the model could never answer the results; later steps
    /// leave the choice to the provider's default, as the OpenAI Agents SDK does
    /// (`reset_tool_choice`).
    pub fn after_tool_calls(&self) -> Option<Self> {
        matches!(self.tool_choice, Some(ToolChoice::Required | ToolChoice::Tool(_)))
            .then(|| Self { tool_choice: None, ..self.clone() })
    }

    /// Checks ranges and consistency. Called once where options enter the library.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let range = |option: &'static str, allowed: &'static str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(OptionsError::OutOfRange { option, allowed, value: v.to_string() })
            }
        };
        if let Some(t) = self.temperature {
            range("temperature", "between 0 and 2", t, 0.0, 2.0)?;
        }
        if let Some(p) = self.top_p {
            range("top_p", "between 0 and 1", p, 0.0, 1.0)?;
        }
        if self.max_tokens == Some(0) {
            return Err(OptionsError::OutOfRange { option: "max_tokens", allowed: "at least 1", value: "0".into() });
        }
        if self.max_steps == Some(0) {
            return Err(OptionsError::OutOfRange { option: "max_steps", allowed: "at least 1", value: "0".into() });
        }
        if let Some(Reasoning::Budget(b)) = self.thinking {
            if b < 1_024 {
                return Err(OptionsError::OutOfRange {
                    option: "thinking",
                    allowed: "a budget of at least 1024 tokens",
                    value: b.to_string(),
                });
            }
        }
        if self.stop.iter().any(String::is_empty) {
            return Err(OptionsError::Invalid { option: "stop", reason: "a stop sequence is empty".into() });
        }
        if let Some(ToolChoice::Tool(name)) = &self.tool_choice {
            if name.is_empty() {
                return Err(OptionsError::Invalid { option: "tool_choice", reason: "the tool name is empty".into() });
            }
        }
        for (option, d) in [("timeout", self.timeout), ("tool_timeout", self.tool_timeout)] {
            if d == Some(Duration::ZERO) {
                return Err(OptionsError::OutOfRange { option, allowed: "longer than zero", value: "0s".into() });
            }
        }
        if let Some(out) = &self.output {
            if !out.schema.is_object() && !out.schema.is_boolean() {
                return Err(OptionsError::Invalid {
                    option: "output",
                    reason: "the schema must be a JSON object".into(),
                });
            }
        }
        if self.extra.keys().any(String::is_empty) {
            return Err(OptionsError::Invalid { option: "extra", reason: "a key is empty".into() });
        }
        for (name, _) in &self.headers {
            let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':');
            if !valid {
                return Err(OptionsError::Invalid { option: "headers", reason: format!("bad header name {name:?}") });
            }
        }
        Ok(())
    }

    /// These options over `defaults`: a value set here wins; lists and maps set here
    /// replace the defaults' (metadata, headers and extra options are merged key by key,
    /// these winning).
    pub fn merged_over(self, defaults: &Self) -> Self {
        let mut metadata = defaults.metadata.clone();
        metadata.extend(self.metadata);
        let mut extra = defaults.extra.clone();
        extra.extend(self.extra);
        let mut headers = defaults.headers.clone();
        headers.retain(|(name, _)| !self.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
        headers.extend(self.headers);
        let mut secret_headers = defaults.secret_headers.clone();
        secret_headers.extend(self.secret_headers);
        Self {
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            temperature: self.temperature.or(defaults.temperature),
            top_p: self.top_p.or(defaults.top_p),
            stop: if self.stop.is_empty() { defaults.stop.clone() } else { self.stop },
            tool_choice: self.tool_choice.or_else(|| defaults.tool_choice.clone()),
            tool_protocol: self.tool_protocol.or_else(|| defaults.tool_protocol.clone()),
            thinking: self.thinking.or(defaults.thinking),
            cache: self.cache.or(defaults.cache),
            metadata,
            output: self.output.or_else(|| defaults.output.clone()),
            timeout: self.timeout.or(defaults.timeout),
            max_steps: self.max_steps.or(defaults.max_steps),
            tool_call_retries: self.tool_call_retries.or(defaults.tool_call_retries),
            tool_timeout: self.tool_timeout.or(defaults.tool_timeout),
            headers,
            secret_headers,
            extra,
            strict_extra: self.strict_extra.or(defaults.strict_extra),
        }
    }

    /// True when header `name` of these options carries a credential.
    pub fn is_secret_header(&self, name: &str) -> bool {
        is_secret_name(name) || self.secret_headers.iter().any(|s| s.eq_ignore_ascii_case(name))
    }

    /// Adds an extra HTTP header (a credential by its name is kept secret all the same).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds an extra HTTP header whose value is a secret, whatever its name: never
    /// printed, never logged, cut out of errors, and never sent to another origin.
    ///
    /// ```
    /// use omni_protocol::Options;
    /// let options = Options::default().secret_header("x-tenant-token", "t-0123456789");
    /// assert!(!format!("{options:?}").contains("0123456789"));
    /// ```
    pub fn secret_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.secret_headers.push(name.clone());
        self.headers.push((name, value.into()));
        self
    }

    /// Sets `max_tokens`.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Sets `temperature`.
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = Some(t);
        self
    }

    /// Sets `thinking`.
    pub fn thinking(mut self, r: Reasoning) -> Self {
        self.thinking = Some(r);
        self
    }

    /// Sets `tool_choice`.
    pub fn tool_choice(mut self, c: ToolChoice) -> Self {
        self.tool_choice = Some(c);
        self
    }

    /// Sets the provider-specific parameter `key` (its wire name) to `value`, replacing an
    /// earlier value for the same key.
    ///
    /// ```
    /// use omni_protocol::Options;
    /// use serde_json::json;
    /// let options = Options::default().extra("top_k", json!(40)).extra("service_tier", json!("auto"));
    /// assert_eq!(options.extra["top_k"], 40);
    /// ```
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// Sets `strict_extra`: `true` makes an unknown or mistyped extra option an error
    /// rather than a warning.
    pub fn strict_extra(mut self, strict: bool) -> Self {
        self.strict_extra = Some(strict);
        self
    }

    /// Sets `tool_protocol`: native tool calls, or a text protocol for a model without
    /// them (`ToolProtocol::Xml`, `ToolProtocol::Json`, `ToolProtocol::Hermes`, or one of the application's).
    pub fn tool_protocol(mut self, protocol: crate::data::tool_protocol::ToolProtocol) -> Self {
        self.tool_protocol = Some(protocol);
        self
    }
}

mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let v = Option::<f64>::deserialize(d)?;
        v.map(|s| Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_out_of_range_values_with_clear_messages() {
        let err = Options::default().temperature(3.0).validate().unwrap_err();
        assert_eq!(err.to_string(), "option `temperature` must be between 0 and 2, got 3");
        assert!(Options::default().max_tokens(0).validate().is_err());
        assert!(Options::default().thinking(Reasoning::Budget(10)).validate().is_err());
        assert!(Options::default().temperature(f64::NAN).validate().is_err());
        assert!(Options::default().temperature(0.7).max_tokens(10).validate().is_ok());
    }

    #[test]
    fn debug_never_shows_a_secret_header() {
        let defaults = Options::default().secret_header("x-custom", "custom-secret-1");
        let options = Options::default()
            .header("Authorization", "Bearer sk-opt-123")
            .header("x-api-key", "sk-opt-456")
            .header("x-trace", "visible")
            .merged_over(&defaults);
        let printed = format!("{options:?} {options:#?}");
        for secret in ["sk-opt-123", "sk-opt-456", "custom-secret-1"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(printed.contains("visible"));
        assert!(options.is_secret_header("X-Custom"), "a mark in the defaults holds after merging");
    }

    #[test]
    fn extra_options_merge_key_by_key_and_round_trip() {
        use serde_json::json;
        let defaults = Options::default().extra("seed", json!(1)).extra("top_k", json!(40)).strict_extra(true);
        let call = Options::default().extra("seed", json!(2)).extra("min_p", json!(0.05));
        let merged = call.merged_over(&defaults);
        let expected = [("min_p", json!(0.05)), ("seed", json!(2)), ("top_k", json!(40))];
        assert_eq!(merged.extra, expected.map(|(k, v)| (k.to_string(), v)).into_iter().collect());
        assert_eq!(merged.strict_extra, Some(true));
        assert_eq!(Options::default().strict_extra(false).merged_over(&defaults).strict_extra, Some(false));

        let text = serde_json::to_string(&merged).unwrap();
        assert!(text.contains(r#""extra":{"min_p":0.05,"seed":2,"top_k":40}"#), "{text}");
        assert_eq!(serde_json::from_str::<Options>(&text).unwrap(), merged);
        // Absent when unused, so stored options keep their old form.
        let plain = serde_json::to_string(&Options::default()).unwrap();
        assert!(!plain.contains("extra"), "{plain}");
        assert_eq!(serde_json::from_str::<Options>("{}").unwrap(), Options::default());
    }

    #[test]
    fn debug_shows_extra_keys_not_values_and_an_empty_key_is_invalid() {
        let options = Options::default().extra("user", serde_json::json!("customer-4711"));
        let printed = format!("{options:?}");
        assert!(printed.contains(r#"extra: {"user"}"#) && !printed.contains("customer-4711"), "{printed}");
        let err = Options::default().extra("", 1).validate().unwrap_err();
        assert_eq!(err.to_string(), "option `extra` is invalid: a key is empty");
    }
}
