//! Redirects, decided once for every driver.
//!
//! The drivers' HTTP clients never follow a redirect themselves: they hand the 3xx head
//! to the machine like any other, and [`Redirects::on_head`] decides here.
//!
//! ```text
//!   3xx head ─► Location parsed and resolved against the URL just requested
//!      ├─ another origin (scheme, host or port) ──────────────► RedirectError::OtherOrigin
//!      ├─ 301/302/303 to a POST ──────────────────────────────► RedirectError::MethodChange
//!      ├─ more than MAX_REDIRECTS hops in one attempt ────────► RedirectError::TooMany
//!      ├─ no Location, several, or one that is not a URL ─────► RedirectError::BadLocation
//!      └─ same origin ─► the same request (method, headers, body, a key in the query)
//!                        to the new path
//! ```
//!
//! Why these rules:
//! - Credentials (the key, secret headers) must never reach another origin. reqwest's
//!   default policy strips only `authorization` on a cross-host hop, so `x-api-key` went
//!   along; rather than strip a list of headers (and trust the other host's answer as the
//!   provider's), a redirect to another origin is an error naming where it pointed.
//! - The followed request is built from the *original* URL's `scheme://authority`, copied
//!   byte for byte, and only the path and query come from `Location` (percent-encoded
//!   where a byte is not plain). So even a `Location` this parser misjudged as same-origin
//!   cannot send a request anywhere else: the authority is never taken from the server.
//! - 307 and 308 keep the method and body (RFC 9110 15.4.8, 15.4.9): followed. For 301
//!   and 302 RFC 9110 lets a client rewrite a POST into a GET "for historical reasons",
//!   and for 303 the client is to GET the location: either way the prompt would be
//!   dropped, and a GET cannot produce the stream asked for; re-POSTing instead could
//!   run (and bill) a generation twice where the server meant "done, look there". So a
//!   POST answered with 301, 302 or 303 fails with a typed error naming the location (the
//!   usual fix is a base URL that needs no redirect); a GET follows all five.
//! - At most [`MAX_REDIRECTS`] hops per attempt (curl's and browsers' limits are higher,
//!   but an API endpoint that needs more than a hop or two is misconfigured); a loop fails
//!   typed once past the bound.

use std::fmt;

use crate::wire::http::{HttpRequest, Method};
use crate::wire::query::secret_query_pairs;

/// Same-origin redirects followed in one attempt before it fails with
/// [`RedirectError::TooMany`].
pub const MAX_REDIRECTS: u32 = 5;

/// Longest location kept on an error (a hostile server could send a huge one).
const MAX_SHOWN: usize = 2048;

/// A redirect that was not followed.
///
/// `location` is the `Location` header as the server sent it, without any `user:password@`
/// part, cut to 2 KiB, with control characters escaped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedirectError {
    /// The redirect points to another origin (scheme, host or port): never followed, so no
    /// credential leaves for it.
    OtherOrigin {
        /// The 3xx status.
        status: u16,
        /// Where it pointed.
        location: String,
    },
    /// A 301, 302 or 303 to a POST: following would turn the request into a GET without
    /// its body (see the module documentation).
    MethodChange {
        /// The 3xx status.
        status: u16,
        /// Where it pointed.
        location: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects in one attempt (a loop).
    TooMany {
        /// The limit.
        limit: u32,
        /// Where the last one pointed.
        location: String,
    },
    /// The 3xx came with no `Location`, several different ones, or one that is not a URL.
    BadLocation {
        /// The 3xx status.
        status: u16,
        /// The header, if there was one.
        location: Option<String>,
    },
}

impl RedirectError {
    /// Where the redirect pointed (sanitized), if anywhere.
    pub fn location(&self) -> Option<&str> {
        match self {
            Self::OtherOrigin { location, .. }
            | Self::MethodChange { location, .. }
            | Self::TooMany { location, .. } => Some(location),
            Self::BadLocation { location, .. } => location.as_deref(),
        }
    }

    /// The location, for the scrubber of a call's error (the machines' `GenerateError::scrub`).
    pub(crate) fn location_mut(&mut self) -> Option<&mut String> {
        match self {
            Self::OtherOrigin { location, .. }
            | Self::MethodChange { location, .. }
            | Self::TooMany { location, .. } => Some(location),
            Self::BadLocation { location, .. } => location.as_mut(),
        }
    }
}

impl fmt::Display for RedirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OtherOrigin { status, location } => write!(
                f,
                "HTTP {status} redirect to another origin ({location}) not followed: credentials never leave the \
                 provider's origin; set the base URL to the new place if it is right"
            ),
            Self::MethodChange { status, location } => write!(
                f,
                "HTTP {status} redirect ({location}) not followed: it would turn the POST into a GET without its body"
            ),
            Self::TooMany { limit, location } => {
                write!(f, "more than {limit} redirects (the last to {location})")
            }
            Self::BadLocation { status, location: Some(location) } => {
                write!(f, "HTTP {status} redirect with an unusable location ({location})")
            }
            Self::BadLocation { status, location: None } => {
                write!(f, "HTTP {status} redirect without a location")
            }
        }
    }
}

