//! `omni-decode`: decode a recorded response body, or print the request omni would send.
//!
//! ```text
//! omni-decode --dialect <name> [--chunk-size N] [--model <id>] < body
//! omni-decode --request --model <provider>:<id> < context.json
//! ```
//!
//! Decoding prints one JSON object per consumer event and a last line
//! `{"type":"done","response":{…}}` or `{"type":"error","error":{…},"response":{…}}`.
//! Exit status: 0 decoded, 1 stream error, 2 bad arguments or input.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{self, Read, Write};
use std::process::ExitCode;

use omni_protocol::{dialect::StreamDecoder, Dialect, StreamEvent};

const USAGE: &str = "usage:
  omni-decode --dialect <name> [--chunk-size N] [--model <id>] < body
  omni-decode --request --model <provider>:<id> [--options <json>] < context.json
dialects: anthropic_messages, openai_completions, openai_responses, google_gemini, ollama_chat";

#[derive(Debug, Default)]
struct Args {
    dialect: Option<Dialect>,
    chunk_size: Option<usize>,
    model: Option<String>,
    request: bool,
    options: Option<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args::default();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--dialect" => out.dialect = Some(value("--dialect")?.parse().map_err(|e| format!("{e}"))?),
            "--chunk-size" => {
                let n: usize =
                    value("--chunk-size")?.parse().map_err(|_| "--chunk-size must be a number".to_string())?;
                if n == 0 {
                    return Err("--chunk-size must be at least 1".into());
                }
                out.chunk_size = Some(n);
            }
            "--model" => out.model = Some(value("--model")?),
            "--options" => out.options = Some(value("--options")?),
            "--request" => out.request = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("omni-decode: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut input = Vec::new();
    if let Err(e) = io::stdin().read_to_end(&mut input) {
        eprintln!("omni-decode: cannot read standard input: {e}");
        return ExitCode::from(2);
    }
    let result = if args.request { print_request(&args, &input) } else { decode(&args, &input) };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("omni-decode: {e}");
            ExitCode::from(2)
        }
    }
}

fn decode(args: &Args, body: &[u8]) -> Result<ExitCode, String> {
    let dialect = args.dialect.ok_or("--dialect is required")?;
    let model = args.model.as_deref().unwrap_or("unknown");
    let mut decoder = StreamDecoder::new(dialect, model);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut events = Vec::new();
    let mut terminal = None;
    let chunk = args.chunk_size.unwrap_or(body.len().max(1));
    for piece in body.chunks(chunk) {
        decoder.feed(piece, &mut events);
        write_events(&mut out, &mut events, &mut terminal)?;
    }
    decoder.finish(&mut events);
    write_events(&mut out, &mut events, &mut terminal)?;
    let response = serde_json::to_string(&decoder.into_response()).map_err(|e| e.to_string())?;
    // `type` first, as in the event lines (serde_json's map would sort it last).
    let (line, code) = match terminal {
        Some(StreamEvent::Error { error }) => {
            let error = serde_json::to_string(&error).map_err(|e| e.to_string())?;
            (format!(r#"{{"type":"error","error":{error},"response":{response}}}"#), 1)
        }
        Some(_) => (format!(r#"{{"type":"done","response":{response}}}"#), 0),
        // The decoder always ends with done or error; fail loudly if it did not.
        None => (format!(r#"{{"type":"error","error":{{"type":"incomplete"}},"response":{response}}}"#), 1),
    };
    writeln!(out, "{line}").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    Ok(ExitCode::from(code))
}

/// Prints every event but the terminal one (`done` or `error`), which is kept for the
/// last line.
fn write_events(
    out: &mut impl Write,
    events: &mut Vec<StreamEvent>,
    terminal: &mut Option<StreamEvent>,
) -> Result<(), String> {
    for e in events.drain(..) {
        if matches!(e, StreamEvent::Done { .. } | StreamEvent::Error { .. }) {
            *terminal = Some(e);
            continue;
        }
        let line = serde_json::to_string(&e).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn print_request(args: &Args, input: &[u8]) -> Result<ExitCode, String> {
    use omni_protocol::client::{ClientConfig, ModelRef};
    use omni_protocol::{dialect::RequestSpec, ApiKey, Context, Options};

    let name = args.model.as_deref().ok_or("--request needs --model <provider>:<id>")?;
    let context: Context =
        serde_json::from_slice(input).map_err(|e| format!("the context on stdin is not valid: {e}"))?;
    let options: Options = match &args.options {
        Some(json) => serde_json::from_str(json).map_err(|e| format!("--options is not valid: {e}"))?,
        None => Options::default(),
    };
    let config = ClientConfig::new().map_err(|e| e.to_string())?;
    let env = |k: &str| std::env::var(k).ok();
    let model = config.model(&ModelRef::from(name)).map_err(|e| e.to_string())?;
    let provider = config.provider(&model, &env).map_err(|e| e.to_string())?;
    // The key is only ever printed redacted; a stand-in lets the request build without one.
    let key = provider.resolve_key(None, None, env).unwrap_or_else(|| ApiKey::new("unset"));
    let spec =
        RequestSpec { model: &model, provider: &provider, context: &context, options: &options, api_key: Some(&key) };
    let built = model.dialect.build_request(&spec).map_err(|e| e.to_string())?;
    print!("{}", omni_conformance::fixtures::request_to_json(&built.request));
    for warning in &built.warnings {
        eprintln!("warning: {}", warning.message);
    }
    Ok(ExitCode::SUCCESS)
}
