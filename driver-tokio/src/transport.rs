//! The shell's [`Transport`] on reqwest: one request sent, its response reported as it
//! arrives.

use std::future::Future;

use omni_protocol::dialect::HttpRequest;
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::ProxyRules;
use omni_shell::{ResponseSink, Transport};

/// The shell's [`Transport`] over reqwest: a client cheap to clone, sharing its
/// connection pool.
#[derive(Debug, Clone)]
pub struct Reqwest(pub(crate) reqwest::Client);

impl Transport for Reqwest {
    fn send(&self, request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
        send(self.0.clone(), request, sink)
    }
}

/// Builds the reqwest client: TLS as the features choose ([`tls`]), no timeouts of its
/// own (the core owns them), no redirects followed (the core sees the 3xx and decides,
/// the same for every driver: reqwest's default policy would carry `x-api-key` to another
/// host), and the core's proxy rules in place of reqwest's own reading of the environment
/// (so every driver reads it alike).
pub(crate) fn client(extra_roots: &[Vec<u8>], proxies: ProxyRules) -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).no_proxy();
    let mut builder = tls(builder, extra_roots)?;
    if !proxies.is_direct() {
        builder = builder.proxy(reqwest::Proxy::custom(move |url| {
            let proxy = proxies.for_server(url.scheme() == "https", url.host_str()?)?;
            reqwest::Url::parse(proxy.url().expose()).ok()
        }));
    }
    builder.build().map_err(|e| e.to_string())
}

/// rustls as omni-shell sets it up for every driver (the ring provider, the roots the
/// features choose, the extra PEM certificates).
#[cfg(feature = "__rustls")]
fn tls(builder: reqwest::ClientBuilder, extra_roots: &[Vec<u8>]) -> Result<reqwest::ClientBuilder, String> {
    Ok(builder.tls_backend_preconfigured(omni_shell::tls::rustls_config(extra_roots)?))
}

/// The platform's TLS (native-tls) with its own roots, plus the extra PEM certificates.
#[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
fn tls(builder: reqwest::ClientBuilder, extra_roots: &[Vec<u8>]) -> Result<reqwest::ClientBuilder, String> {
    let mut builder = builder.tls_backend_native();
    for pem in extra_roots {
        let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("invalid PEM certificate: {e}"))?;
        if certs.is_empty() {
            return Err("no PEM certificate found in a root certificate".into());
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder)
}

/// No TLS in this build: plain http only; an https request fails with [`NO_TLS`].
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
fn tls(builder: reqwest::ClientBuilder, extra_roots: &[Vec<u8>]) -> Result<reqwest::ClientBuilder, String> {
    if extra_roots.is_empty() {
        Ok(builder)
    } else {
        Err(NO_TLS.into())
    }
}

/// Why an https request cannot be sent by a build without TLS.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
const NO_TLS: &str = "this build of omni-tokio has no TLS (plain http only): enable one of its features \
                      `rustls-webpki-roots` (the default), `rustls-native-roots` or `native-tls` for https";

/// Sends `request` and streams its response into `sink`. The sink is bounded: while it is
/// full the next chunk is not read, so an application that does not read holds the server back.
async fn send(http: reqwest::Client, request: HttpRequest, sink: ResponseSink) {
    #[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
    if request.url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://")) {
        sink.fail(TransportError { kind: TransportErrorKind::Tls, message: NO_TLS.into() }).await;
        return;
    }
    let build = |http: &reqwest::Client| {
        let method = match request.method {
            omni_protocol::dialect::Method::Get => reqwest::Method::GET,
            omni_protocol::dialect::Method::Post => reqwest::Method::POST,
            omni_protocol::dialect::Method::Delete => reqwest::Method::DELETE,
        };
        let mut builder = http.request(method, &request.url);
        for h in &request.headers {
            // A credential (the core's decision, `Header::sensitive`) is marked so for
            // hyper too: never shown by its `Debug`, and not compressed into HPACK tables.
            match reqwest::header::HeaderValue::from_str(&h.value) {
                Ok(mut value) => {
                    value.set_sensitive(h.sensitive);
                    builder = builder.header(&h.name, value);
                }
                Err(_) => builder = builder.header(&h.name, &h.value),
            }
        }
        builder.body(request.body.clone())
    };
    let mut sent = build(&http).send().await;
    // A pooled connection the server closed after its last response (servers that announce
    // keep-alive and close anyway, like llama-server) fails before any response byte; the
    // request was never read, so it goes out again at once on a fresh connection rather
    // than through the core's retry and its backoff. Once only.
    if sent.as_ref().is_err_and(closed_before_response) {
        sent = build(&http).send().await;
    }
    let mut response = match sent {
        Ok(r) => r,
        Err(e) => {
            sink.fail(transport_error(&e, TransportErrorKind::Connect)).await;
            return;
        }
    };
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    if !sink.head(response.status().as_u16(), headers).await {
        return;
    }
    let buffers = sink.buffers();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                // Copied out in pieces of at most BODY_CHUNK, into buffers the loop gives
                // back (`BodyBuffers`), and hyper's buffer let go of at once: hyper then
                // reads the next bytes into the same buffer instead of a fresh one (freshly
                // mapped pages, each faulted in and zeroed by the kernel, cost more than
                // the copy).
                for piece in bytes.chunks(omni_shell::delivery::BODY_CHUNK) {
                    let mut buffer = buffers.take();
                    buffer.extend_from_slice(piece);
                    if !sink.body(buffer).await {
                        return;
                    }
                }
            }
            Ok(None) => {
                sink.end().await;
                return;
            }
            Err(e) => {
                sink.fail(transport_error(&e, TransportErrorKind::Reset)).await;
                return;
            }
        }
    }
}

/// True when the connection closed before any response arrived: hyper's "incomplete
/// message" on a request that was written.
fn closed_before_response(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_incomplete_message) {
            return true;
        }
        source = s.source();
    }
    false
}

/// Classifies a reqwest error; TLS failures are found in the source chain.
fn transport_error(e: &reqwest::Error, default: TransportErrorKind) -> TransportError {
    let kind = if is_tls(e) {
        TransportErrorKind::Tls
    } else if proxy_wants_credentials(e) {
        TransportErrorKind::ProxyAuth
    } else if e.is_connect() {
        TransportErrorKind::Connect
    } else {
        default
    };
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message = format!("{message}: {s}");
        source = s.source();
    }
    TransportError { kind, message }
}

/// True when the proxy answered the tunnel with 407: hyper-util reports it as "proxy
/// authorization required" somewhere in the chain (its error type is not public).
fn proxy_wants_credentials(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.to_string().ends_with("proxy authorization required") {
            return true;
        }
        source = s.source();
    }
    false
}

/// True when a rustls error is anywhere in the chain. rustls errors travel inside
/// (possibly nested) `io::Error`s, whose `source()` skips the wrapped error itself.
fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "__rustls")]
    if e.is::<rustls::Error>() {
        return true;
    }
    #[cfg(feature = "native-tls")]
    if e.is::<native_tls::Error>() {
        return true;
    }
    if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        if is_tls(inner) {
            return true;
        }
    }
    e.source().is_some_and(is_tls)
}