impl std::error::Error for RedirectError {}

/// True for the statuses that redirect (`300`, `304`, `305` and `306` do not: they are
/// answers, left to the machine as error statuses).
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The redirects of one attempt: how many were followed, and the URL requested last.
#[derive(Debug, Default, Clone)]
pub struct Redirects {
    followed: u32,
    current: Option<String>,
}

impl Redirects {
    /// Decides on a response head to a request that was `original` before any redirect
    /// of this attempt: `None` when the status is not a redirect (the machine goes on as
    /// usual), else the request to send next or why not.
    pub fn on_head(
        &mut self,
        original: &HttpRequest,
        status: u16,
        headers: &[(String, String)],
    ) -> Option<Result<HttpRequest, RedirectError>> {
        if !is_redirect(status) {
            return None;
        }
        Some(self.follow(original, status, headers))
    }

    fn follow(
        &mut self,
        original: &HttpRequest,
        status: u16,
        headers: &[(String, String)],
    ) -> Result<HttpRequest, RedirectError> {
        let mut locations = headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("location")).map(|(_, v)| v.trim());
        let raw = locations.next();
        let shown = raw.map(shown);
        let bad = || RedirectError::BadLocation { status, location: shown.clone() };
        let raw = raw.filter(|first| !first.is_empty() && locations.all(|other| other == *first)).ok_or_else(bad)?;
        let location = shown.clone().unwrap_or_default();
        let current = self.current.as_deref().unwrap_or(&original.url);
        let (origin, _) = split_origin(current).ok_or_else(bad)?;
        let path_and_query = match resolve(current, raw) {
            Resolved::SameOrigin(path) => path,
            Resolved::OtherOrigin => return Err(RedirectError::OtherOrigin { status, location }),
            Resolved::Invalid => return Err(bad()),
        };
        if original.method == Method::Post && matches!(status, 301..=303) {
            return Err(RedirectError::MethodChange { status, location });
        }
        if self.followed >= MAX_REDIRECTS {
            return Err(RedirectError::TooMany { limit: MAX_REDIRECTS, location });
        }
        self.followed += 1;
        let url = with_secret_query(format!("{origin}{path_and_query}"), &original.url);
        self.current = Some(url.clone());
        Ok(HttpRequest { url, ..original.clone() })
    }
}

/// `url` with those of `original`'s secret query parameters (an `Auth::Query` key) it
/// lacks: a same-origin hop keeps its credentials, as it keeps its headers.
fn with_secret_query(mut url: String, original: &str) -> String {
    let missing: Vec<(String, String)> = secret_query_pairs(original)
        .filter(|(name, _)| !secret_query_pairs(&url).any(|(n, _)| n == *name))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    for (name, value) in missing {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&name);
        url.push('=');
        url.push_str(&value);
    }
    url
}

/// How a `Location` relates to the URL it answers.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// Same origin: the new path and query (starting with `/`).
    SameOrigin(String),
    /// Another scheme, host or port (or not HTTP at all).
    OtherOrigin,
    /// Not a URL this resolver accepts.
    Invalid,
}

/// `scheme://authority` and the rest (`/path?query`, possibly empty) of an absolute URL.
fn split_origin(url: &str) -> Option<(&str, &str)> {
    let after_scheme = url.find("://")? + 3;
    let end = url[after_scheme..].find(['/', '?', '#']).map_or(url.len(), |i| after_scheme + i);
    Some((&url[..end], &url[end..]))
}

/// The host (lower case) and port (the scheme's default when absent) of an absolute
/// HTTP URL, never its `user:password@` part: what telemetry may say about a server.
pub(crate) fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (origin, _) = split_origin(url)?;
    let (scheme, authority) = origin.split_once("://")?;
    let (_, host, port, _) = origin_of(scheme, authority)?;
    Some((host, port))
}

/// Scheme (lower case), host (lower case, IPv6 brackets kept), port (the scheme's default
/// when absent) and whether the authority held a `user@` part.
fn origin_of(scheme: &str, authority: &str) -> Option<(String, String, u16, bool)> {
    let scheme = scheme.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let (userinfo, host_port) = match authority.rfind('@') {
        Some(at) => (true, &authority[at + 1..]),
        None => (false, authority),
    };
    let (host, port) = match host_port.rfind(':') {
        Some(colon) if !host_port[colon..].contains(']') => (&host_port[..colon], Some(&host_port[colon + 1..])),
        _ => (host_port, None),
    };
    let port = match port {
        None | Some("") => default,
        Some(digits) if digits.bytes().all(|b| b.is_ascii_digit()) => digits.parse().ok()?,
        Some(_) => return None,
    };
    if host.is_empty() {
        return None;
    }
    Some((scheme, host.to_ascii_lowercase(), port, userinfo))
}

