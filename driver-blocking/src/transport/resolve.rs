//! Where a request connects: a server named by its IP address is connected to at once;
//! a name goes to ureq's own resolver.
//!
//! Why: ureq's resolver honours the resolve timeout by looking the name up on a thread
//! of its own, one per connection, even for an address that needs no lookup. A local
//! model server on `127.0.0.1` would pay a thread's start and a hand-off before every
//! new connection (about a third of what a call adds to a process's start-up before its
//! request leaves, on the end-to-end benchmark's loopback server).

use std::net::{IpAddr, SocketAddr};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// ureq's resolver, skipped for an address.
#[derive(Debug, Default)]
pub(super) struct AddressFirst(DefaultResolver);

impl Resolver for AddressFirst {
    fn resolve(&self, uri: &Uri, config: &Config, timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        match literal(uri) {
            Some(address) => {
                let mut addresses = self.empty();
                addresses.push(address);
                Ok(addresses)
            }
            None => self.0.resolve(uri, config, timeout),
        }
    }
}

/// The socket address `uri` names by IP address (IPv6 in brackets), with its port or its
/// scheme's; `None` for a host name or a URI ureq would refuse.
fn literal(uri: &Uri) -> Option<SocketAddr> {
    let host = uri.host()?;
    let ip: IpAddr = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse().ok()?;
    let port = match uri.port_u16() {
        Some(port) => port,
        None => match uri.scheme_str()? {
            "http" => 80,
            "https" => 443,
            _ => return None,
        },
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(uri: &str) -> Option<SocketAddr> {
        literal(&uri.parse().expect("a URI"))
    }

    #[test]
    fn addresses_are_connected_to_and_names_are_looked_up() {
        assert_eq!(at("http://127.0.0.1:8080/v1"), Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(at("https://10.0.0.1/v1"), Some("10.0.0.1:443".parse().unwrap()));
        assert_eq!(at("http://[::1]:11434/api"), Some("[::1]:11434".parse().unwrap()));
        assert_eq!(at("http://localhost:8080/v1"), None);
        assert_eq!(at("https://api.anthropic.com/v1"), None);
        // A name that looks like a number is not an address.
        assert_eq!(at("http://127.1:80/"), None);
    }
}
