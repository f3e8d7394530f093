//! HTTP proxies, decided once for every driver: which proxy (if any) a request to a given
//! server goes through. The drivers tunnel through it with `CONNECT host:port` (every
//! provider API is HTTPS), sending `Proxy-Authorization: Basic ..` when the proxy URL
//! carries credentials.
//!
//! A client either follows the environment (the default, as curl and most HTTP clients
//! do: `HTTPS_PROXY` for https servers, `HTTP_PROXY` for http ones, `ALL_PROXY` for
//! both, lower-case spellings too, minus the hosts `NO_PROXY` lists), goes direct, or
//! sends everything through one proxy given to the builder. The core reads no variable
//! itself: the driver passes a lookup function.
//!
//! Credentials in a proxy URL are secrets like API keys: no `Debug`, `Display` or error
//! message shows them.

use core::net::IpAddr;
use std::fmt;

use crate::data::provider::ApiKey;

/// An HTTP proxy (`http://[user[:password]@]host[:port]`; the port defaults to 80).
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    /// `http://[userinfo@]host:port`, credentials included (for drivers whose HTTP client
    /// takes a URL).
    url: ApiKey,
    host: String,
    port: u16,
    /// `Basic <base64(user:password)>`, when the URL carries credentials.
    authorization: Option<ApiKey>,
}

/// Why a proxy URL or setting was refused. Never holds the URL's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyError {
    /// A scheme other than `http://` (`https://` and SOCKS proxies are not spoken).
    UnsupportedScheme(String),
    /// The host or the port does not parse.
    BadHostOrPort,
    /// No host.
    NoHost,
    /// The credentials' percent-encoding is broken.
    BadCredentials,
    /// An environment variable (named) holds an unusable proxy URL.
    Variable {
        /// The variable, e.g. `HTTPS_PROXY`.
        name: String,
        /// What is wrong with its URL.
        error: Box<Self>,
    },
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedScheme(scheme) => {
                write!(f, "invalid proxy URL: {scheme}:// proxies are not supported, only http://")
            }
            Self::BadHostOrPort => f.write_str("invalid proxy URL: bad host or port"),
            Self::NoHost => f.write_str("invalid proxy URL: no host"),
            Self::BadCredentials => f.write_str("invalid proxy URL: bad percent-encoding in the credentials"),
            Self::Variable { name, error } => write!(f, "{name}: {error}"),
        }
    }
}

impl std::error::Error for ProxyError {}

impl Proxy {
    /// Parses a proxy URL. Only `http://` proxies are spoken (the scheme may be left out);
    /// `https://` and SOCKS proxies are refused rather than misused.
    pub fn parse(url: &str) -> Result<Self, ProxyError> {
        let trimmed = url.trim();
        let rest = match trimmed.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => return Err(ProxyError::UnsupportedScheme(scheme.to_ascii_lowercase())),
            None => trimmed,
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => (Some(userinfo), hostport),
            None => (None, authority),
        };
        let (host, port) = split_host_port(hostport).ok_or(ProxyError::BadHostOrPort)?;
        if host.is_empty() {
            return Err(ProxyError::NoHost);
        }
        let authorization = match userinfo {
            None => None,
            Some(userinfo) => {
                let decoded = percent_decode(userinfo).ok_or(ProxyError::BadCredentials)?;
                Some(ApiKey::new(format!("Basic {}", base64(decoded.as_bytes()))))
            }
        };
        let host = host.to_ascii_lowercase();
        let bracketed = if host.contains(':') { format!("[{host}]") } else { host.clone() };
        let userinfo = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
        let url = ApiKey::new(format!("http://{userinfo}{bracketed}:{port}"));
        Ok(Self { url, host, port, authorization })
    }

    /// The proxy's host (an IPv6 address without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The `Proxy-Authorization` value, when the URL carries credentials.
    pub fn authorization(&self) -> Option<&ApiKey> {
        self.authorization.as_ref()
    }

    /// The URL in full (`http://[userinfo@]host:port`), credentials included.
    pub fn url(&self) -> &ApiKey {
        &self.url
    }
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("credentials", &self.authorization.is_some())
            .finish()
    }
}

