//! `ollama_chat`: Ollama's native chat API (`POST /api/chat`), streamed as NDJSON.
//!
//! One JSON object per line. Text and reasoning arrive as pieces in
//! `message.content` and `message.thinking`, tool calls arrive whole (arguments as a
//! JSON object), and the last line says `"done": true` with the stop reason and the
//! token counts. Errors are `{"error": "…"}`, both as an HTTP error body and as a line
//! inside a stream that has already started.
//!
//! - [`request`] builds the request body from the context and options.
//! - [`stream`] turns the lines into deltas.

mod request;
mod stream;

pub(crate) use request::build_request;
pub(super) use stream::StreamState;

/// The dialect's name, compared with [`Message::origin`](crate::data::message::Message::origin) before
/// reasoning text is sent back.
pub(crate) const NAME: &str = "ollama_chat";

#[cfg(test)]
mod tests {
    use crate::data::error::ProviderErrorKind;
    use crate::wire::dialect::Dialect;

    #[test]
    fn http_error_bodies_are_classified() {
        let cases: [(u16, &str, ProviderErrorKind, &str); 5] = [
            (
                404,
                r#"{"error":"model \"llama3.2\" not found, try pulling it first"}"#,
                ProviderErrorKind::NotFound,
                "model \"llama3.2\" not found, try pulling it first",
            ),
            (400, r#"{"error":"invalid message format"}"#, ProviderErrorKind::InvalidRequest, "invalid message format"),
            (
                400,
                r#"{"error":"the input length exceeds the context length"}"#,
                ProviderErrorKind::ContextTooLong,
                "the input length exceeds the context length",
            ),
            (429, r#"{"error":"too many requests"}"#, ProviderErrorKind::RateLimited, "too many requests"),
            (
                500,
                r#"{"error":"model runner has unexpectedly stopped"}"#,
                ProviderErrorKind::Server,
                "model runner has unexpectedly stopped",
            ),
        ];
        for (status, body, kind, message) in cases {
            let err = Dialect::OllamaChat.parse_error(status, [], body.as_bytes());
            assert_eq!(err.kind, kind, "{body}");
            assert_eq!(err.message, message);
            assert_eq!(err.status, Some(status));
        }
    }

    #[test]
    fn llama_server_404_on_api_chat_is_not_found() {
        // Recorded from llama-server, which has no Ollama API (local-peers corpus).
        let body = br#"{"error":{"message":"File Not Found","type":"not_found_error","code":404}}"#;
        let err = Dialect::OllamaChat.parse_error(404, [("Content-Type", "application/json")], body);
        assert_eq!(err.kind, ProviderErrorKind::NotFound);
        assert_eq!(err.message, "File Not Found");
        assert_eq!(err.code.as_deref(), Some("not_found_error"));
    }
}
