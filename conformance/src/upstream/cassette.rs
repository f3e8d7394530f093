//! YAML cassettes: vcrpy (pydantic-ai), go-vcr v2 (fantasy) and httpmock (rig).
//!
//! The three are told apart by shape, not by file name:
//!
//! ```text
//!  interactions[].response.body.string      vcrpy      status.code, headers {name: [values]}
//!  interactions[].response.body (a string)  go-vcr v2  code,        headers {name: [values]}
//!  when: / then: (one YAML document a turn) httpmock   then.status, then.header [{name, value}]
//! ```
//!
//! Bodies are YAML strings (block scalars or double-quoted with escapes); the YAML parser
//! turns them back into exactly the bytes that were recorded.

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use serde_json::Value;

use super::{check_streaming, ContainerFormat, Corpus, FileContext, LoadError, Response, Skipped};

pub(super) fn load(file: &FileContext, corpus: &mut Corpus) -> Result<(), LoadError> {
    let docs = Yaml::load_from_str(file.text()?).map_err(|e| file.malformed(format!("invalid YAML: {e}")))?;
    let first = docs.first().ok_or_else(|| file.malformed("empty YAML"))?;
    if let Some(interactions) = get(first, "interactions") {
        let Yaml::Sequence(interactions) = interactions else {
            return Err(file.malformed("`interactions` is not a list"));
        };
        for (i, interaction) in interactions.iter().enumerate() {
            let (format, url, response) = vcr_interaction(interaction).map_err(|e| interaction_error(file, i, e))?;
            push(file, corpus, i, format, &url, response);
        }
        return Ok(());
    }
    for (i, doc) in docs.iter().enumerate() {
        let (url, response) = httpmock_document(doc).map_err(|e| interaction_error(file, i, e))?;
        push(file, corpus, i, ContainerFormat::HttpmockCassette, &url, response);
    }
    Ok(())
}

fn push(file: &FileContext, corpus: &mut Corpus, i: usize, format: ContainerFormat, url: &str, response: Response) {
    match check_streaming(response.request_body.as_ref(), url, &response, file.dialect) {
        Ok(()) => corpus.recordings.push(file.recording(i, format, response)),
        Err(reason) => corpus.skipped.push(Skipped { file: file.rel.clone(), interaction: i, reason }),
    }
}

fn interaction_error(file: &FileContext, i: usize, reason: String) -> LoadError {
    file.malformed(format!("interaction {i}: {reason}"))
}

/// A vcrpy or go-vcr interaction: its format, request URL and response.
fn vcr_interaction(node: &Yaml<'_>) -> Result<(ContainerFormat, String, Response), String> {
    let request = get(node, "request").ok_or("no `request`")?;
    let response = get(node, "response").ok_or("no `response`")?;
    let url = get(request, "uri").or_else(|| get(request, "url")).and_then(text).unwrap_or_default();
    let request_body = match get(request, "parsed_body") {
        Some(parsed) => Some(to_json(parsed)?),
        None => get(request, "body").map(request_body_json).transpose()?.flatten(),
    };
    let headers = headers_map(get(response, "headers"))?;
    let body_node = get(response, "body").ok_or("response has no `body`")?;
    let (format, body, status) = match get(body_node, "string") {
        // vcrpy: body.string, status.code
        Some(string) => {
            let status = get(response, "status").and_then(|s| get(s, "code"));
            (ContainerFormat::VcrpyCassette, string, status)
        }
        // go-vcr v2: body is the string, code is the status
        None => (ContainerFormat::GoVcrCassette, body_node, get(response, "code")),
    };
    let body = string_bytes(body).ok_or("response body is not a string")?;
    let status = status.and_then(status_code).ok_or("no numeric response status")?;
    Ok((format, url, Response { status, headers, body, request_body }))
}

