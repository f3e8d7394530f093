//! Credentials cut out of what a call shows: a server that echoes the key (or a secret
//! header) back in its error body must not put it in the error the application logs.
//!
//! The values come from the request's sensitive headers ([`crate::wire::http::is_secret_name`]
//! decides which those are) and its URL's secret query parameters (an `Auth::Query` key,
//! [`crate::wire::query::is_secret_query_name`]); every place a call's error is made passes
//! it through once (the request machine does it where an attempt fails, with
//! `GenerateError::scrub`).

use crate::wire::http::HttpRequest;
use crate::wire::query::percent_decode;

// What a secret is, and how text is cut, is data; reading them off a request is the wire's.
pub use crate::data::secret::{Secrets, REDACTED};

/// A whole header value shorter than this is not cut out of text: a three-letter
/// "secret" would blank out every word containing it and hide nothing worth hiding.
const MIN_WHOLE: usize = 4;
/// A part of a value (the token after `Bearer`, a cookie's value) is cut out from this
/// length on.
const MIN_PART: usize = 8;

impl Secrets {
    /// The values of `request`'s sensitive headers, and their long parts (the token of
    /// `Bearer <token>`, each cookie's value), and of its URL's secret query parameters
    /// (as written and decoded), longest first.
    pub fn of_request(request: &HttpRequest) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        for value in request.secret_values() {
            if value.len() >= MIN_WHOLE {
                secrets.push(value.to_string());
            }
            let parts = value.split([' ', '\t', ';', ',', '=']).map(str::trim).filter(|p| p.len() >= MIN_PART);
            secrets.extend(parts.map(str::to_string));
        }
        // A key in the query (`Auth::Query`): as written in the URL, and decoded.
        for value in request.secret_query_values() {
            for value in [value.to_string(), percent_decode(value).into_owned()] {
                if value.len() >= MIN_WHOLE {
                    secrets.push(value);
                }
            }
        }
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self(secrets)
    }
}
