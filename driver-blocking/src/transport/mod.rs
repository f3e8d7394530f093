//! HTTP: the shell's [`Transport`] over ureq, each exchange blocking on its request's own
//! thread, the body streamed as it arrives.
//!
//! ureq is configured to take no decisions of its own: 4xx/5xx are responses, not
//! errors (the core reads status and body); redirects are not followed (the core sees
//! the 3xx); there is no total, read or body timeout (the core owns the total and stall
//! timeouts and cancels); no gzip (a decompressor could hold back stream bytes). Only
//! name resolution and connecting are bounded ([`CONNECT_TIMEOUT`] each), because
//! nothing can interrupt them once started.
//!
//! # Cancellation and keep-alive
//!
//! Every request runs on a [`ureq::Agent`] of its own (cheap: a handle over a
//! connection pool; the ureq configuration is built once per client and cloned).
//! Cancelling (dropping the request's task) calls [`ureq::Agent::shutdown`] on the task
//! handle's clone of that agent: ureq
//! shuts every socket of the agent down, so a read blocked on a silent server returns at
//! once, a TLS handshake in progress fails, and the connection is closed. A shared flag,
//! set first, stops the thread from sending anything more. The alternative, a short read
//! timeout polled in a loop, would wake every thread periodically and delay a cancel by
//! up to one period.
//!
//! An agent whose response was read to the end is kept with its idle connection
//! ([`keep_alive`]) for the next request to the same server, so a conversation
//! or an agent's steps pay one handshake, not one per request. A request sent on such a
//! connection that the server closed meanwhile (its keep-alive timeout racing the
//! request) fails before any response byte: it goes out again at once on a fresh
//! connection, once, rather than through the core's retry and its backoff.

use std::fmt;
use std::future::Future;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite::future::block_on;
use omni_shell::{BodyBuffers, ResponseSink, Transport};

use omni_protocol::dialect::{HttpRequest, Method};
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::{Proxy, ProxyRules};

mod classify;
mod keep_alive;
mod resolve;
mod splice;

use classify::{classify_before_head, classify_in_body, closed_before_response};
use keep_alive::{IdleAgents, Server, IDLE_LIMIT};
use resolve::AddressFirst;
use splice::{take_sensitive, Secrets, SpliceHeaders};
use ureq::http;
#[cfg(any(feature = "__rustls", feature = "native-tls"))]
use ureq::tls::TlsConfig;
/// No TLS configuration in a build without TLS.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
#[derive(Debug, Clone, Copy)]
struct TlsConfig;
use ureq::unversioned::transport::{Connector, DefaultConnector};

/// Longest a name resolution, and then a TCP connect, may take (a cancel cannot
/// interrupt either once started).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// ureq's buffer for the request head and the body's pieces.
const OUTPUT_BUFFER: usize = 16 * 1024;

/// What an exchange reports, in order: `Head`, `Body`*, then `End` or `Failed` (or
/// only `Failed`).
#[derive(Debug)]
enum HttpEvent {
    Head { status: u16, headers: Vec<(String, String)> },
    Body(Vec<u8>),
    End,
    Failed(TransportError),
}

/// The HTTP client of one omni client: ureq configurations (direct, and one per proxy
/// the core's rules name), cloned into an agent per request, and the agents kept alive
/// between requests.
#[derive(Clone)]
pub(crate) struct Http {
    direct: ureq::config::Config,
    via_proxy: Vec<(Proxy, ureq::config::Config)>,
    proxies: Arc<ProxyRules>,
    idle: Arc<IdleAgents>,
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http").finish_non_exhaustive()
    }
}

/// What stops a running request (run when its task is stopped).
struct RequestHandle {
    /// The agent the request is on now (a resend replaces it); taken out once the
    /// request completed and the agent was kept for another, which a late cancel must
    /// not shut down.
    agent: Arc<Mutex<Option<ureq::Agent>>>,
    cancelled: Arc<AtomicBool>,
}

impl RequestHandle {
    /// Stops the exchange promptly and closes its connection.
    fn cancel(self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(agent) = self.agent.lock().ok().and_then(|mut agent| agent.take()) {
            agent.shutdown();
        }
    }
}

