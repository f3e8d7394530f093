//! The spans themselves: each declared with every attribute it may ever carry, as
//! `tracing` drops a field recorded later that was not declared when the span was made
//! (a mistake peers make). Unknown values start `Empty` and are recorded when known.
//! `tracing` names a span once per call site, so the conventions' name
//! (`chat gpt-4o`) is the `otel.name` field, which `tracing-opentelemetry` exports as
//! the span's name; the `tracing` name is the operation (`chat`).

use omni_protocol::observe::InferenceStart;
use omni_protocol::ToolUse;
use tracing::field::Empty;
use tracing::{Level, Span};

/// The `tracing` target of every span and event omni makes.
pub(crate) const TARGET: &str = "omni";

/// Whether a subscriber takes omni's spans.
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: TARGET, Level::INFO)
}

/// A `chat` span for `start`, under `parent`.
pub(crate) fn chat(parent: &Span, start: &InferenceStart, conversation: Option<&str>) -> Span {
    let stop = (!start.stop_sequences.is_empty()).then(|| json_list(&start.stop_sequences));
    tracing::info_span!(
        target: TARGET,
        parent: parent,
        "chat",
        otel.name = %format_args!("{} {}", start.operation_name, start.request_model),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = start.operation_name,
        gen_ai.provider.name = %start.provider_name,
        gen_ai.request.model = %start.request_model,
        gen_ai.request.max_tokens = start.max_tokens,
        gen_ai.request.temperature = start.temperature,
        gen_ai.request.top_p = start.top_p,
        gen_ai.request.top_k = start.top_k,
        gen_ai.request.frequency_penalty = start.frequency_penalty,
        gen_ai.request.presence_penalty = start.presence_penalty,
        gen_ai.request.seed = start.seed,
        gen_ai.request.stop_sequences = stop,
        gen_ai.conversation.id = conversation,
        server.address = start.server_address.as_deref(),
        server.port = start.server_port,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.response.time_to_first_chunk = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.usage.reasoning.output_tokens = Empty,
        error.type = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.tool.definitions = Empty,
    )
}

/// An `invoke_agent` span, under `parent`; the provider and model are recorded from the
/// turn's first inference.
pub(crate) fn invoke_agent(parent: &Span, conversation: Option<&str>) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: parent,
        "invoke_agent",
        otel.name = "invoke_agent",
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = Empty,
        gen_ai.request.model = Empty,
        gen_ai.conversation.id = conversation,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    )
}

/// An `execute_tool` span for `call`, under `parent`.
pub(crate) fn execute_tool(parent: &Span, call: &ToolUse, conversation: Option<&str>) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: parent,
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        gen_ai.conversation.id = conversation,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    )
}

/// Marks `span` failed with `error_type`.
pub(crate) fn fail(span: &Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

/// A list attribute, as the JSON array text an exporter shows.
pub(crate) fn json_list<S: AsRef<str>>(items: &[S]) -> String {
    serde_json::Value::Array(items.iter().map(|s| serde_json::Value::from(s.as_ref())).collect()).to_string()
}
