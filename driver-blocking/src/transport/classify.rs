//! What a ureq failure means to the core: connect, TLS, reset or other, before the
//! response head or in the body; and which failures say a kept connection had been
//! closed by the server (a request worth sending again at once).

use std::io;

use omni_protocol::generate::{TransportError, TransportErrorKind};

/// True for the ways a kept connection the server had closed fails: the request could
/// not be written, or the connection ended before any response byte.
pub(super) fn closed_before_response(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Io(e) => matches!(
            e.kind(),
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// A failure before the response head: connecting, TLS, or the connection breaking
/// while the request was sent or the head awaited.
pub(super) fn classify_before_head(error: &ureq::Error) -> TransportError {
    let kind = match error {
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => TransportErrorKind::Connect,
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => TransportErrorKind::Connect,
        ureq::Error::Tls(_) | ureq::Error::TlsRequired => TransportErrorKind::Tls,
        #[cfg(any(feature = "__rustls", feature = "native-tls"))]
        ureq::Error::Pem(_) => TransportErrorKind::Tls,
        #[cfg(feature = "__rustls")]
        ureq::Error::Rustls(_) => TransportErrorKind::Tls,
        #[cfg(feature = "native-tls")]
        ureq::Error::NativeTls(_) => TransportErrorKind::Tls,
        ureq::Error::Io(e) => classify_io(e, TransportErrorKind::Other),
        // ureq's message: "proxy server responded 407/Proxy Authentication Required".
        ureq::Error::ConnectProxyFailed(why) if why.contains("responded 407") => TransportErrorKind::ProxyAuth,
        _ => TransportErrorKind::Other,
    };
    TransportError { kind, message: error.to_string() }
}

/// A failure while the body was read: the body was cut (reset) unless the error says
/// otherwise.
pub(super) fn classify_in_body(error: &io::Error) -> TransportError {
    let kind = match classify_io(error, TransportErrorKind::Reset) {
        TransportErrorKind::Connect => TransportErrorKind::Reset,
        kind => kind,
    };
    TransportError { kind, message: error.to_string() }
}

fn classify_io(error: &io::Error, fallback: TransportErrorKind) -> TransportErrorKind {
    if let Some(inner) = error.get_ref() {
        #[cfg(feature = "__rustls")]
        if inner.is::<rustls::Error>() {
            return TransportErrorKind::Tls;
        }
        if let Some(wrapped) = inner.downcast_ref::<ureq::Error>() {
            return match wrapped {
                ureq::Error::Io(e) => classify_io(e, fallback),
                ureq::Error::Protocol(_) => TransportErrorKind::Other,
                other => classify_before_head(other).kind,
            };
        }
    }
    match error.kind() {
        io::ErrorKind::ConnectionRefused
        | io::ErrorKind::HostUnreachable
        | io::ErrorKind::NetworkUnreachable
        | io::ErrorKind::AddrNotAvailable => TransportErrorKind::Connect,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::NotConnected => TransportErrorKind::Reset,
        _ => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_connections_are_connect_failures_and_cut_bodies_resets() {
        let refused = ureq::Error::Io(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_before_head(&refused).kind, TransportErrorKind::Connect);
        assert_eq!(classify_before_head(&ureq::Error::HostNotFound).kind, TransportErrorKind::Connect);
        assert_eq!(classify_before_head(&ureq::Error::Tls("bad")).kind, TransportErrorKind::Tls);
        let eof = io::Error::other(ureq::Error::Io(io::Error::from(io::ErrorKind::UnexpectedEof)));
        assert_eq!(classify_in_body(&eof).kind, TransportErrorKind::Reset);
        let tls = io::Error::new(io::ErrorKind::InvalidData, rustls::Error::DecryptError);
        assert_eq!(classify_in_body(&tls).kind, TransportErrorKind::Tls);
        assert_eq!(classify_before_head(&ureq::Error::Io(tls)).kind, TransportErrorKind::Tls);
    }
}
