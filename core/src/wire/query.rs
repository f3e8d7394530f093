//! Credentials in a URL's query (an [`Auth::Query`](crate::data::provider::Auth::Query) key, a signature):
//! which parameters are secret, how a URL is shown without them ([`redacted_url`]), and
//! how a driver keeps them out of its HTTP crate's logs ([`QuerySecrets`]).

use std::borrow::Cow;
use std::fmt;

// The rule is data (see `data::secret`); re-exported where URLs are read, as it always was.
pub use crate::data::secret::is_secret_query_name;

/// The `(name, value)` pairs of `url`'s query whose name is secret
/// ([`is_secret_query_name`]), as written in the URL (percent-encoded).
pub(crate) fn secret_query_pairs(url: &str) -> impl Iterator<Item = (&str, &str)> {
    let query = url.split('#').next().unwrap_or_default().split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(name, _)| is_secret_query_name(&percent_decode(name)))
}

/// `url` with the value of every secret query parameter ([`is_secret_query_name`])
/// replaced by `<redacted>`: how omni shows a URL.
///
/// ```
/// use omni_protocol::transport::redacted_url;
/// assert_eq!(redacted_url("https://h/v1/x?alt=sse&key=AIza-123"), "https://h/v1/x?alt=sse&key=<redacted>");
/// assert_eq!(redacted_url("https://h/v1/x?api-version=1"), "https://h/v1/x?api-version=1");
/// ```
pub fn redacted_url(url: &str) -> Cow<'_, str> {
    if secret_query_pairs(url).next().is_none() {
        return Cow::Borrowed(url);
    }
    Cow::Owned(with_secret_values(url, |_| "<redacted>".into()))
}

/// `url` with the value of each secret query parameter replaced by `stand_in(value)`.
fn with_secret_values(url: &str, mut stand_in: impl FnMut(&str) -> String) -> String {
    let (before, fragment) = match url.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (url, None),
    };
    let Some((path, query)) = before.split_once('?') else { return url.to_string() };
    let pairs: Vec<Cow<'_, str>> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if is_secret_query_name(&percent_decode(name)) => {
                Cow::Owned(format!("{name}={}", stand_in(value)))
            }
            _ => Cow::Borrowed(pair),
        })
        .collect();
    let mut out = format!("{path}?{}", pairs.join("&"));
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Decodes `%XX` escapes (a malformed one stays as is); bytes that are not UTF-8 are
/// replaced.
pub(crate) fn percent_decode(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes.get(i + 1..i + 3).filter(|h| b == b'%' && h.iter().all(u8::is_ascii_hexdigit));
        match hex.and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(decoded) => {
                out.push(decoded);
                i += 3;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// What stands in for secret value number `i` in a masked URL: a valid query value that
/// no other placeholder contains.
fn placeholder(i: usize) -> String {
    format!("_omni_secret_{i}_")
}

/// The secret query values of a URL, taken out of it for an HTTP crate that logs the
/// request line (ureq and ureq-proto do, at trace level): the crate is given the URL with
/// placeholders ([`QuerySecrets::take`]), and the driver puts the values back into the
/// request head as it goes out ([`QuerySecrets::restore`]), as it splices in the secret
/// headers. `Debug` shows how many there are, never a value.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct QuerySecrets(Vec<(String, String)>);

impl fmt::Debug for QuerySecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QuerySecrets({} redacted)", self.0.len())
    }
}

impl QuerySecrets {
    /// Replaces each secret query value in `url` ([`is_secret_query_name`]) with a
    /// placeholder and returns the values. A value holding a byte a request line cannot
    /// carry (a space, a control or non-ASCII byte, `#`) is an error naming no value.
    pub fn take(url: &mut String) -> Result<Self, String> {
        if secret_query_pairs(url).next().is_none() {
            return Ok(Self::default());
        }
        if secret_query_pairs(url).any(|(_, v)| !v.bytes().all(|b| b.is_ascii_graphic() && b != b'#')) {
            return Err("a secret query parameter holds a character a URL cannot carry".into());
        }
        let mut taken = Vec::new();
        let masked = with_secret_values(url, |value| {
            let stand_in = placeholder(taken.len());
            taken.push((stand_in.clone(), value.to_string()));
            stand_in
        });
        *url = masked;
        Ok(Self(taken))
    }