/// `host[:port]`, the host possibly a bracketed IPv6 address.
fn split_host_port(hostport: &str) -> Option<(&str, u16)> {
    if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None if after.is_empty() => 80,
            None => return None,
        };
        return Some((host, port));
    }
    match hostport.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok()?)),
        None => Some((hostport, 80)),
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Standard base64 with padding (RFC 4648), for the Basic credentials.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                let index = (n >> (18 - 6 * i)) & 63;
                out.push(char::from(ALPHABET.get(index as usize).copied().unwrap_or(b'=')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Hosts that bypass the proxy (`NO_PROXY`): `*` for all; a name matches itself and its
/// subdomains (`example.com`, `.example.com` and `*.example.com` alike); an IP address
/// matches itself, a CIDR range (`10.0.0.0/8`, `fd00::/8`) the addresses in it. A port in
/// an entry is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoProxy {
    all: bool,
    names: Vec<String>,
    ranges: Vec<(IpAddr, u8)>,
}

impl NoProxy {
    /// Parses a comma-separated list.
    pub fn parse(list: &str) -> Self {
        let mut rules = Self::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                rules.all = true;
                continue;
            }
            if let Some(range) = cidr(entry) {
                rules.ranges.push(range);
                continue;
            }
            let name = entry.trim_start_matches("*.").trim_start_matches('.');
            // Without its port: `[v6]:port`, `name:port`; a bare IPv6 address has several colons.
            let name = if let Some(bracketed) = name.strip_prefix('[') {
                bracketed.split(']').next().unwrap_or(bracketed)
            } else if name.matches(':').count() == 1 {
                name.split(':').next().unwrap_or(name)
            } else {
                name
            };
            rules.names.push(name.to_ascii_lowercase());
        }
        rules
    }

    /// True when `host` goes direct.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
        let address: Option<IpAddr> = host.parse().ok();
        self.all
            || address.is_some_and(|a| self.ranges.iter().any(|&(net, bits)| in_range(a, net, bits)))
            || self.names.iter().any(|name| {
                host == *name
                    || (host.len() > name.len() && host.ends_with(name.as_str()) && {
                        let cut = host.len() - name.len() - 1;
                        host.as_bytes().get(cut) == Some(&b'.')
                    })
            })
    }
}

/// `address/bits`, the bits within the address family's width.
fn cidr(entry: &str) -> Option<(IpAddr, u8)> {
    let (address, bits) = entry.split_once('/')?;
    let address: IpAddr = address.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let width = if address.is_ipv4() { 32 } else { 128 };
    (bits <= width).then_some((address, bits))
}

/// True when `address` lies in `net/bits` (same family only).
fn in_range(address: IpAddr, net: IpAddr, bits: u8) -> bool {
    let prefix = |value: u128, width: u32| {
        let keep = u32::from(bits).min(width);
        if keep == 0 {
            0
        } else {
            value >> (width - keep)
        }
    };
    match (address, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => prefix(u128::from(u32::from(a)), 32) == prefix(u128::from(u32::from(n)), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => prefix(u128::from(a), 128) == prefix(u128::from(n), 128),
        _ => false,
    }
}

/// How a client reaches servers: what the builder was told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProxySetting {
    /// As the environment says (the default).
    #[default]
    Environment,
    /// Straight to every server, whatever the environment says.
    Direct,
    /// Every request through this proxy.
    Through(Proxy),
}

/// Which proxy each server is reached through, resolved from a [`ProxySetting`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyRules {
    https: Option<Proxy>,
    http: Option<Proxy>,
    bypass: NoProxy,
}

