//! The baseline hello-stream: a bare reqwest SSE loop, one Chat Completions reply from the
//! given http URL, each event's `choices[0].delta.content` printed.
use std::sync::Arc;

fn main() {
    let url = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let http = reqwest::Client::builder().tls_backend_preconfigured(tls).build().expect("a client");
        let body = r#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello."}]}"#;
        let mut response = http
            .post(format!("{url}/v1/chat/completions"))
            .header("authorization", "Bearer key")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("a response");
        let mut buffer = Vec::new();
        while let Some(chunk) = response.chunk().await.expect("the body") {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = buffer.drain(..end + 2).collect();
                let Some(data) = event.strip_prefix(b"data: ") else { continue };
                let Ok(value) = serde_json::from_slice::<serde_json::Value>(data.trim_ascii()) else { continue };
                if let Some(text) = value["choices"][0]["delta"]["content"].as_str() {
                    print!("{text}");
                }
            }
        }
        println!();
    });
}