impl Http {
    /// Builds the configurations; `extra_roots` are PEM files whose certificates are
    /// trusted on top of the Mozilla roots, and servers are reached as `proxies` say (ureq's own reading of the environment is
    /// off, so every driver reads it alike).
    pub(crate) fn new(extra_roots: &[Vec<u8>], proxies: ProxyRules) -> Result<Self, String> {
        let tls = tls_config(extra_roots)?;
        let config = |proxy: Option<ureq::Proxy>| {
            let builder = ureq::Agent::config_builder();
            #[cfg(any(feature = "__rustls", feature = "native-tls"))]
            let builder = builder.tls_config(tls.clone());
            #[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
            let TlsConfig = tls;
            builder
                // A request head is a few hundred bytes and the body goes through in pieces:
                // ureq's default of 128 KiB, zeroed for every new connection, cost a fresh
                // process's first call more than its parsing.
                .output_buffer_size(OUTPUT_BUFFER)
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_resolve(Some(CONNECT_TIMEOUT))
                .timeout_connect(Some(CONNECT_TIMEOUT))
                .proxy(proxy)
                // One connection per agent (an agent carries one request at a time), kept
                // idle as long as the agent is.
                .max_idle_connections(1)
                .max_idle_connections_per_host(1)
                .max_idle_age(IDLE_LIMIT)
                .build()
        };
        let mut via_proxy: Vec<(Proxy, ureq::config::Config)> = Vec::new();
        for proxy in proxies.proxies() {
            if via_proxy.iter().any(|(known, _)| known == proxy) {
                continue;
            }
            // The message never shows the URL: it may hold credentials.
            let ureq_proxy = ureq::Proxy::new(proxy.url().expose())
                .map_err(|_| format!("the proxy {}:{} cannot be used", proxy.host(), proxy.port()))?;
            via_proxy.push((proxy.clone(), config(Some(ureq_proxy))));
        }
        Ok(Self { direct: config(None), via_proxy, proxies: Arc::new(proxies), idle: Arc::default() })
    }

    /// Sends `request` on this thread, blocking, and reports its response to `sink` as it
    /// arrives. Stopping the task this runs in ([`crate::runtime::on_stop`]) shuts the
    /// request's sockets down at once.
    fn exchange(&self, request: HttpRequest, sink: ResponseSink) {
        #[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
        if request.url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://")) {
            report(
                &mut Some(sink),
                HttpEvent::Failed(TransportError { kind: TransportErrorKind::Tls, message: NO_TLS.into() }),
            );
            return;
        }
        let mut request = request;
        let secret = take_sensitive(&mut request);
        let server = secret.as_ref().ok().and_then(|secrets| Server::of(&request.url, &secrets.key()));
        let kept = server.as_ref().and_then(|server| self.idle.take(server));
        let reused = kept.is_some();
        let none = Secrets::default();
        let agent = kept.unwrap_or_else(|| self.fresh_agent(&request.url, secret.as_ref().unwrap_or(&none)));
        let cancelled = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(Some(agent.clone())));
        let handle = RequestHandle { agent: current.clone(), cancelled: cancelled.clone() };
        crate::runtime::on_stop(move || handle.cancel());
        let is_cancelled = || cancelled.load(Ordering::SeqCst);
        let buffers = sink.buffers();
        let mut sink = Some(sink);
        let mut emit = |event| !is_cancelled() && report(&mut sink, event);
        let secrets = match secret {
            Ok(secrets) => secrets,
            Err(message) => {
                emit(HttpEvent::Failed(TransportError { kind: TransportErrorKind::Other, message }));
                return;
            }
        };
        let mut agent = agent;
        let mut outcome = run(&agent, &request, &buffers, &mut emit);
        if matches!(&outcome, Outcome::NoResponse(e) if reused && closed_before_response(e)) {
            agent = self.fresh_agent(&request.url, &secrets);
            if let Ok(mut current) = current.lock() {
                *current = Some(agent.clone());
            }
            // A cancel that came before the swap shut the old agent down only.
            if is_cancelled() {
                return;
            }
            outcome = run(&agent, &request, &buffers, &mut emit);
        }
        match outcome {
            Outcome::Complete => {
                // Kept before the core hears of the end, so the request it sends next
                // finds it; taken from the handle under its lock, so a cancel either
                // came first (and shut it down: not kept) or finds nothing to shut down.
                let released =
                    current.lock().ok().and_then(|mut current| if is_cancelled() { None } else { current.take() });
                if let (Some(server), Some(_)) = (server, released) {
                    self.idle.put(server, agent);
                }
                emit(HttpEvent::End);
            }
            Outcome::NoResponse(error) => {
                emit(HttpEvent::Failed(classify_before_head(&error)));
            }
            Outcome::Abandoned => {}
        }
    }

    /// A new agent for requests to `url`, direct or through its proxy, putting `secrets`
    /// into its requests (after the tunnel is set up: the proxy never sees them).
    fn fresh_agent(&self, url: &str, secrets: &Secrets) -> ureq::Agent {
        let config = self.config_for(url).clone();
        if secrets.is_empty() {
            return ureq::Agent::with_parts(config, DefaultConnector::default(), AddressFirst::default());
        }
        let connector = DefaultConnector::default().chain(SpliceHeaders::new(secrets.clone()));
        ureq::Agent::with_parts(config, connector, AddressFirst::default())
    }

    /// The configuration whose proxy the rules name for `url`'s server.
    fn config_for(&self, url: &str) -> &ureq::config::Config {
        let Ok(uri) = url.parse::<http::Uri>() else { return &self.direct };
        let https = uri.scheme_str().is_some_and(|s| s.eq_ignore_ascii_case("https"));
        let proxy = uri.host().and_then(|host| self.proxies.for_server(https, host));
        proxy
            .and_then(|proxy| self.via_proxy.iter().find(|(known, _)| known == proxy))
            .map_or(&self.direct, |(_, config)| config)
    }
}