impl ProxyRules {
    /// Resolves `setting`, looking variables up with `env` when it says to follow the
    /// environment. An invalid proxy variable is an error naming the variable.
    pub fn resolve(setting: &ProxySetting, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ProxyError> {
        match setting {
            ProxySetting::Direct => Ok(Self::default()),
            ProxySetting::Through(proxy) => {
                Ok(Self { https: Some(proxy.clone()), http: Some(proxy.clone()), bypass: NoProxy::default() })
            }
            ProxySetting::Environment => {
                let first = |names: &[&str]| -> Result<Option<Proxy>, ProxyError> {
                    for name in names {
                        if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
                            return Proxy::parse(&value)
                                .map(Some)
                                .map_err(|e| ProxyError::Variable { name: name.to_string(), error: Box::new(e) });
                        }
                    }
                    Ok(None)
                };
                let all = first(&["ALL_PROXY", "all_proxy"])?;
                let https = first(&["HTTPS_PROXY", "https_proxy"])?.or_else(|| all.clone());
                // Under CGI, `HTTP_PROXY` comes from the client's `Proxy:` header (httpoxy):
                // ignored there, as curl and reqwest do.
                let cgi = env("REQUEST_METHOD").is_some();
                let http_names: &[&str] = if cgi { &["http_proxy"] } else { &["HTTP_PROXY", "http_proxy"] };
                let http = first(http_names)?.or(all);
                let bypass =
                    env("NO_PROXY").or_else(|| env("no_proxy")).map(|l| NoProxy::parse(&l)).unwrap_or_default();
                Ok(Self { https, http, bypass })
            }
        }
    }

    /// The proxy a request to `host` over https (or http) goes through, if any.
    pub fn for_server(&self, https: bool, host: &str) -> Option<&Proxy> {
        let proxy = if https { self.https.as_ref() } else { self.http.as_ref() }?;
        (!self.bypass.matches(host)).then_some(proxy)
    }

    /// The proxies the rules may name (for drivers that set up one configuration each).
    pub fn proxies(&self) -> impl Iterator<Item = &Proxy> {
        self.https.iter().chain(self.http.iter())
    }

