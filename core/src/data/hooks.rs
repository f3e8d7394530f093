//! Provider hooks: pure functions stored with a [`Provider`](crate::data::provider::Provider) that adjust
//! what a dialect builds and reads, for the providers whose differences are not worth a
//! dialect of their own (Azure's deployment path and `api-version`, OpenRouter's routing
//! preferences, a gateway that renames a field).
//!
//! ```text
//!  dialect builds the body ─► body hook ─► serialized
//!  provider.url(path)      ─► URL hook  ─► the key added (Auth::Query) ─► HttpRequest
//!  a frame's JSON payload  ─► event hook ─► the dialect parses it
//! ```
//!
//! A hook sees no key: the body and URL hooks run before the key is added, the event hook
//! sees only the response. Hooks are not serialized (a provider read from a catalogue file
//! has none) and are compared by identity: two providers are equal only when they share
//! each hook (a clone does), so a provider whose hooks were replaced never passes for the
//! one it replaced, even when the new closures happen to do the same.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::data::dialect::Dialect;
use crate::data::options::Options;

/// What a body or URL hook knows of the request being built.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct HookContext<'a> {
    /// The model's id (as the provider knows it: `gpt-4o`, an Azure deployment name).
    pub model: &'a str,
    /// The dialect building the request.
    pub dialect: Dialect,
    /// The call's options (validated).
    pub options: &'a Options,
}

impl<'a> HookContext<'a> {
    /// A context, for calling a hook outside a request (tests, tools).
    pub fn new(model: &'a str, dialect: Dialect, options: &'a Options) -> Self {
        Self { model, dialect, options }
    }
}

/// The signature of a body hook.
pub type BodyFn = dyn Fn(&mut Map<String, Value>, &HookContext<'_>) + Send + Sync;
/// The signature of a URL hook.
pub type UrlFn = dyn Fn(&mut String, &HookContext<'_>) + Send + Sync;
/// The signature of an event hook: the SSE event's type (`""` when it has none, and for
/// NDJSON) and its JSON payload.
pub type EventFn = dyn Fn(&str, &mut Value) + Send + Sync;

macro_rules! hook_type {
    ($(#[$doc:meta])* $name:ident, $f:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(Arc<$f>);

        impl $name {
            /// Wraps a function.
            pub fn new(f: Arc<$f>) -> Self {
                Self(f)
            }

            /// The function.
            pub fn get(&self) -> &$f {
                &*self.0
            }
        }

        /// Shows that the hook is there, never what it captured.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(stringify!($name))
            }
        }

        /// By identity: equal when both hold the same function (clones of one hook).
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                Arc::ptr_eq(&self.0, &other.0)
            }
        }
    };
}

hook_type!(
    /// Adjusts the JSON body a dialect built (add, rewrite or remove fields).
    BodyHook,
    BodyFn
);
hook_type!(
    /// Adjusts the request's URL (a path segment, a query parameter) before the key is added.
    UrlHook,
    UrlFn
);
hook_type!(
    /// Adjusts each decoded JSON event of a response before the dialect reads it.
    EventHook,
    EventFn
);

/// A provider's hooks; none by default. Set them with [`Provider::body_hook`],
/// [`Provider::url_hook`] and [`Provider::event_hook`](crate::data::provider::Provider::event_hook).
///
/// [`Provider::body_hook`]: crate::data::provider::Provider::body_hook
/// [`Provider::url_hook`]: crate::data::provider::Provider::url_hook
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderHooks {
    /// Applied to the built body, before it is serialized.
    pub body: Option<BodyHook>,
    /// Applied to the URL (base URL and dialect path), before an [`Auth::Query`](crate::data::provider::Auth::Query) key.
    pub url: Option<UrlHook>,
    /// Applied to each event's JSON payload before the dialect parses it.
    pub event: Option<EventHook>,
}