impl Transport for Http {
    /// The exchange runs inside the future's first poll, on the request's own thread (the
    /// runtime gives every task one).
    fn send(&self, request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
        let http = self.clone();
        async move { http.exchange(request, sink) }
    }
}

/// Hands `event` to the loop, waiting while its channel is full (TCP then slows the
/// server down); false once nobody listens or the response is over.
fn report(sink: &mut Option<ResponseSink>, event: HttpEvent) -> bool {
    match event {
        HttpEvent::Head { status, headers } => sink.as_ref().is_some_and(|s| block_on(s.head(status, headers))),
        HttpEvent::Body(bytes) => sink.as_ref().is_some_and(|s| block_on(s.body(bytes))),
        HttpEvent::End => {
            if let Some(sink) = sink.take() {
                block_on(sink.end());
            }
            false
        }
        HttpEvent::Failed(error) => {
            if let Some(sink) = sink.take() {
                block_on(sink.fail(error));
            }
            false
        }
    }
}

/// Why an https request cannot be sent by a build without TLS.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
const NO_TLS: &str = "this build of omni-blocking has no TLS (plain http only): enable one of its features \
                      `rustls-webpki-roots` (the default), `rustls-native-roots` or `native-tls` for https";

/// rustls with the ring provider; Mozilla's roots alone are ureq's own (`RootCerts::WebPki`,
/// set up at the first https connection), any other set is listed.
#[cfg(feature = "__rustls")]
fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    use ureq::tls::{RootCerts, TlsProvider};
    let tls = TlsConfig::builder().provider(TlsProvider::Rustls);
    if cfg!(not(feature = "rustls-native-roots")) && extra_roots.is_empty() {
        return Ok(tls.root_certs(RootCerts::WebPki).build());
    }
    #[cfg(feature = "rustls-webpki-roots")]
    let mut certs: Vec<ureq::tls::Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    #[cfg(not(feature = "rustls-webpki-roots"))]
    let mut certs = Vec::new();
    #[cfg(feature = "rustls-native-roots")]
    certs.extend(
        omni_shell::tls::native_roots().iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()),
    );
    certs.extend(extra_certs(extra_roots)?);
    Ok(tls.root_certs(RootCerts::new_with_certs(&certs)).build())
}

/// The platform's TLS with its roots; extra certificates, when given, replace them (ureq's
/// rule for native-tls).
#[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    use ureq::tls::{RootCerts, TlsProvider};
    let tls = TlsConfig::builder().provider(TlsProvider::NativeTls);
    let roots = if extra_roots.is_empty() {
        RootCerts::PlatformVerifier
    } else {
        RootCerts::new_with_certs(&extra_certs(extra_roots)?)
    };
    Ok(tls.root_certs(roots).build())
}