/// An httpmock document: `when` (the request) and `then` (the response).
fn httpmock_document(doc: &Yaml<'_>) -> Result<(String, Response), String> {
    let when = get(doc, "when").ok_or("neither `interactions` nor `when`")?;
    let then = get(doc, "then").ok_or("no `then`")?;
    let url = get(when, "path").and_then(text).unwrap_or_default();
    let request_body = match get(when, "json_body") {
        Some(json) => Some(to_json(json)?),
        None => get(when, "body").map(request_body_json).transpose()?.flatten(),
    };
    let status = get(then, "status").and_then(status_code).ok_or("no numeric `then.status`")?;
    let mut headers = Vec::new();
    if let Some(list) = get(then, "header") {
        let Yaml::Sequence(list) = list else { return Err("`then.header` is not a list".into()) };
        for h in list {
            let name = get(h, "name").and_then(text).ok_or("header without a name")?;
            let value = get(h, "value").and_then(text).ok_or("header without a value")?;
            headers.push((name, value));
        }
    }
    let body = match get(then, "body") {
        Some(b) => string_bytes(b).ok_or("`then.body` is not a string")?,
        None => Vec::new(),
    };
    Ok((url, Response { status, headers, body, request_body }))
}

/// `{name: [values]}` (or `{name: value}`) as a flat list of pairs, in recorded order.
fn headers_map(node: Option<&Yaml<'_>>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let Some(node) = node else { return Ok(out) };
    let Yaml::Mapping(map) = node else { return Err("`headers` is not a mapping".into()) };
    for (k, v) in map {
        let name = text(k).ok_or("header name is not a string")?;
        match v {
            Yaml::Sequence(values) => {
                for value in values {
                    out.push((name.clone(), text(value).ok_or("header value is not a scalar")?));
                }
            }
            other => out.push((name.clone(), text(other).ok_or("header value is not a scalar")?)),
        }
    }
    Ok(out)
}

/// A recorded request body string as JSON: `None` when empty, an error when not JSON.
fn request_body_json(node: &Yaml<'_>) -> Result<Option<Value>, String> {
    let Some(s) = text(node) else { return Ok(None) };
    if s.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&s).map(Some).map_err(|e| format!("request body is not JSON: {e}"))
}

fn get<'a, 'i>(node: &'a Yaml<'i>, key: &str) -> Option<&'a Yaml<'i>> {
    let Yaml::Mapping(map) = node else { return None };
    map.iter().find(|(k, _)| matches!(k, Yaml::Value(Scalar::String(s)) if s == key)).map(|(_, v)| v)
}

/// A string scalar's bytes; `null` (an absent body) is empty.
fn string_bytes(node: &Yaml<'_>) -> Option<Vec<u8>> {
    match node {
        Yaml::Value(Scalar::String(s)) => Some(s.as_bytes().to_vec()),
        Yaml::Value(Scalar::Null) => Some(Vec::new()),
        _ => None,
    }
}

/// Any scalar as text (header values such as `2023-06-01` or `0` may resolve to numbers).
fn text(node: &Yaml<'_>) -> Option<String> {
    match node {
        Yaml::Value(Scalar::String(s)) => Some(s.to_string()),
        Yaml::Value(Scalar::Integer(i)) => Some(i.to_string()),
        Yaml::Value(Scalar::FloatingPoint(f)) => Some(f.to_string()),
        Yaml::Value(Scalar::Boolean(b)) => Some(b.to_string()),
        Yaml::Representation(s, _, _) => Some(s.to_string()),
        _ => None,
    }
}

fn status_code(node: &Yaml<'_>) -> Option<u16> {
    match node {
        Yaml::Value(Scalar::Integer(i)) => u16::try_from(*i).ok(),
        Yaml::Value(Scalar::String(s)) => s.split_whitespace().next()?.parse().ok(),
        _ => None,
    }
}