    /// True when the URL had no secret query value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Puts the values back into the request line of `head` (its bytes up to the first
    /// CRLF, or all of it without one); false when a placeholder is not there.
    pub fn restore(&self, head: &mut Vec<u8>) -> bool {
        for (stand_in, value) in &self.0 {
            let line_end = head.windows(2).position(|w| w == b"\r\n").unwrap_or(head.len());
            let line = head.get(..line_end).unwrap_or_default();
            let Some(at) = line.windows(stand_in.len()).position(|w| w == stand_in.as_bytes()) else {
                return false;
            };
            head.splice(at..at + stand_in.len(), value.bytes());
        }
        true
    }

    /// The values, in the URL's order, as written there (for a connection pool that
    /// keys its connections by the secrets they send).
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(_, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::http::{HttpRequest, Method};

    #[test]
    fn secret_query_values_never_print() {
        for name in ["key", "api-key", "api_key", "apikey", "access_token", "Sig", "code", "api%2Dkey"] {
            assert!(is_secret_query_name(&percent_decode(name)), "{name}");
        }
        for name in ["api-version", "alt", "beta", "model"] {
            assert!(!is_secret_query_name(name), "{name}");
        }
        let request = HttpRequest {
            method: Method::Post,
            url: "http://h/v1/m:stream?alt=sse&key=AIza%2Bsecret-1&api%2Dkey=two-secret#frag".into(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        let printed = format!("{request:?} {request:#?}");
        assert!(!printed.contains("secret") && printed.contains("alt=sse&key=<redacted>&api%2Dkey=<redacted>#frag"));
        assert_eq!(request.secret_query_values().collect::<Vec<_>>(), ["AIza%2Bsecret-1", "two-secret"]);
        assert_eq!(redacted_url("http://h/?k=v&key"), "http://h/?k=v&key");
        assert_eq!(percent_decode("a%2Bb%zz%+1%4"), "a+b%zz%+1%4");
    }

    #[test]
    fn secrets_are_taken_out_of_a_url_and_put_back_into_the_head() {
        let mut url = "https://h/v1/x?alt=sse&key=AIza%2Fsecret&sig=s1g-secret#f".to_string();
        let secrets = QuerySecrets::take(&mut url).unwrap();
        assert_eq!(url, "https://h/v1/x?alt=sse&key=_omni_secret_0_&sig=_omni_secret_1_#f");
        assert!(!format!("{secrets:?}").contains("secret&") && !format!("{secrets:?}").contains("AIza"));
        let mut head =
            b"POST /v1/x?alt=sse&key=_omni_secret_0_&sig=_omni_secret_1_ HTTP/1.1\r\nhost: h\r\n\r\n".to_vec();
        assert!(secrets.restore(&mut head));
        assert_eq!(head, b"POST /v1/x?alt=sse&key=AIza%2Fsecret&sig=s1g-secret HTTP/1.1\r\nhost: h\r\n\r\n");
        assert_eq!(secrets.values().collect::<Vec<_>>(), ["AIza%2Fsecret", "s1g-secret"]);
        // Only the request line is searched.
        let mut elsewhere = b"POST /v1/x HTTP/1.1\r\nx: _omni_secret_0_\r\n\r\n".to_vec();
        assert!(!secrets.restore(&mut elsewhere));
        let mut plain = "https://h/v1/x?api-version=1".to_string();
        assert!(QuerySecrets::take(&mut plain).unwrap().is_empty());
        assert_eq!(plain, "https://h/v1/x?api-version=1");
        assert!(QuerySecrets::take(&mut "https://h/?key=a b".to_string()).is_err());
    }
}
