//! The `omni-decode` command: output format, exit codes, chunking, request mode.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use omni_conformance::fixtures::fixtures_root;

fn run(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_omni-decode"));
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("omni-decode starts");
    child.stdin.take().expect("stdin").write_all(stdin).expect("write stdin");
    child.wait_with_output().expect("omni-decode ends")
}

fn body(case: &str) -> Vec<u8> {
    std::fs::read(fixtures_root().join("anthropic_messages").join(case).join("body.sse")).expect("fixture body")
}

fn lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn decodes_a_stream_to_events_and_a_final_done_line() {
    let out = run(&["--dialect", "anthropic_messages"], &body("tool_call"), &[]);
    assert_eq!(out.status.code(), Some(0));
    let lines = lines(&out);
    assert!(lines.iter().any(|l| l["type"] == "tool_use_start"));
    let last = lines.last().expect("a last line");
    assert_eq!(last["type"], "done");
    assert_eq!(last["response"]["stop_reason"], "tool_use");
    let block = &last["response"]["message"]["content"]
        .as_array()
        .expect("content")
        .iter()
        .find(|b| b["type"] == "tool_use")
        .cloned();
    assert!(block.as_ref().is_some_and(|b| b["input"].is_object()), "{last}");
    for key in ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"] {
        assert!(last["response"]["usage"][key].is_u64(), "usage.{key}");
    }
}

#[test]
fn chunk_size_does_not_change_the_output() {
    let whole = run(&["--dialect", "anthropic_messages"], &body("thinking"), &[]);
    let bytewise = run(&["--dialect", "anthropic_messages", "--chunk-size", "1"], &body("thinking"), &[]);
    assert_eq!(whole.stdout, bytewise.stdout);
}

#[test]
fn a_stream_error_exits_1_with_an_error_line() {
    let out = run(&["--dialect", "anthropic_messages"], &body("error_mid_stream"), &[]);
    assert_eq!(out.status.code(), Some(1));
    let last = lines(&out).pop().expect("a last line");
    assert_eq!(last["type"], "error");
    assert_eq!(last["error"]["type"], "provider");
    assert!(last["response"]["message"].is_object());
}

#[test]
fn bad_arguments_exit_2() {
    assert_eq!(run(&["--dialect", "klingon"], b"", &[]).status.code(), Some(2));
    assert_eq!(run(&["--chunk-size", "0", "--dialect", "ollama_chat"], b"", &[]).status.code(), Some(2));
    assert_eq!(run(&[], b"", &[]).status.code(), Some(2));
}

#[test]
fn request_mode_prints_the_request_with_the_key_redacted() {
    let context = br#"{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}"#;
    let out = run(&["--request", "--model", "openai:gpt-5-mini"], context, &[("OPENAI_API_KEY", "sk-cli-secret")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("sk-cli-secret"));
    let request: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(request["url"], "https://api.openai.com/v1/responses");
    assert!(request["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .any(|h| h[0] == "authorization" && h[1] == "<redacted>"));
    assert_eq!(request["body"]["stream"], true);
}

/// Issue 10: one 28 KB Gemini event whose `partialArgs` path has 14,000 segments aborted
/// the process (a stack overflow). It is a typed decode error now: exit 1, an error line.
#[test]
fn a_deeply_nested_partial_args_path_exits_1_with_a_typed_error() {
    let path = format!("${}", ".a".repeat(14_000));
    let chunk = serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {
        "name": "f", "partialArgs": [{"jsonPath": path, "stringValue": "x"}], "willContinue": true
    }}]}}]});
    let body = format!("data: {chunk}\r\n\r\n");
    assert!(body.len() > 28_000);
    let out = run(&["--dialect", "google_gemini"], body.as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let last = lines(&out).pop().expect("a last line");
    assert_eq!(last["type"], "error");
    assert_eq!(last["error"]["type"], "decode");
    assert!(last["error"]["message"].as_str().is_some_and(|m| m.contains("deeper than 64 levels")), "{last}");
}
