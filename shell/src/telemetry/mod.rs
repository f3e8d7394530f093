//! Spans and metrics after the OpenTelemetry GenAI semantic conventions, written once for
//! every driver.
//!
//! The machines say what happens, as data ([`Observation`](omni_protocol::observe::Observation),
//! an effect like any other); this module turns it into `tracing` spans and events, and
//! into measurements for an application's [`Metrics`]. The tool runs' spans are made
//! where the runs are (the executor), so a tool's own `tracing` output nests under its
//! `execute_tool` span. Nothing is built when nobody listens: a call observes only when a
//! `tracing` subscriber takes omni's spans (target `omni`, level `INFO`) or the client
//! has [`Metrics`].
//!
//! | span (`otel.name`) | when | parent |
//! |---|---|---|
//! | `invoke_agent` | an agent's or session's turn | the span current when the agent was built |
//! | `chat {model}` | one step's request (retries and redirects are events on it) | the turn, else the span current when the call was started |
//! | `execute_tool {tool}` | one tool run | the turn, else as `chat` |
//!
//! The attributes are listed in the README ("Observability"). Message content
//! (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`,
//! `gen_ai.tool.definitions`, tool arguments and results) is recorded only with
//! [`ClientBuilder::capture_content`](crate::ClientBuilder::capture_content); keys and
//! secret headers are never recorded, whatever is captured: no field holds a URL, a
//! header or a request body.

mod observer;
mod spans;

pub(crate) use observer::Observer;

use std::fmt;
use std::sync::Arc;

use omni_protocol::observe::Observe;

/// The instrument names of the conventions' client metrics.
pub mod instruments {
    /// `gen_ai.client.token.usage`: a histogram of tokens per inference, unit `{token}`,
    /// with `gen_ai.token.type` (`input` or `output`).
    pub const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// `gen_ai.client.operation.duration`: a histogram of an inference's duration, unit `s`.
    pub const OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// `gen_ai.client.operation.time_to_first_chunk`: a histogram, unit `s`, from the
    /// request to its first chunk.
    pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
}

/// Where an application takes omni's measurements: connect it to the OpenTelemetry SDK's
/// histograms (named in [`instruments`]) or to any metrics crate. Called on the loop that
/// drives the call, so it should be quick (record and return).
pub trait Metrics: Send + Sync {
    /// `gen_ai.client.token.usage`: `tokens` of `token_type` (`input`, cached tokens
    /// included, or `output`) for one inference.
    fn token_usage(&self, tokens: u64, token_type: TokenType, attributes: &MetricAttributes);
    /// `gen_ai.client.operation.duration`: one inference, from its request to its end
    /// (retries included), in seconds.
    fn operation_duration(&self, seconds: f64, attributes: &MetricAttributes);
    /// `gen_ai.client.operation.time_to_first_chunk`, in seconds.
    fn time_to_first_chunk(&self, seconds: f64, attributes: &MetricAttributes);
}

/// `gen_ai.token.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    /// `input`.
    Input,
    /// `output`.
    Output,
}

impl TokenType {
    /// The attribute's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
        }
    }
}

/// The attributes of a measurement, as the conventions name them.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct MetricAttributes {
    /// `gen_ai.operation.name` (`chat`).
    pub operation_name: &'static str,
    /// `gen_ai.provider.name`.
    pub provider_name: String,
    /// `gen_ai.request.model`.
    pub request_model: String,
    /// `gen_ai.response.model`, once known.
    pub response_model: Option<String>,
    /// `server.address`.
    pub server_address: Option<String>,
    /// `server.port`.
    pub server_port: Option<u16>,
    /// `error.type`, for a failed inference.
    pub error_type: Option<&'static str>,
}

/// One attribute's value, for [`MetricAttributes::pairs`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AttributeValue<'a> {
    /// A string.
    Str(&'a str),
    /// An integer.
    Int(i64),
}

