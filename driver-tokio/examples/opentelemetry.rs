//! omni's spans and metrics in OpenTelemetry, offline: `tracing-opentelemetry` turns the
//! `tracing` spans omni makes (target `omni`, level INFO) into OpenTelemetry spans, and an
//! implementation of [`omni_tokio::Metrics`] records the measurements into three
//! OpenTelemetry histograms. omni-testkit's mock provider plays the model (no key, no
//! network): it answers a first 429 (a `retrying` event), then calls a tool, then
//! answers, once for a plain call and once for an agent's turn.
//!
//! The SDK's in-memory exporters stand in for a real backend: with OTLP, build the
//! providers with `opentelemetry-otlp`'s exporters instead, the rest stays the same. At
//! the end the example prints the exported spans as a tree, and the histograms.
//!
//! `cargo run -p omni-tokio --example opentelemetry`

use std::collections::HashMap;

use omni_testkit::{MockProvider, Turn};
use omni_tokio::telemetry::{instruments, AttributeValue};
use omni_tokio::{AgentEvent, Client, Dialect, MetricAttributes, Metrics, TokenType, Tool, ToolError};
use opentelemetry::metrics::{Histogram, Meter, MeterProvider as _};
use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, HistogramDataPoint, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing::{Instrument, Level};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

/// The `tracing` target of this program's own spans and events.
const APP: &str = "app";

/// The conventions' advised bucket boundaries: tokens, and seconds.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];
const SECOND_BUCKETS: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// omni's measurements into OpenTelemetry histograms named after the conventions.
struct OtelMetrics {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
    time_to_first_chunk: Histogram<f64>,
}

impl OtelMetrics {
    fn new(meter: &Meter) -> Self {
        Self {
            token_usage: meter
                .u64_histogram(instruments::TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: meter
                .f64_histogram(instruments::OPERATION_DURATION)
                .with_unit("s")
                .with_description("GenAI operation duration.")
                .with_boundaries(SECOND_BUCKETS.to_vec())
                .build(),
            time_to_first_chunk: meter
                .f64_histogram(instruments::TIME_TO_FIRST_CHUNK)
                .with_unit("s")
                .with_description("Time to receive the first chunk of the response stream.")
                .with_boundaries(SECOND_BUCKETS.to_vec())
                .build(),
        }
    }
}

/// A measurement's attributes as OpenTelemetry's.
fn key_values(attributes: &MetricAttributes) -> Vec<KeyValue> {
    let pairs = attributes.pairs().into_iter();
    pairs
        .map(|(name, value)| match value {
            AttributeValue::Str(text) => KeyValue::new(name, text.to_owned()),
            AttributeValue::Int(number) => KeyValue::new(name, number),
        })
        .collect()
}

impl Metrics for OtelMetrics {
    fn token_usage(&self, tokens: u64, token_type: TokenType, attributes: &MetricAttributes) {
        let mut attributes = key_values(attributes);
        attributes.push(KeyValue::new("gen_ai.token.type", token_type.as_str()));
        self.token_usage.record(tokens, &attributes);
    }

    fn operation_duration(&self, seconds: f64, attributes: &MetricAttributes) {
        self.operation_duration.record(seconds, &key_values(attributes));
    }

    fn time_to_first_chunk(&self, seconds: f64, attributes: &MetricAttributes) {
        self.time_to_first_chunk.record(seconds, &key_values(attributes));
    }
}

/// The tool the mock model calls; its own `tracing` output lands in its `execute_tool` span.
fn weather() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    });
    Tool::new("get_weather", "The current weather in a city.", schema, |input| async move {
        let city = input["city"].as_str().unwrap_or("nowhere").to_owned();
        tracing::info!(target: APP, city = city.as_str(), "looking up the weather");
        Ok::<_, ToolError>(format!("18°C and sunny in {city}"))
    })
}