/// A YAML tree as JSON (vcrpy's `parsed_body`).
fn to_json(node: &Yaml<'_>) -> Result<Value, String> {
    Ok(match node {
        Yaml::Value(Scalar::Null) => Value::Null,
        Yaml::Value(Scalar::Boolean(b)) => Value::Bool(*b),
        Yaml::Value(Scalar::Integer(i)) => Value::from(*i),
        Yaml::Value(Scalar::FloatingPoint(f)) => {
            serde_json::Number::from_f64(f.into_inner()).map(Value::Number).ok_or("non-finite number")?
        }
        Yaml::Value(Scalar::String(s)) => Value::String(s.to_string()),
        Yaml::Sequence(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Mapping(map) => {
            let mut object = serde_json::Map::new();
            for (k, v) in map {
                object.insert(text(k).ok_or("mapping key is not a scalar")?, to_json(v)?);
            }
            Value::Object(object)
        }
        other => return Err(format!("unsupported YAML node in a JSON body: {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use omni_protocol::Dialect;

    use super::*;

    fn load_str(yaml: &str) -> Result<Corpus, LoadError> {
        let file =
            FileContext { rel: "x/t.yaml".into(), dialect: Dialect::GoogleGemini, bytes: yaml.as_bytes().to_vec() };
        let mut corpus = Corpus::default();
        load(&file, &mut corpus).map(|()| corpus)
    }

    #[test]
    fn go_vcr_double_quoted_body_keeps_crlf() {
        let yaml = "version: 2\ninteractions:\n- request:\n    body: '{\"a\":1}'\n    url: https://h/v1beta/m:streamGenerateContent?alt=sse\n  response:\n    body: \"data: {}\\r\\n\\r\\n\"\n    headers:\n      Content-Type:\n      - text/event-stream\n    code: 200\n";
        let corpus = load_str(yaml).unwrap();
        let r = &corpus.recordings[0];
        assert_eq!(
            (r.format, r.status, r.body.as_slice()),
            (ContainerFormat::GoVcrCassette, 200, &b"data: {}\r\n\r\n"[..])
        );
        assert_eq!(r.headers, vec![("Content-Type".to_string(), "text/event-stream".to_string())]);
        assert_eq!(r.request_body, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn vcrpy_block_body_and_parsed_request() {
        let yaml = "interactions:\n- request:\n    parsed_body:\n      stream: true\n      n: 2\n    uri: https://h/x\n  response:\n    body:\n      string: |+\n        data: {}\n\n    status:\n      code: 200\n      message: OK\nversion: 1\n";
        let r = &load_str(yaml).unwrap().recordings[0];
        assert_eq!((r.format, r.body.as_slice()), (ContainerFormat::VcrpyCassette, &b"data: {}\n\n"[..]));
        assert_eq!(r.request_body, Some(serde_json::json!({"stream": true, "n": 2})));
    }

    #[test]
    fn httpmock_documents_are_turns() {
        let doc = "when:\n  path: /api/chat\n  body: '{\"stream\":true}'\nthen:\n  status: 200\n  header:\n  - name: content-type\n    value: application/x-ndjson\n  body: |\n    {\"done\":true}\n";
        let corpus = load_str(&format!("{doc}---\n{doc}")).unwrap();
        assert_eq!(corpus.recordings.len(), 2);
        assert_eq!(corpus.recordings[1].interaction, 1);
        assert_eq!(corpus.recordings[1].body, b"{\"done\":true}\n");
    }

    #[test]
    fn non_streaming_interactions_are_skipped_with_a_reason() {
        let yaml = "version: 2\ninteractions:\n- request:\n    body: '{\"stream\":false}'\n    url: https://h/v1/messages\n  response:\n    body: '{}'\n    headers:\n      Content-Type:\n      - application/json\n    code: 200\n";
        let corpus = load_str(yaml).unwrap();
        assert!(corpus.recordings.is_empty());
        assert_eq!(corpus.skipped.len(), 1);
    }

    #[test]
    fn malformed_cassettes_name_the_file() {
        for bad in ["interactions: 3\n", "interactions:\n- request: {}\n", "when: {}\n", "a: [\n"] {
            let err = load_str(bad).unwrap_err().to_string();
            assert!(err.starts_with("x/t.yaml"), "{err}");
        }
    }
}
