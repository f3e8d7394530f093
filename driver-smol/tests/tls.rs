//! https through the smol driver: a loopback rustls server with a certificate from a
//! test CA, trusted through `root_certificate`; untrusted and non-TLS servers fail as
//! `Tls` transport errors, which are not retried.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use omni_conformance::scenarios::{self, text_events};
use omni_conformance::sim::transcript_line;
use omni_protocol::generate::TransportErrorKind;
use omni_smol::{Client, Error, GenerateError};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA certificate (PEM) and a `localhost` certificate it signed, with its key.
fn certificates() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "omni test CA");
    let ca = ca.self_signed(&ca_key).expect("the CA signs itself");
    let leaf_key = KeyPair::generate().expect("a leaf key");
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .expect("leaf parameters")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("the CA signs the leaf");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    (ca.pem(), leaf.der().clone(), key)
}

/// What the server saw: the request head (lower-cased) and body, and the ALPN protocol.
type Seen = (String, Vec<u8>, Option<Vec<u8>>);

/// Serves one https request with an SSE body sent in paced chunks.
fn serve_once(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> (u16, JoinHandle<Option<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let port = listener.local_addr().expect("its address").port();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("the localhost certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let handle = thread::spawn(move || {
        let (tcp, _) = listener.accept().ok()?;
        tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let tls = rustls::ServerConnection::new(Arc::new(config)).ok()?;
        let mut stream = rustls::StreamOwned::new(tls, tcp);
        let mut reader = BufReader::new(&mut stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        let alpn = stream.conn.alpn_protocol().map(<[u8]>::to_vec);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            .ok()?;
        for event in text_events(&["Secure ", "hello."]) {
            write!(stream, "{:x}\r\n{event}\r\n", event.len()).ok()?;
            stream.flush().ok()?;
            thread::sleep(Duration::from_millis(5));
        }
        stream.write_all(b"0\r\n\r\n").ok()?;
        stream.conn.send_close_notify();
        stream.flush().ok()?;
        Some((head, body, alpn))
    });
    (port, handle)
}

fn client(port: u16, root: Option<&str>) -> Client {
    let mut builder = Client::builder()
        .base_url("anthropic", format!("https://localhost:{port}/v1"))
        .api_key("anthropic", "sk-tls")
        .retry(omni_smol::RetryPolicy { seed: 7, ..Default::default() });
    if let Some(pem) = root {
        builder = builder.root_certificate(pem.as_bytes().to_vec());
    }
    builder.build().expect("the client builds")
}

#[test]
fn https_with_an_extra_root_certificate_streams_the_reply() {
    let (ca, cert, key) = certificates();
    let (port, server) = serve_once(cert, key);
    let stream = client(port, Some(&ca)).stream_text(scenarios::model(), "hi").unwrap();
    let lines: Vec<String> = futures_lite::stream::block_on(stream).map(|e| transcript_line(&e)).collect();
    assert_eq!(lines.last().map(String::as_str), Some("finished stop messages=1 text=\"Secure hello.\""), "{lines:#?}");
    let (head, body, alpn) = server.join().unwrap().expect("the server saw a request");
    assert!(head.starts_with("post /v1/messages http/1.1\r\n"), "{head}");
    assert!(head.contains(&format!("host: localhost:{port}\r\n")), "{head}");
    assert!(head.contains("x-api-key: sk-tls\r\n"), "{head}");
    assert!(head.contains(&format!("content-length: {}\r\n", body.len())), "{head}");
    assert!(String::from_utf8_lossy(&body).contains("\"model\":\"claude-sonnet-4-5\""));
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
}

fn transport_error(client: &Client) -> omni_protocol::generate::TransportError {
    let mut stream = client.stream_text(scenarios::model(), "hi").expect("the call starts");
    // A TLS failure is not retried: the first event is the failure.
    let first = smol::block_on(stream.next()).expect("an event");
    assert!(transcript_line(&first).starts_with("failed transport Tls"), "{}", transcript_line(&first));
    match smol::block_on(stream.response()) {
        Err(Error::Generate { error: GenerateError::Transport(t), .. }) => t,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_untrusted_certificate_is_a_tls_failure() {
    let (_, cert, key) = certificates();
    let (port, _server) = serve_once(cert, key);
    let error = transport_error(&client(port, None));
    assert_eq!(error.kind, TransportErrorKind::Tls, "{error}");
}

#[test]
fn a_server_that_does_not_speak_tls_is_a_tls_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let port = listener.local_addr().expect("its address").port();
    let _server = thread::spawn(move || {
        if let Ok((mut tcp, _)) = listener.accept() {
            let mut hello = [0u8; 64];
            let _ = tcp.read(&mut hello);
            let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let error = transport_error(&client(port, None));
    assert_eq!(error.kind, TransportErrorKind::Tls, "{error}");
}
