//! One loop's telemetry: the spans open now (a turn, an inference, tool runs), fed the
//! machine's observations and the executor's tool runs, with the loop's clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use omni_protocol::generate::{ToolOutcome, ToolRunId};
use omni_protocol::observe::{InferenceEnd, InferenceStart, Observation, Observe};
use omni_protocol::{ToolResultContent, ToolUse};
use tracing::{Level, Span};

use super::spans::{self, TARGET};
use super::{MetricAttributes, Metrics, TokenType};

/// The telemetry of one loop (a call's, an agent's, a session's).
pub(crate) struct Observer {
    /// Where spans without a turn go: the span current when the loop was started.
    parent: Span,
    conversation_id: Option<String>,
    metrics: Option<Arc<dyn Metrics>>,
    content: bool,
    turn: Option<Turn>,
    inference: Option<Inference>,
    tools: BTreeMap<ToolRunId, Span>,
}

struct Turn {
    span: Span,
    /// Whether the provider and model are recorded (from the turn's first inference).
    described: bool,
    input_tokens: u64,
    output_tokens: u64,
}

struct Inference {
    span: Span,
    started: Instant,
    /// The measurements' attributes, when the client has [`Metrics`].
    attributes: Option<MetricAttributes>,
}

impl Observer {
    pub(crate) fn new(
        parent: Span,
        conversation_id: Option<String>,
        metrics: Option<Arc<dyn Metrics>>,
        content: bool,
    ) -> Self {
        let (turn, inference, tools) = (None, None, BTreeMap::new());
        Self { parent, conversation_id, metrics, content, turn, inference, tools }
    }

    /// Later turns (and the spans outside them) go under `parent`, unless it is no span
    /// (a prompt sent outside any): then under the span current when the loop started.
    pub(crate) fn trace_under(&mut self, parent: Span) {
        if !parent.is_disabled() {
            self.parent = parent;
        }
    }

    /// What the loop's machine is to tell.
    pub(crate) fn level(&self) -> Observe {
        if self.content {
            Observe::Content
        } else {
            Observe::Metadata
        }
    }

    /// The span new work goes under: the turn's, else the loop's parent.
    fn current(&self) -> &Span {
        self.turn.as_ref().map_or(&self.parent, |turn| &turn.span)
    }

    /// Acts on one of the machine's observations, at `now`.
    pub(crate) fn observe(&mut self, observation: Observation, now: Instant) {
        match observation {
            Observation::InferenceStarted(start) => self.inference_started(&start, now),
            Observation::FirstChunk => {
                if let Some(inference) = &self.inference {
                    let seconds = now.saturating_duration_since(inference.started).as_secs_f64();
                    inference.span.record("gen_ai.response.time_to_first_chunk", seconds);
                    if let (Some(metrics), Some(attributes)) = (&self.metrics, &inference.attributes) {
                        metrics.time_to_first_chunk(seconds, attributes);
                    }
                }
            }
            Observation::Redirected { status } => {
                if let Some(inference) = &self.inference {
                    let span = &inference.span;
                    tracing::event!(target: TARGET, parent: span, Level::INFO, http.response.status_code = status, "redirected");
                }
            }
            Observation::Retrying { attempt, delay, error_type } => {
                if let Some(inference) = &self.inference {
                    let delay = delay.as_secs_f64();
                    tracing::event!(
                        target: TARGET,
                        parent: &inference.span,
                        Level::WARN,
                        retry.attempt = attempt,
                        retry.delay = delay,
                        error.type = error_type,
                        "retrying"
                    );
                }
            }
            Observation::InferenceEnded(end) => self.inference_ended(&end, now),
            Observation::TurnStarted => {
                let span = spans::invoke_agent(&self.parent, self.conversation_id.as_deref());
                self.turn = Some(Turn { span, described: false, input_tokens: 0, output_tokens: 0 });
            }
            Observation::TurnEnded { error_type } => {
                if let Some(turn) = self.turn.take() {
                    turn.span.record("gen_ai.usage.input_tokens", turn.input_tokens);
                    turn.span.record("gen_ai.usage.output_tokens", turn.output_tokens);
                    if let Some(error) = error_type {
                        spans::fail(&turn.span, error);
                    }
                }
            }
            // Observations a newer core makes that this shell does not show.
            _ => {}
        }
    }

