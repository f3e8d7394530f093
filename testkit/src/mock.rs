//! The mock provider: a [`MockServer`] that speaks a dialect, with the provider and model
//! that point a client at it.

use std::fmt;
use std::io;
use std::sync::Arc;

use omni_protocol::dialect::Framing;
use omni_protocol::{Auth, Dialect, Model, Provider, Quirks};

use crate::http::{MockServer, RecordedRequest, Reply};
use crate::render::{self, Rendered};
use crate::turn::{self, Answer, Kind, Turn};

/// The provider id the mock registers (`mock:<model>` names its model).
pub const PROVIDER_ID: &str = "mock";
/// The model id the mock reports.
pub const MODEL_ID: &str = "mock-model";

/// Renders an [`Answer`] in a custom wire format: its events (or lines) in order, and the
/// index of the first one that only ends the stream (what [`Turn::cut`] leaves out).
pub type Renderer = dyn Fn(&Answer) -> (Vec<String>, usize) + Send + Sync;

/// A mock LLM provider on loopback: answers each request with the next [`Turn`] pushed,
/// rendered in its dialect's documented format, and records every request. Nothing is
/// needed to run it: no key, no network. Dropping it stops it.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use omni_blocking::{Client, Dialect};
/// use omni_testkit::{MockProvider, Turn};
///
/// let mock = MockProvider::start(Dialect::OpenaiCompletions)?;
/// mock.push(Turn::text("Hello from the mock."));
/// let client = Client::builder().provider(mock.provider()).build()?;
/// let reply = client.generate_text(mock.model(), "Hi")?;
/// assert_eq!(reply.text(), "Hello from the mock.");
/// assert_eq!(mock.requests()[0].json().unwrap()["messages"][0]["content"], "Hi");
/// # Ok(())
/// # }
/// ```
pub struct MockProvider {
    server: MockServer,
    dialect: Dialect,
    key: Option<String>,
    renderer: Option<Arc<Renderer>>,
}

