//! A served connection: plain TCP, or TLS over TCP with the `tls` feature.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// The HTTPS server's configuration (none can exist without the `tls` feature).
#[cfg(feature = "tls")]
pub(super) type TlsConfig = std::sync::Arc<rustls::ServerConfig>;
/// The HTTPS server's configuration (none can exist without the `tls` feature).
#[cfg(not(feature = "tls"))]
#[derive(Debug)]
pub(super) enum TlsConfig {}

pub(super) enum Conn {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    /// The accepted `stream`, with TLS over it when the server has a configuration.
    pub(super) fn accept(stream: TcpStream, tls: Option<&TlsConfig>) -> Option<Self> {
        match tls {
            None => Some(Self::Plain(stream)),
            #[cfg(feature = "tls")]
            Some(config) => {
                let server = rustls::ServerConnection::new(config.clone()).ok()?;
                Some(Self::Tls(Box::new(rustls::StreamOwned::new(server, stream))))
            }
            #[cfg(not(feature = "tls"))]
            Some(never) => match *never {},
        }
    }

    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.flush(),
        }
    }
}
