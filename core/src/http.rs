//! The HTTP request a dialect builds; a driver sends it.

use std::fmt;

/// HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// One header. A sensitive header (carrying a key) prints as `<redacted>` in `Debug`.
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
    /// A header that may be printed.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Header { name: name.into().to_ascii_lowercase(), value: value.into(), sensitive: false }
    }

    /// A header that carries a credential.
    pub fn secret(name: impl Into<String>, value: impl Into<String>) -> Self {
        Header { sensitive: true, ..Header::new(name, value) }
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
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}
