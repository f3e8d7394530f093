//! A local OpenAI-compatible server (llama.cpp's `llama-server`, vLLM, LM Studio, a
//! gateway) from plain threads: `Provider::openai_compatible` names it, the reply streams
//! to the terminal.
//!
//! `OMNI_LOCAL_URL=http://127.0.0.1:8080/v1 OMNI_LOCAL_MODEL=<id>` points it at yours
//! (`OMNI_LOCAL_KEY` if it wants a key); without them, omni-testkit's mock provider speaks
//! Chat Completions in its place, thinking (`reasoning_content`) and all.
//!
//! `cargo run -p omni-blocking --example local_server -- "your prompt"`

use std::io::Write;
use std::time::Duration;

use omni_blocking::{Client, Dialect, Provider, StreamEvent};
use omni_testkit::{MockProvider, Turn};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "Say hello in three languages.".into());
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut _mock = None;
    let (url, model) = match env("OMNI_LOCAL_URL") {
        Some(url) => (url, env("OMNI_LOCAL_MODEL").unwrap_or_else(|| "default".into())),
        None => {
            let mock = MockProvider::start(Dialect::OpenaiCompletions)?;
            let reply = Turn::thinking("Three languages: ")
                .then_thinking("French, Japanese, Swahili.")
                .then_text("Bonjour! ")
                .then_text("Konnichiwa! ")
                .then_text("Jambo!")
                .gap(Duration::from_millis(30));
            mock.push(reply);
            eprintln!(
                "local_server: OMNI_LOCAL_URL is not set; a mock provider speaks Chat Completions at {}",
                mock.base_url()
            );
            let url = mock.base_url();
            _mock = Some(mock);
            (url, "mock-model".into())
        }
    };
    // `None`: the key comes from the builder (or the server takes none).
    let provider = Provider::openai_compatible("local", url, None);
    let mut builder = Client::builder().provider(provider);
    if let Some(key) = env("OMNI_LOCAL_KEY") {
        builder = builder.api_key("local", key);
    }
    let client = builder.build()?;
    let mut stream = client.stream_text(format!("local:{model}"), prompt)?;
    let mut out = std::io::stdout();
    for event in stream.by_ref() {
        match event.stream_event() {
            Some(StreamEvent::ThinkingDelta { delta, .. }) => write!(out, "\x1b[2m{delta}\x1b[0m")?,
            Some(StreamEvent::ThinkingEnd { .. }) => writeln!(out)?,
            Some(StreamEvent::TextDelta { delta, .. }) => write!(out, "{delta}")?,
            _ => {}
        }
        out.flush()?;
    }
    let response = stream.response()?;
    println!(
        "\n[{:?}; tokens in {}, out {}]",
        response.stop_reason, response.usage.input_tokens, response.usage.output_tokens
    );
    Ok(())
}