impl ProviderHooks {
    /// True when no hook is set.
    pub fn is_empty(&self) -> bool {
        self.body.is_none() && self.url.is_none() && self.event.is_none()
    }

    /// Adds a body hook, after the one already set (if any).
    pub fn add_body(&mut self, f: impl Fn(&mut Map<String, Value>, &HookContext<'_>) + Send + Sync + 'static) {
        self.body = Some(BodyHook(match self.body.take() {
            None => Arc::new(f),
            Some(first) => Arc::new(move |body: &mut Map<String, Value>, cx: &HookContext<'_>| {
                first.get()(body, cx);
                f(body, cx);
            }),
        }));
    }

    /// Adds a URL hook, after the one already set (if any).
    pub fn add_url(&mut self, f: impl Fn(&mut String, &HookContext<'_>) + Send + Sync + 'static) {
        self.url = Some(UrlHook(match self.url.take() {
            None => Arc::new(f),
            Some(first) => Arc::new(move |url: &mut String, cx: &HookContext<'_>| {
                first.get()(url, cx);
                f(url, cx);
            }),
        }));
    }

    /// Adds an event hook, after the one already set (if any).
    pub fn add_event(&mut self, f: impl Fn(&str, &mut Value) + Send + Sync + 'static) {
        self.event = Some(EventHook(match self.event.take() {
            None => Arc::new(f),
            Some(first) => Arc::new(move |event: &str, data: &mut Value| {
                first.get()(event, data);
                f(event, data);
            }),
        }));
    }
}

/// Appends `name=value` to `url`'s query (starting one if there is none), the value
/// percent-encoded (every byte but `A-Z a-z 0-9 - . _ ~`). For URL hooks:
///
/// ```
/// let mut url = "https://r.example/openai/chat/completions".to_string();
/// omni_protocol::hooks::add_query(&mut url, "api-version", "2024-10-21");
/// assert_eq!(url, "https://r.example/openai/chat/completions?api-version=2024-10-21");
/// omni_protocol::hooks::add_query(&mut url, "q", "a b&c");
/// assert!(url.ends_with("&q=a%20b%26c"));
/// ```
pub fn add_query(url: &mut String, name: &str, value: &str) {
    url.push(if url.contains('?') { '&' } else { '?' });
    url.push_str(name);
    url.push('=');
    url.push_str(&percent_encode(value));
}

/// `value` with every byte but the unreserved ones (RFC 3986) percent-encoded.
pub(crate) fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_chain_in_order_and_compare_by_identity() {
        let mut hooks = ProviderHooks::default();
        assert!(hooks.is_empty());
        hooks.add_body(|body, _| {
            body.insert("a".into(), 1.into());
        });
        hooks.add_body(|body, _| {
            let a = body.get("a").cloned().unwrap_or_default();
            body.insert("b".into(), a);
        });
        let options = Options::default();
        let cx = HookContext::new("m", Dialect::OpenaiCompletions, &options);
        let mut body = Map::new();
        hooks.body.as_ref().unwrap().get()(&mut body, &cx);
        assert_eq!(Value::Object(body), serde_json::json!({"a": 1, "b": 1}));
        let clone = hooks.clone();
        assert_eq!(clone, hooks);
        let mut other = ProviderHooks::default();
        other.add_body(|_, _| {});
        assert_ne!(other, hooks);
        assert_eq!(format!("{hooks:?}"), "ProviderHooks { body: Some(BodyHook), url: None, event: None }");
    }

    #[test]
    fn debug_never_shows_a_capture() {
        let secret = String::from("captured-secret-value");
        let mut hooks = ProviderHooks::default();
        hooks.add_event(move |_, data| {
            data["x"] = secret.clone().into();
        });
        hooks.add_url(|url, _| url.push('x'));
        let printed = format!("{hooks:?} {hooks:#?}");
        assert!(!printed.contains("captured-secret-value") && printed.contains("EventHook"), "{printed}");
    }
}