    /// True when no request goes through a proxy.
    pub fn is_direct(&self) -> bool {
        self.https.is_none() && self.http.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_urls_parse_with_and_without_scheme_port_and_credentials() {
        let p = Proxy::parse("http://proxy.corp:3128").expect("valid");
        assert_eq!((p.host(), p.port(), p.authorization()), ("proxy.corp", 3128, None));
        let p = Proxy::parse("proxy.corp").expect("valid");
        assert_eq!((p.host(), p.port()), ("proxy.corp", 80));
        let p = Proxy::parse("http://[::1]:8080/").expect("valid");
        assert_eq!((p.host(), p.port()), ("::1", 8080));
        let p = Proxy::parse("http://al%40ice:s3cr%3At@127.0.0.1:9").expect("valid");
        // base64("al@ice:s3cr:t")
        assert_eq!(p.authorization().map(ApiKey::expose), Some("Basic YWxAaWNlOnMzY3I6dA=="));
        assert_eq!(p.url().expose(), "http://al%40ice:s3cr%3At@127.0.0.1:9");
        assert_eq!(Proxy::parse("Proxy.Corp").expect("valid").url().expose(), "http://proxy.corp:80");
        assert_eq!(Proxy::parse("http://[::1]:8080/").expect("valid").url().expose(), "http://[::1]:8080");
    }

    #[test]
    fn unsupported_or_broken_proxy_urls_are_refused_without_their_credentials() {
        for (url, why) in [
            ("https://user:hunter2@proxy:443", "https:// proxies are not supported"),
            ("socks5://user:hunter2@proxy:1080", "socks5:// proxies are not supported"),
            ("http://user:hunter2@proxy:port", "bad host or port"),
            ("http://user:hunter2@:8080", "no host"),
            ("http://us%zzer:hunter2@proxy:8080", "percent-encoding"),
        ] {
            let error = Proxy::parse(url).expect_err(url).to_string();
            assert!(error.contains(why), "{url}: {error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
        let debug = format!("{:?}", Proxy::parse("http://user:hunter2@proxy:8080").expect("valid"));
        assert!(!debug.contains("hunter2") && debug.contains("credentials: true"), "{debug}");
    }

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        for (text, encoded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(base64(text.as_bytes()), encoded);
        }
    }

    #[test]
    fn no_proxy_matches_names_their_subdomains_and_addresses() {
        let rules = NoProxy::parse(" localhost, .internal.corp,*.svc, 10.0.0.7, example.com:8443, [::1] ");
        for host in [
            "localhost",
            "LOCALHOST",
            "a.internal.corp",
            "internal.corp",
            "x.svc",
            "10.0.0.7",
            "example.com",
            "api.example.com",
            "::1",
            "[::1]",
        ] {
            assert!(rules.matches(host), "{host} goes direct");
        }
        for host in ["notlocalhost", "xinternal.corp", "10.0.0.70", "example.org", "api.anthropic.com"] {
            assert!(!rules.matches(host), "{host} goes through the proxy");
        }
        let ranges = NoProxy::parse("127.0.0.0/8, 10.1.0.0/16, fd00::/8, 0.0.0.0/0x, 1.2.3.4/33");
        for host in ["127.0.0.1", "127.255.0.9", "10.1.200.3", "[fd12::1]", "fdff::"] {
            assert!(ranges.matches(host), "{host} is in a range");
        }
        for host in ["128.0.0.1", "10.2.0.1", "fe80::1", "localhost", "0.0.0.0"] {
            assert!(!ranges.matches(host), "{host} is in no range");
        }
        assert!(NoProxy::parse("0.0.0.0/0").matches("203.0.113.9"), "a /0 range holds every address of its family");
        assert!(!NoProxy::parse("0.0.0.0/0").matches("::1"));
        assert!(NoProxy::parse("*").matches("anything"));
        assert!(!NoProxy::parse("").matches("anything"));
    }

    #[test]
    fn the_environment_picks_a_proxy_per_scheme_minus_no_proxy() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        let env = vars(&[("https_proxy", "http://secure:1"), ("ALL_PROXY", "http://all:2"), ("NO_PROXY", "localhost")]);
        let rules = ProxyRules::resolve(&ProxySetting::Environment, &env).expect("valid");
        assert_eq!(rules.for_server(true, "api.openai.com").map(Proxy::host), Some("secure"));
        assert_eq!(rules.for_server(false, "ollama.lan").map(Proxy::host), Some("all"));
        assert_eq!(rules.for_server(true, "localhost"), None);

        let direct = ProxyRules::resolve(&ProxySetting::Direct, &env).expect("valid");
        assert!(direct.is_direct());
        let through = Proxy::parse("http://only:3").expect("valid");
        let rules = ProxyRules::resolve(&ProxySetting::Through(through), &env).expect("valid");
        assert_eq!(
            rules.for_server(true, "localhost").map(Proxy::host),
            Some("only"),
            "an explicit proxy has no exceptions"
        );

        let cgi = vars(&[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "http://attacker:1")]);
        let rules = ProxyRules::resolve(&ProxySetting::Environment, &cgi).expect("valid");
        assert!(rules.is_direct(), "under CGI, HTTP_PROXY is the client's Proxy header (httpoxy)");

        let broken = vars(&[("HTTPS_PROXY", "socks5://x:1")]);
        let error = ProxyRules::resolve(&ProxySetting::Environment, &broken).expect_err("refused");
        assert!(error.to_string().starts_with("HTTPS_PROXY: "), "{error}");
        assert!(matches!(
            error,
            ProxyError::Variable { ref name, ref error } if name == "HTTPS_PROXY" && **error == ProxyError::UnsupportedScheme("socks5".into())
        ));
        assert!(ProxyRules::resolve(&ProxySetting::Environment, &|_| None).expect("valid").is_direct());
    }
}