/// No TLS: plain http only (an https request fails with [`NO_TLS`]).
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    if extra_roots.is_empty() {
        Ok(TlsConfig)
    } else {
        Err(NO_TLS.into())
    }
}

/// Every certificate in `pems`, each checked now rather than at the first handshake.
#[cfg(any(feature = "__rustls", feature = "native-tls"))]
fn extra_certs(pems: &[Vec<u8>]) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    use ureq::tls::PemItem;
    let mut certs = Vec::new();
    for pem in pems {
        let mut found = 0;
        for item in ureq::tls::parse_pem(pem) {
            match item {
                Ok(PemItem::Certificate(cert)) => {
                    // Check it parses as a trust anchor now, not at the first handshake.
                    #[cfg(feature = "__rustls")]
                    rustls::RootCertStore::empty()
                        .add(rustls::pki_types::CertificateDer::from(cert.der()))
                        .map_err(|e| format!("the root certificate is not usable: {e}"))?;
                    certs.push(cert);
                    found += 1;
                }
                Ok(_) => {}
                Err(e) => return Err(format!("the root certificate is not valid PEM: {e}")),
            }
        }
        if found == 0 {
            return Err("the root certificate PEM contains no certificate".into());
        }
    }
    Ok(certs)
}

/// How a request thread's exchange ended.
enum Outcome {
    /// The body was read to its end (not yet reported: the caller says `End`).
    Complete,
    /// No response head came; not yet reported, since it may be sent again.
    NoResponse(ureq::Error),
    /// Reported as failed, or nobody listens any more.
    Abandoned,
}

/// Sends `request` on `agent` and reports the head and each piece of body as it arrives.
fn run(
    agent: &ureq::Agent,
    request: &HttpRequest,
    buffers: &BodyBuffers,
    emit: &mut dyn FnMut(HttpEvent) -> bool,
) -> Outcome {
    let http_request = match to_http(request) {
        Ok(r) => r,
        Err(message) => {
            emit(HttpEvent::Failed(TransportError { kind: TransportErrorKind::Other, message }));
            return Outcome::Abandoned;
        }
    };
    let response = match agent.run(http_request) {
        Ok(r) => r,
        Err(e) => return Outcome::NoResponse(e),
    };
    let (parts, body) = response.into_parts();
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    if !emit(HttpEvent::Head { status: parts.status.as_u16(), headers }) {
        return Outcome::Abandoned;
    }
    let mut reader = body.into_reader();
    loop {
        // Read straight into a buffer the loop gave back (`BodyBuffers`), not copied.
        let mut buf = buffers.take_for_read();
        match reader.read(&mut buf) {
            Ok(0) => return Outcome::Complete,
            Ok(n) => {
                buf.truncate(n);
                if !emit(HttpEvent::Body(buf)) {
                    return Outcome::Abandoned;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                emit(HttpEvent::Failed(classify_in_body(&e)));
                return Outcome::Abandoned;
            }
        }
    }
}

/// The ureq request for `request`, its body borrowed (a resend needs it again).
fn to_http(request: &HttpRequest) -> Result<http::Request<&[u8]>, String> {
    let method = match request.method {
        Method::Get => http::Method::GET,
        Method::Post => http::Method::POST,
    };
    let mut builder = http::Request::builder().method(method).uri(request.url.as_str());
    for header in &request.headers {
        let value = http::HeaderValue::from_str(&header.value)
            .map_err(|_| format!("header {} has a value that cannot be sent", header.name))?;
        builder = builder.header(header.name.as_str(), value);
    }
    // The error names the URL or a header name, never a value.
    builder.body(request.body.as_slice()).map_err(|e| format!("invalid request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_root_certificates_are_rejected_when_the_client_is_built() {
        assert!(Http::new(&[b"not a pem".to_vec()], ProxyRules::default()).unwrap_err().contains("no certificate"));
        let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
        assert!(Http::new(&[garbage], ProxyRules::default()).is_err());
        assert!(Http::new(&[], ProxyRules::default()).is_ok());
    }
}