impl fmt::Debug for MockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockProvider")
            .field("dialect", &self.dialect)
            .field("base_url", &self.server.base_url())
            .field("keyed", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl MockProvider {
    /// A mock speaking a built-in dialect, with no key (the client sends none). A custom
    /// dialect needs [`MockProvider::custom`].
    pub fn start(dialect: Dialect) -> io::Result<Self> {
        if let Dialect::Custom(format) = dialect {
            let message = format!("the {} format has no built-in renderer: use MockProvider::custom", format.name());
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        }
        Ok(Self { server: MockServer::start(Vec::new())?, dialect, key: None, renderer: None })
    }

    /// A mock speaking your own wire format (a registered [`Dialect::Custom`]): `render`
    /// writes an [`Answer`] as your format's events, each ending with its own separator,
    /// sent with the content type of the format's framing. Your format's request path
    /// goes under [`base_url`](Self::base_url).
    pub fn custom(
        dialect: Dialect,
        render: impl Fn(&Answer) -> (Vec<String>, usize) + Send + Sync + 'static,
    ) -> io::Result<Self> {
        Ok(Self { server: MockServer::start(Vec::new())?, dialect, key: None, renderer: Some(Arc::new(render)) })
    }

    /// Requires `key`, sent the way the dialect's provider documents (`x-api-key`,
    /// `authorization: Bearer`, `x-goog-api-key`): give the client the same key for
    /// [`PROVIDER_ID`], and check it with [`RecordedRequest::header`] or
    /// [`MockProvider::sent_key`]. Ollama takes none.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Appends `turn` to the script: the next request without a turn gets it. Once the
    /// script runs out, requests get a 500 saying so.
    pub fn push(&self, turn: Turn) -> &Self {
        self.server.push_replies([self.reply(turn)]);
        self
    }

    /// The turn as the HTTP reply the server sends.
    fn reply(&self, turn: Turn) -> Reply {
        let Turn { kind, delivery } = turn;
        match kind {
            Kind::Answer(answer) => {
                let rendered = match &self.renderer {
                    Some(render) => {
                        let (events, complete) = render(&answer);
                        let content_type = match self.dialect.framing() {
                            Framing::Sse => "text/event-stream",
                            Framing::Ndjson => "application/x-ndjson",
                            Framing::Json => "application/json",
                        };
                        Some(Rendered { content_type, events, complete })
                    }
                    None => render::render(self.dialect, &answer, MODEL_ID),
                };
                match rendered {
                    Some(r) => turn::streamed(r.content_type, &r.events, r.complete, answer.ending, delivery),
                    None => Reply::error(500, &[], r#"{"error":{"message":"no renderer for this dialect"}}"#),
                }
            }
            Kind::Error { status, message, retry_after } => {
                let body = render::error_body(self.dialect, status, &message).to_string();
                let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
                if let Some(seconds) = retry_after {
                    headers.push(("retry-after".into(), seconds.to_string()));
                }
                Reply::Http { status, headers, body: turn::paced(&[body], delivery) }
            }
            Kind::Body { content_type, bytes } => {
                let mut reply = Reply::stream(&bytes, delivery.chunk_bytes.unwrap_or(bytes.len().max(1)), delivery.gap);
                if let Reply::Http { headers, .. } = &mut reply {
                    *headers = vec![("content-type".into(), content_type)];
                }
                reply
            }
            Kind::Events { content_type, events } => {
                turn::streamed(&content_type, &events, events.len(), turn::Ending::Complete, delivery)
            }
            Kind::Http(reply) => reply,
        }
    }

    /// The provider to register on a client (`ClientBuilder::provider`): id
    /// [`PROVIDER_ID`], this mock's dialect and base URL.
    pub fn provider(&self) -> Provider {
        Provider {
            id: PROVIDER_ID.into(),
            name: format!("mock ({})", self.dialect.name()),
            base_url: self.base_url(),
            dialect: self.dialect,
            auth: self.auth(),
            api_key_env: None,
            headers: Vec::new(),
            secret_headers: Vec::new(),
            quirks: Quirks::default(),
            hooks: Default::default(),
            tool_protocol: None,
        }
    }

    /// The mock's model ([`MODEL_ID`] on [`PROVIDER_ID`]), to pass to a call.
    pub fn model(&self) -> Model {
        let mut model = Model::new(PROVIDER_ID, MODEL_ID, self.dialect);
        model.max_output_tokens = 1024;
        model
    }

    /// The API root requests go to (the dialect's path, e.g. `…/v1`, under the server).
    pub fn base_url(&self) -> String {
        let server = self.server.base_url();
        match self.dialect {
            Dialect::GoogleGemini => format!("{server}/v1beta"),
            Dialect::OllamaChat => server,
            _ => format!("{server}/v1"),
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }

    /// Whether every request so far carried the key given to [`with_key`](Self::with_key)
    /// where the dialect puts it (true when the mock has no key and none was sent).
    pub fn sent_key(&self) -> bool {
        let expected = self.key.as_ref().and_then(|key| match self.auth() {
            // The mock never puts the key in the query.
            Auth::None | Auth::Query { .. } => None,
            Auth::Bearer => Some(("authorization".to_string(), format!("Bearer {key}"))),
            Auth::Header { name } => Some((name, key.clone())),
        });
        self.requests().iter().all(|request| match &expected {
            Some((name, value)) => request.header(name) == Some(value.as_str()),
            None => request.header("authorization").is_none() && request.header("x-api-key").is_none(),
        })
    }

    /// How the key goes to the mock: the way the dialect's provider documents it, none
    /// without a key (and none for Ollama, which takes none).
    fn auth(&self) -> Auth {
        match (&self.key, self.dialect) {
            (None, _) | (_, Dialect::OllamaChat) => Auth::None,
            (Some(_), Dialect::AnthropicMessages) => Auth::Header { name: "x-api-key".into() },
            (Some(_), Dialect::GoogleGemini) => Auth::Header { name: "x-goog-api-key".into() },
            (Some(_), _) => Auth::Bearer,
        }
    }
}