/// Resolves `location` against `base` (RFC 3986 5.2) far enough to decide: an absolute or
/// scheme-relative reference is compared by origin; a relative one is merged with the
/// base's path.
fn resolve(base: &str, location: &str) -> Resolved {
    let Some((base_origin, base_rest)) = split_origin(base) else { return Resolved::Invalid };
    let Some((base_scheme, base_authority)) = base_origin.split_once("://") else { return Resolved::Invalid };
    let Some(base_key) = origin_of(base_scheme, base_authority) else { return Resolved::Invalid };
    // The fragment is the client's own business; it never goes on the wire.
    let location = location.split('#').next().unwrap_or_default();
    if location.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Resolved::Invalid;
    }
    let scheme_end = location.find(':').filter(|&i| {
        let scheme = &location[..i];
        scheme.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    let (authority_and_rest, scheme) = match (scheme_end, location.strip_prefix("//")) {
        (Some(i), _) => match location[i + 1..].strip_prefix("//") {
            Some(rest) => (Some(rest), &location[..i]),
            // `https:foo` and the like: another scheme, or a form nobody should send.
            None => return Resolved::OtherOrigin,
        },
        (None, Some(rest)) => (Some(rest), base_scheme),
        (None, None) => (None, base_scheme),
    };
    // WHATWG parsers read `\` as `/` in http(s) URLs; treat it as a separator too, so a
    // `/\evil.example` cannot look relative here and absolute to the driver's parser.
    if location.starts_with("/\\") || location.starts_with("\\") {
        return Resolved::OtherOrigin;
    }
    let reference = match authority_and_rest {
        Some(rest) => {
            let end = rest.find(['/', '?', '\\']).unwrap_or(rest.len());
            match origin_of(scheme, &rest[..end]) {
                Some((s, h, p, userinfo)) if (&s, &h, p) == (&base_key.0, &base_key.1, base_key.2) => {
                    // Credentials the server put in the URL are never sent, not even home.
                    if userinfo {
                        return Resolved::Invalid;
                    }
                    &rest[end..]
                }
                Some(_) => return Resolved::OtherOrigin,
                // Not HTTP at all is elsewhere; an HTTP URL with a broken authority is bad.
                None if ["http", "https"].iter().any(|s| scheme.eq_ignore_ascii_case(s)) => return Resolved::Invalid,
                None => return Resolved::OtherOrigin,
            }
        }
        None => location,
    };
    let (ref_path, ref_query) = match reference.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (reference, None),
    };
    let base_path_query = base_rest.split('#').next().unwrap_or_default();
    let (base_path, base_query) = match base_path_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (base_path_query, None),
    };
    let (path, query) = if authority_and_rest.is_some() || ref_path.starts_with('/') {
        (remove_dot_segments(if ref_path.is_empty() { "/" } else { ref_path }), ref_query)
    } else if ref_path.is_empty() {
        (base_path.to_string(), ref_query.or(base_query))
    } else {
        let dir = base_path.rfind('/').map_or("/", |i| &base_path[..=i]);
        (remove_dot_segments(&format!("{dir}{ref_path}")), ref_query)
    };
    let path = if path.starts_with('/') { path } else { format!("/{path}") };
    let mut out = encode(&path, false);
    if let Some(query) = query {
        out.push('?');
        out.push_str(&encode(query, true));
    }
    Resolved::SameOrigin(out)
}

/// RFC 3986 5.2.4: `.` and `..` segments removed.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." | ".." if i == last => {
                if *segment == ".." && out.len() > 1 {
                    out.pop();
                }
                out.push("");
            }
            "." => {}
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
            }
            other => out.push(other),
        }
    }
    let joined = out.join("/");
    if joined.starts_with('/') {
        joined
    } else {
        format!("/{joined}")
    }
}

/// Percent-encodes every byte that is not plain in a path (or, with `query`, a query):
/// unreserved, sub-delims, `:`, `@`, `/`, `%` and in a query `?` pass; the rest (`\`,
/// quotes, non-ASCII ...) is encoded, so every URL parser reads the same thing.
fn encode(text: &str, query: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        let plain = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%".contains(&b) || (query && b == b'?');
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The location as an error shows it: no `user:password@`, control characters escaped,
/// at most [`MAX_SHOWN`] bytes.
fn shown(location: &str) -> String {
    let scheme_end = location
        .find("://")
        .filter(|&i| i > 0 && location[..i].bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)));
    let authority_start = match scheme_end {
        Some(i) => Some(i + 3),
        None => location.starts_with("//").then_some(2),
    };
    let without_userinfo = match authority_start {
        Some(authority_start) => {
            let authority_end =
                location[authority_start..].find(['/', '?', '#', '\\']).map_or(location.len(), |i| authority_start + i);
            match location[authority_start..authority_end].rfind('@') {
                Some(at) => format!("{}{}", &location[..authority_start], &location[authority_start + at + 1..]),
                None => location.to_string(),
            }
        }
        None => location.to_string(),
    };
    let mut escaped: String = without_userinfo.escape_debug().collect();
    if escaped.len() > MAX_SHOWN {
        let mut end = MAX_SHOWN;
        while !escaped.is_char_boundary(end) {
            end -= 1;
        }
        escaped.truncate(end);
        escaped.push('…');
    }
    escaped
}

#[cfg(test)]
mod tests;
