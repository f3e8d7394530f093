//! The `CONNECT` tunnel through an HTTP proxy to an https server: asked for on the
//! proxy's connection before TLS, its answer read without reading past it.

use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::Proxy;

use super::{failure, Target};

/// Largest response head a proxy may answer `CONNECT` with.
const MAX_PROXY_HEAD: usize = 64 * 1024;

/// Asks `proxy` (connected on `connection`) for a tunnel to `target` and reads its
/// answer: a 2xx opens the tunnel; a 407 is `ProxyAuth`; anything else (403 refuses the
/// host) is a `Connect` failure naming the status. The credentials go in the request only.
pub async fn tunnel(
    connection: &mut (impl AsyncRead + AsyncWrite + Unpin),
    proxy: &Proxy,
    target: &Target,
) -> Result<(), TransportError> {
    let io = |e: std::io::Error| failure(TransportErrorKind::Connect, format_args!("proxy tunnel: {e}"));
    let authority = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(credentials) = proxy.authorization() {
        request.push_str("Proxy-Authorization: ");
        request.push_str(credentials.expose());
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    connection.write_all(request.as_bytes()).await.map_err(io)?;
    connection.flush().await.map_err(io)?;
    // Byte by byte up to the blank line: nothing of the tunnelled stream may be read here.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_PROXY_HEAD {
            return Err(failure(TransportErrorKind::Connect, "proxy tunnel: response head too large"));
        }
        match connection.read(&mut byte).await.map_err(io)? {
            0 => return Err(failure(TransportErrorKind::Connect, "proxy tunnel: the proxy closed the connection")),
            _ => head.push(byte[0]),
        }
    }
    let status_line = String::from_utf8_lossy(head.split(|&b| b == b'\r').next().unwrap_or_default()).into_owned();
    let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok());
    match status {
        Some(200..=299) => Ok(()),
        Some(407) => Err(failure(
            TransportErrorKind::ProxyAuth,
            format_args!("the proxy wants other credentials for the tunnel to {authority}: HTTP 407"),
        )),
        Some(code) => Err(failure(
            TransportErrorKind::Connect,
            format_args!("the proxy refused the tunnel to {authority}: HTTP {code}"),
        )),
        None => {
            Err(failure(TransportErrorKind::Connect, format_args!("proxy tunnel: not an HTTP answer: {status_line:?}")))
        }
    }
}
