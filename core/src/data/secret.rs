//! Which names carry credentials, and the secret values of one call: the rules every
//! layer follows when it shows a header, a URL or an error. They are data (names and
//! strings), so the options and the provider, which hold headers, can print themselves
//! without knowing the wire; the wire applies them to requests (`wire::http`,
//! `wire::query`, `wire::secret`), the machines to a call's errors.

use std::fmt;

/// Header names that always carry credentials.
const SECRET_NAMES: &[&str] =
    &["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "x-goog-api-key", "api-key"];

/// Parts of a header name that mark it as carrying a credential (`x-auth-token`,
/// `ocp-apim-subscription-key`, `x-client-secret` ...).
const SECRET_PARTS: &[&str] = &["auth", "key", "token", "secret", "cookie", "passw", "credential", "session"];

/// True when a header of this name carries a credential, whoever sets it: the one
/// decision every driver, `Debug` and log follow. The rule is broad on purpose (a name
/// naming a key, a token, a secret, a password, a credential, a session or a cookie, or
/// any auth scheme): a harmless header it catches only prints as `<redacted>` and is
/// kept out of trace logs, while a credential it missed would leak. A header it does not
/// catch can be marked secret by its name (`Options::secret_headers`,
/// `Provider::secret_headers`) or built with `Header::secret`.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_NAMES.contains(&name.as_str()) || SECRET_PARTS.iter().any(|part| name.contains(part))
}

/// Query parameter names that carry credentials besides those [`is_secret_name`] catches:
/// URL signatures (`sig`, Azure's SAS; `signature`) and function keys (`code`).
const SECRET_QUERY_NAMES: &[&str] = &["sig", "signature", "code"];

/// True when a query parameter of this name (percent-decoded) carries a credential: the
/// header rule ([`is_secret_name`]: `key`, `api-key`, `access_token` ...) and
/// `sig`, `signature`, `code`. Its value prints as `<redacted>` wherever omni shows a URL
/// (`wire::query::redacted_url`, `HttpRequest`'s `Debug`), is cut out of errors, and is
/// kept by a same-origin redirect; an [`Auth::Query`](crate::data::provider::Auth::Query)
/// key must use such a name.
pub fn is_secret_query_name(name: &str) -> bool {
    is_secret_name(name) || SECRET_QUERY_NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// `Debug` of a list of `(name, value)` headers: the value of a header named by
/// [`is_secret_name`] or in `marked` prints as `<redacted>`.
pub(crate) struct RedactedHeaders<'a> {
    /// The headers.
    pub headers: &'a [(String, String)],
    /// Names marked secret besides the built-in rule.
    pub marked: &'a [String],
}

impl fmt::Debug for RedactedHeaders<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (name, value) in self.headers {
            let secret = is_secret_name(name) || self.marked.iter().any(|m| m.eq_ignore_ascii_case(name));
            list.entry(&(name, if secret { "<redacted>" } else { value.as_str() }));
        }
        list.finish()
    }
}

/// What replaces a secret in text.
pub const REDACTED: &str = "<redacted>";

/// The secret strings of one request (its sensitive header values and secret query
/// values: `wire::secret` reads them off a request). Its `Debug` shows only how many
/// there are.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(pub(crate) Vec<String>);

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} redacted)", self.0.len())
    }
}

impl Secrets {
    /// True when there is nothing to cut.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replaces every secret in `text` with [`REDACTED`].
    pub fn scrub(&self, text: &mut String) {
        for secret in &self.0 {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), REDACTED);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_and_marked_header_values_never_print() {
        let headers = [("X-Custom".to_string(), "hidden-value".to_string()), ("api-key".into(), "k-123".into())];
        let printed = format!("{:?}", RedactedHeaders { headers: &headers, marked: &["x-custom".into()] });
        assert!(!printed.contains("hidden-value") && !printed.contains("k-123"), "{printed}");
    }
}
