//! The HTTP request a dialect builds; a driver sends it.

use std::fmt;

/// HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// DELETE (an MCP client ending its legacy HTTP session).
    Delete,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Delete => "DELETE",
        }
    }
}

// The rule is data (the options and the provider print their headers by it); it is
// re-exported here, where requests are built, as it always was.
pub use crate::data::secret::is_secret_name;

/// One header. A sensitive header (carrying a credential) prints as `<redacted>` in
/// `Debug`, and drivers keep it out of their HTTP crates' logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    /// Lower-case header name.
    pub name: String,
    /// Value.
    pub value: String,
    /// True for credentials: never printed.
    pub sensitive: bool,
}

impl Header {
    /// A header, sensitive when its name says it carries a credential ([`is_secret_name`]).
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into().to_ascii_lowercase();
        Self { sensitive: is_secret_name(&name), name, value: value.into() }
    }

    /// A header that carries a credential.
    pub fn secret(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self { sensitive: true, ..Self::new(name, value) }
    }

    /// The value, or `<redacted>` for a sensitive header.
    pub fn display_value(&self) -> &str {
        if self.sensitive {
            "<redacted>"
        } else {
            &self.value
        }
    }
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.display_value())
    }
}

/// A complete HTTP request: the driver sends it as is and expects a streaming body.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// Method.
    pub method: Method,
    /// Absolute URL.
    pub url: String,
    /// Headers in order.
    pub headers: Vec<Header>,
    /// Body bytes (JSON).
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// Sets a header, replacing any header of the same name.
    pub fn set_header(&mut self, header: Header) {
        self.headers.retain(|h| h.name != header.name);
        self.headers.push(header);
    }

    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
    }

    /// The values of the sensitive headers: what an error or a log must never show.
    pub fn secret_values(&self) -> impl Iterator<Item = &str> {
        self.headers.iter().filter(|h| h.sensitive).map(|h| h.value.as_str())
    }

    /// The values of the URL's secret query parameters
    /// ([`is_secret_query_name`](crate::wire::query::is_secret_query_name)), as
    /// written in the URL (percent-encoded): what an error or a log must never show either.
    pub fn secret_query_values(&self) -> impl Iterator<Item = &str> {
        crate::wire::query::secret_query_pairs(&self.url).map(|(_, value)| value)
    }
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &crate::wire::query::redacted_url(&self.url))
            .field("headers", &self.headers)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers_are_secret_by_name_in_any_case() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "x-api-key",
            "X-Goog-Api-Key",
            "api-key",
            "x-auth-token",
            "ocp-apim-subscription-key",
            "x-client-secret",
        ] {
            assert!(is_secret_name(name), "{name}");
            assert!(Header::new(name, "v").sensitive, "{name}");
        }
        for name in ["content-type", "accept", "user-agent", "anthropic-version", "anthropic-beta", "keep-alive"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn secret_values_never_print() {
        let request = HttpRequest {
            method: Method::Post,
            url: "http://h/v1".into(),
            headers: vec![Header::new("cookie", "session=abc123"), Header::new("x-trace", "visible")],
            body: Vec::new(),
        };
        let printed = format!("{request:?}");
        assert!(!printed.contains("abc123") && printed.contains("visible"), "{printed}");
        assert_eq!(request.secret_values().collect::<Vec<_>>(), ["session=abc123"]);
    }
}