/// One exchange as the mock plays it: a 429 (retried after 1 s), a tool call, the answer.
fn script(mock: &MockProvider) {
    mock.push(Turn::error(429, "slow down").retry_after(1));
    mock.push(Turn::tool_call("get_weather", json!({"city": "Lisbon"})).usage(180, 15));
    mock.push(Turn::text("It is 18°C and sunny in Lisbon.").usage(210, 9));
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Traces: tracing → tracing-opentelemetry → the SDK's tracer → an exporter.
    let spans = InMemorySpanExporter::default();
    let tracer_provider = SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
    let layer = tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("omni-example"));
    // omni's spans are target `omni`, level INFO; `app` is this program's.
    let filter = Targets::new().with_target("omni", Level::INFO).with_target(APP, Level::INFO);
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer.with_filter(filter)))?;

    // Metrics: omni → `OtelMetrics` → the SDK's histograms → a reader and an exporter.
    let metrics = InMemoryMetricExporter::default();
    let meter_provider =
        SdkMeterProvider::builder().with_reader(PeriodicReader::builder(metrics.clone()).build()).build();

    let mock = MockProvider::start(Dialect::OpenaiCompletions)?;
    let client = Client::builder()
        .provider(mock.provider())
        // Message content on the spans: opt-in, as it may hold what logs should not.
        .capture_content(true)
        .metrics(OtelMetrics::new(&meter_provider.meter("omni")))
        .build()?;

    // A call, inside a span of the application's: omni's spans go under the span current
    // when the call starts.
    script(&mock);
    let request = tracing::info_span!(target: APP, "handle_request", user.question = "weather in Lisbon");
    let response = async {
        let call = client.call(mock.model(), "What is the weather in Lisbon?").tool(weather());
        call.generate().await
    }
    .instrument(request)
    .await?;
    println!("call: {}", response.text());

    // An agent's turn: an `invoke_agent` span holds its steps and tool runs.
    script(&mock);
    let agent = client.agent(mock.model()).tool(weather()).start()?;
    let (_snapshot, mut events) = agent.subscribe().await?;
    agent.prompt("And the weather in Lisbon now?").await?;
    while let Some(event) = events.next_event().await {
        if let AgentEvent::Turn { messages, .. } = event {
            println!("agent: {}", messages.last().map(|m| m.text()).unwrap_or_default());
            break;
        }
    }
    // The turn's spans ended before its `Turn` event was sent.
    drop(agent);

    tracer_provider.force_flush()?;
    meter_provider.force_flush()?;
    let finished = spans.get_finished_spans()?;
    print_spans(&finished);
    // What an exporter must have received (CI runs this example).
    for expected in ["chat mock-model", "execute_tool get_weather", "invoke_agent"] {
        if !finished.iter().any(|span| span.name == expected) {
            return Err(format!("no `{expected}` span was exported").into());
        }
    }
    print_metrics(&metrics)?;
    tracer_provider.shutdown()?;
    meter_provider.shutdown()?;
    Ok(())
}

/// The spans as a tree, each with its kind, status, events and the conventions' attributes.
fn print_spans(spans: &[SpanData]) {
    let mut children: HashMap<SpanId, Vec<&SpanData>> = HashMap::new();
    for span in spans {
        children.entry(span.parent_span_id).or_default().push(span);
    }
    for list in children.values_mut() {
        list.sort_by_key(|span| span.start_time);
    }
    println!("\n== spans ({})", spans.len());
    print_children(&children, SpanId::INVALID, 0);
}

fn print_children(children: &HashMap<SpanId, Vec<&SpanData>>, parent: SpanId, depth: usize) {
    let indent = "    ".repeat(depth);
    for span in children.get(&parent).into_iter().flatten() {
        let millis = span.end_time.duration_since(span.start_time).unwrap_or_default().as_millis();
        println!("{indent}{} [{:?}, {:?}, {millis} ms]", span.name, span.span_kind, span.status);
        for attribute in &span.attributes {
            let key = attribute.key.as_str();
            if ["gen_ai.", "server.", "error.", "user."].iter().any(|prefix| key.starts_with(prefix)) {
                println!("{indent}  {key} = {}", shorten(&attribute.value.to_string()));
            }
        }
        for event in span.events.iter() {
            let fields: Vec<String> = event
                .attributes
                .iter()
                .filter(|kv| !matches!(kv.key.as_str(), "level" | "target") && !kv.key.as_str().starts_with("code."))
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect();
            println!("{indent}  event {:?} {}", event.name, fields.join(" "));
        }
        print_children(children, span.span_context.span_id(), depth + 1);
    }
}

/// A long value (the captured messages) cut for the terminal.
fn shorten(value: &str) -> String {
    match value.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &value[..at]),
        None => value.to_owned(),
    }
}

/// Each histogram's data points: attributes, count and sum.
fn print_metrics(exporter: &InMemoryMetricExporter) -> Result<(), Box<dyn std::error::Error>> {
    println!("\n== metrics");
    let exported = exporter.get_finished_metrics()?;
    // Cumulative temporality: the last export holds everything.
    let Some(last) = exported.last() else { return Ok(()) };
    for scope in last.scope_metrics() {
        for metric in scope.metrics() {
            println!("{} ({})", metric.name(), metric.unit());
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Histogram(h)) => h.data_points().for_each(|p| point(p, p.sum())),
                AggregatedMetrics::F64(MetricData::Histogram(h)) => h.data_points().for_each(|p| point(p, p.sum())),
                _ => {}
            }
        }
    }
    Ok(())
}

fn point<T: std::fmt::Display>(point: &HistogramDataPoint<T>, sum: T) {
    let mut attributes: Vec<String> = point.attributes().map(|kv| format!("{}={}", kv.key, kv.value)).collect();
    attributes.sort();
    println!("    count {} sum {sum:.3}  {}", point.count(), attributes.join(" "));
}