impl MetricAttributes {
    /// Every attribute that has a value, by its conventions' name: what an exporter's
    /// attribute list is made from.
    pub fn pairs(&self) -> Vec<(&'static str, AttributeValue<'_>)> {
        let mut pairs = vec![
            ("gen_ai.operation.name", AttributeValue::Str(self.operation_name)),
            ("gen_ai.provider.name", AttributeValue::Str(&self.provider_name)),
            ("gen_ai.request.model", AttributeValue::Str(&self.request_model)),
        ];
        if let Some(model) = &self.response_model {
            pairs.push(("gen_ai.response.model", AttributeValue::Str(model)));
        }
        if let Some(address) = &self.server_address {
            pairs.push(("server.address", AttributeValue::Str(address)));
        }
        if let Some(port) = self.server_port {
            pairs.push(("server.port", AttributeValue::Int(i64::from(port))));
        }
        if let Some(error) = self.error_type {
            pairs.push(("error.type", AttributeValue::Str(error)));
        }
        pairs
    }
}

/// A client's telemetry settings ([`ClientBuilder::capture_content`](crate::ClientBuilder::capture_content),
/// [`ClientBuilder::metrics`](crate::ClientBuilder::metrics)): whether content is
/// captured, and where measurements go.
#[derive(Clone, Default)]
pub struct Telemetry {
    /// Message content on the spans (opt-in).
    pub(crate) capture_content: bool,
    pub(crate) metrics: Option<Arc<dyn Metrics>>,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry")
            .field("capture_content", &self.capture_content)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl Telemetry {
    /// What a machine started now should tell: nothing unless someone listens.
    pub(crate) fn observe(&self) -> Observe {
        let spans = spans::enabled();
        match (spans, self.metrics.is_some()) {
            (false, false) => Observe::Off,
            (true, _) if self.capture_content => Observe::Content,
            _ => Observe::Metadata,
        }
    }

    /// The observer of a loop started now, under the current span (`conversation_id`: a
    /// session's id); `None` when nothing is observed.
    pub(crate) fn observer(&self, conversation_id: Option<String>) -> Option<Box<Observer>> {
        let observe = self.observe();
        observe.is_on().then(|| {
            Box::new(Observer::new(
                tracing::Span::current(),
                conversation_id,
                self.metrics.clone(),
                observe == Observe::Content,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    impl Metrics for Nothing {
        fn token_usage(&self, _: u64, _: TokenType, _: &MetricAttributes) {}
        fn operation_duration(&self, _: f64, _: &MetricAttributes) {}
        fn time_to_first_chunk(&self, _: f64, _: &MetricAttributes) {}
    }

    /// No subscriber in this test's process: nothing observed unless metrics are set, and
    /// content only ever goes to spans.
    #[test]
    fn a_call_observes_only_what_someone_takes() {
        let off = Telemetry::default();
        assert_eq!(off.observe(), Observe::Off);
        assert!(off.observer(None).is_none());
        let content_alone = Telemetry { capture_content: true, metrics: None };
        assert_eq!(content_alone.observe(), Observe::Off);
        let metrics = Telemetry { capture_content: true, metrics: Some(Arc::new(Nothing)) };
        assert_eq!(metrics.observe(), Observe::Metadata, "content goes to spans only, and none listens");
        assert_eq!(metrics.observer(None).map(|o| o.level()), Some(Observe::Metadata));
    }

    #[test]
    fn attributes_are_listed_by_their_conventions_names() {
        let attributes = MetricAttributes {
            operation_name: "chat",
            provider_name: "openai".into(),
            request_model: "gpt-4o".into(),
            response_model: Some("gpt-4o-2024-08-06".into()),
            server_address: Some("api.openai.com".into()),
            server_port: Some(443),
            error_type: None,
        };
        let names: Vec<&str> = attributes.pairs().iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "gen_ai.operation.name",
                "gen_ai.provider.name",
                "gen_ai.request.model",
                "gen_ai.response.model",
                "server.address",
                "server.port"
            ]
        );
        assert!(attributes.pairs().contains(&("server.port", AttributeValue::Int(443))));
    }
}
