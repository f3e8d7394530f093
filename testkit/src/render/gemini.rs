//! Gemini `streamGenerateContent?alt=sse` chunks
//! (<https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>):
//! one `GenerateContentResponse` per event, CRLF line ends as Google sends them.

use serde_json::{json, Value};

use crate::turn::{Answer, Block, Finish};

pub(super) fn render(answer: &Answer, model: &str) -> (Vec<String>, usize) {
    // One chunk per text or thinking piece; a turn's function calls come whole, together.
    let mut groups: Vec<Vec<Value>> = Vec::new();
    let mut calls = Vec::new();
    for block in &answer.blocks {
        match block {
            Block::Text(pieces) => groups.extend(pieces.iter().map(|p| vec![json!({"text": p})])),
            Block::Thinking(pieces) => groups.extend(pieces.iter().map(|p| vec![json!({"text": p, "thought": true})])),
            Block::Call(call) => calls.push(json!({"functionCall": {"name": call.name, "args": call.arguments}})),
        }
    }
    if !calls.is_empty() {
        groups.push(calls);
    }
    if groups.is_empty() {
        groups.push(vec![json!({"text": ""})]);
    }
    let (input, output) = answer.usage;
    let last = groups.len() - 1;
    let mut out = Vec::new();
    for (i, parts) in groups.into_iter().enumerate() {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        let mut usage = json!({"promptTokenCount": input, "totalTokenCount": input,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": input}]});
        if i == last {
            candidate["finishReason"] = match answer.finish {
                Finish::Natural => "STOP",
                Finish::Length => "MAX_TOKENS",
            }
            .into();
            usage["candidatesTokenCount"] = output.into();
            usage["totalTokenCount"] = (input + output).into();
        }
        let chunk = json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": "mockResponse01"});
        out.push(format!("data: {chunk}\r\n\r\n"));
    }
    // Gemini has no end event: the last chunk, with its finish reason, ends the stream.
    let complete = out.len() - 1;
    (out, complete)
}