    fn inference_started(&mut self, start: &InferenceStart, now: Instant) {
        let span = spans::chat(self.current(), start, self.conversation_id.as_deref());
        if let Some(content) = &start.content {
            span.record("gen_ai.input.messages", content.input_messages.as_str());
            if let Some(system) = &content.system_instructions {
                span.record("gen_ai.system_instructions", system.as_str());
            }
            if let Some(tools) = &content.tool_definitions {
                span.record("gen_ai.tool.definitions", tools.as_str());
            }
        }
        if let Some(turn) = self.turn.as_mut().filter(|turn| !turn.described) {
            turn.span.record("gen_ai.provider.name", start.provider_name.as_str());
            turn.span.record("gen_ai.request.model", start.request_model.as_str());
            turn.described = true;
        }
        let attributes = self.metrics.is_some().then(|| MetricAttributes {
            operation_name: start.operation_name,
            provider_name: start.provider_name.clone(),
            request_model: start.request_model.clone(),
            response_model: None,
            server_address: start.server_address.clone(),
            server_port: start.server_port,
            error_type: None,
        });
        self.inference = Some(Inference { span, started: now, attributes });
    }

    fn inference_ended(&mut self, end: &InferenceEnd, now: Instant) {
        let Some(mut inference) = self.inference.take() else { return };
        let span = &inference.span;
        if let Some(id) = &end.response_id {
            span.record("gen_ai.response.id", id.as_str());
        }
        if let Some(model) = &end.response_model {
            span.record("gen_ai.response.model", model.as_str());
        }
        if !end.finish_reasons.is_empty() {
            span.record("gen_ai.response.finish_reasons", spans::json_list(&end.finish_reasons));
        }
        if let Some(usage) = end.usage {
            let input = end.input_tokens().unwrap_or_default();
            span.record("gen_ai.usage.input_tokens", input);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            span.record("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens);
            span.record("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens);
            span.record("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens);
            if let Some(turn) = &mut self.turn {
                turn.input_tokens = turn.input_tokens.saturating_add(input);
                turn.output_tokens = turn.output_tokens.saturating_add(usage.output_tokens);
            }
        }
        if let Some(output) = &end.output_messages {
            span.record("gen_ai.output.messages", output.as_str());
        }
        if let Some(error) = end.error_type {
            spans::fail(span, error);
        }
        if let (Some(metrics), Some(attributes)) = (&self.metrics, &mut inference.attributes) {
            attributes.response_model.clone_from(&end.response_model);
            attributes.error_type = end.error_type;
            let seconds = now.saturating_duration_since(inference.started).as_secs_f64();
            metrics.operation_duration(seconds, attributes);
            if let Some(usage) = end.usage {
                metrics.token_usage(end.input_tokens().unwrap_or_default(), TokenType::Input, attributes);
                metrics.token_usage(usage.output_tokens, TokenType::Output, attributes);
            }
        }
    }

    /// A tool run starts: its span, which the run's future is polled in.
    pub(crate) fn tool_started(&mut self, id: ToolRunId, call: &ToolUse) -> Span {
        let span = spans::execute_tool(self.current(), call, self.conversation_id.as_deref());
        if self.content {
            span.record("gen_ai.tool.call.arguments", call.input.to_string());
        }
        self.tools.insert(id, span.clone());
        span
    }

    /// A tool run ended with `outcome` (`None`: it was cancelled).
    pub(crate) fn tool_finished(&mut self, id: ToolRunId, outcome: Option<&ToolOutcome>) {
        let Some(span) = self.tools.remove(&id) else { return };
        let error = match outcome {
            None => Some("cancelled"),
            Some(ToolOutcome::Ok(content)) => {
                if self.content {
                    span.record("gen_ai.tool.call.result", result_text(content).as_str());
                }
                None
            }
            Some(ToolOutcome::Err(message)) => {
                if self.content {
                    span.record("gen_ai.tool.call.result", message.as_str());
                }
                Some("tool_error")
            }
            Some(ToolOutcome::Panicked(_)) => Some("tool_panicked"),
        };
        if let Some(error) = error {
            spans::fail(&span, error);
        }
    }
}

/// A tool's output as text: its text parts, an attachment by its media type.
fn result_text(content: &[ToolResultContent]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|part| match part {
            ToolResultContent::Text { text } => text.clone(),
            ToolResultContent::Attachment(a) => format!("[{}]", a.media_type),
        })
        .collect();
    parts.join("\n")
}
