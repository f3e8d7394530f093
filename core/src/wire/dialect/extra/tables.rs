//! The extra keys each dialect knows, from the providers' request references, and the
//! fields omni's own options set.
//!
//! A key is written as the provider spells it on the wire; `parent` is the object of the
//! body it goes in (`generationConfig` for Gemini's sampling parameters, `options` for
//! Ollama's model parameters, `text` for the Responses API's verbosity).

use super::{Kind, Known};

const SERVICE_TIERS: Kind = Kind::OneOf(&["auto", "default", "flex", "scale", "priority"]);
const LOW_MEDIUM_HIGH: Kind = Kind::OneOf(&["low", "medium", "high"]);

/// A key at the top level of the body.
const fn top(name: &'static str, kind: Kind) -> Known {
    Known { name, parent: None, kind, set_by: None }
}

/// A key inside the object `parent` of the body.
const fn under(parent: &'static str, name: &'static str, kind: Kind) -> Known {
    Known { name, parent: Some(parent), kind, set_by: None }
}

impl Known {
    /// A key omni also sets from one of its options: an error when that option is set.
    const fn set_by(self, instead: &'static str) -> Self {
        Self { set_by: Some(instead), ..self }
    }
}

/// Anthropic Messages API reference (`POST /v1/messages`, "Body parameters").
pub(super) const ANTHROPIC: &[Known] =
    &[top("top_k", Kind::Integer), top("service_tier", Kind::OneOf(&["auto", "standard_only"]))];

pub(super) const ANTHROPIC_OWNED: &[(&str, &str)] = &[
    ("model", "choose the model by name"),
    ("messages", "use the context's messages"),
    ("system", "use the context's system prompt"),
    ("max_tokens", "use the `max_tokens` option"),
    ("stream", "omni always streams"),
    ("tools", "use the context's tools"),
    ("tool_choice", "use the `tool_choice` option"),
    ("thinking", "use the `thinking` option"),
    ("output_config", "use the `thinking` and `output` options"),
    ("temperature", "use the `temperature` option"),
    ("top_p", "use the `top_p` option"),
    ("stop_sequences", "use the `stop` option"),
    ("metadata", "use the `metadata` option"),
];

/// OpenAI Chat Completions API reference (`POST /v1/chat/completions`, "Request body").
pub(super) const OPENAI_COMPLETIONS: &[Known] = &[
    top("seed", Kind::Integer),
    top("frequency_penalty", Kind::Number),
    top("presence_penalty", Kind::Number),
    top("logit_bias", Kind::Object),
    top("logprobs", Kind::Boolean),
    top("top_logprobs", Kind::Integer),
    top("user", Kind::String),
    top("safety_identifier", Kind::String),
    top("prompt_cache_key", Kind::String),
    top("parallel_tool_calls", Kind::Boolean),
    top("service_tier", SERVICE_TIERS),
    top("reasoning_effort", Kind::OneOf(&["none", "minimal", "low", "medium", "high", "xhigh"]))
        .set_by("use the `thinking` option"),
    top("verbosity", LOW_MEDIUM_HIGH),
    top("store", Kind::Boolean).set_by("omni sends `store: true` with the `metadata` option"),
    top("prediction", Kind::Object),
];

/// OpenRouter's parameters and provider routing (its API reference, "Parameters"), on top
/// of Chat Completions' for a provider whose base URL is on `openrouter.ai`.
pub(super) const OPENROUTER: &[Known] = &[
    top("provider", Kind::Object),
    top("models", Kind::Array),
    top("route", Kind::String),
    top("transforms", Kind::Array),
    top("top_k", Kind::Integer),
    top("min_p", Kind::Number),
    top("top_a", Kind::Number),
    top("repetition_penalty", Kind::Number),
];

pub(super) const OPENAI_COMPLETIONS_OWNED: &[(&str, &str)] = &[
    ("model", "choose the model by name"),
    ("messages", "use the context"),
    ("stream", "omni always streams"),
    ("stream_options", "omni asks for usage in the stream"),
    ("tools", "use the context's tools"),
    ("tool_choice", "use the `tool_choice` option"),
    ("max_tokens", "use the `max_tokens` option"),
    ("max_completion_tokens", "use the `max_tokens` option"),
    ("temperature", "use the `temperature` option"),
    ("top_p", "use the `top_p` option"),
    ("stop", "use the `stop` option"),
    ("response_format", "use the `output` option"),
    ("metadata", "use the `metadata` option"),
    ("prompt_cache_retention", "use the `cache` option"),
];

/// OpenAI Responses API reference (`POST /v1/responses`, "Request body").
pub(super) const OPENAI_RESPONSES: &[Known] = &[
    top("truncation", Kind::OneOf(&["auto", "disabled"])),
    top("user", Kind::String),
    top("safety_identifier", Kind::String),
    top("prompt_cache_key", Kind::String),
    top("parallel_tool_calls", Kind::Boolean),
    top("max_tool_calls", Kind::Integer),
    top("service_tier", SERVICE_TIERS),
    top("top_logprobs", Kind::Integer),
    top("include", Kind::Array).set_by("omni includes `reasoning.encrypted_content` for reasoning models"),
    under("text", "verbosity", LOW_MEDIUM_HIGH),
];

pub(super) const OPENAI_RESPONSES_OWNED: &[(&str, &str)] = &[
    ("model", "choose the model by name"),
    ("instructions", "use the context's system prompt"),
    ("input", "use the context"),
    ("tools", "use the context's tools"),
    ("tool_choice", "use the `tool_choice` option"),
    ("max_output_tokens", "use the `max_tokens` option"),
    ("temperature", "use the `temperature` option"),
    ("top_p", "use the `top_p` option"),
    ("reasoning", "use the `thinking` option"),
    ("metadata", "use the `metadata` option"),
    ("text", "use the `output` option, or the extra option `verbosity`"),
    ("prompt_cache_retention", "use the `cache` option"),
    ("store", "omni sends `store: false`, each request carrying the whole conversation"),
    ("stream", "omni always streams"),
];

/// Gemini API reference, `models.generateContent`: the request body and `GenerationConfig`.
pub(super) const GEMINI: &[Known] = &[
    top("safetySettings", Kind::Array),
    top("cachedContent", Kind::String),
    under("generationConfig", "topK", Kind::Integer),
    under("generationConfig", "seed", Kind::Integer),
    under("generationConfig", "presencePenalty", Kind::Number),
    under("generationConfig", "frequencyPenalty", Kind::Number),
    under("generationConfig", "candidateCount", Kind::Integer),
    under("generationConfig", "responseLogprobs", Kind::Boolean),
    under("generationConfig", "logprobs", Kind::Integer),
    under("generationConfig", "responseModalities", Kind::Array),
    under("generationConfig", "mediaResolution", Kind::String),
    under("generationConfig", "speechConfig", Kind::Object),
];

pub(super) const GEMINI_OWNED: &[(&str, &str)] = &[
    ("contents", "use the context"),
    ("systemInstruction", "use the context's system prompt"),
    ("tools", "use the context's tools"),
    ("toolConfig", "use the `tool_choice` option"),
    ("generationConfig", "give its fields one by one as extra options (`topK`, `seed` ...)"),
    ("maxOutputTokens", "use the `max_tokens` option"),
    ("temperature", "use the `temperature` option"),
    ("topP", "use the `top_p` option"),
    ("stopSequences", "use the `stop` option"),
    ("thinkingConfig", "use the `thinking` option"),
    ("responseMimeType", "use the `output` option"),
    ("responseSchema", "use the `output` option"),
    ("responseJsonSchema", "use the `output` option"),
];

/// Ollama API reference (`POST /api/chat`) and its model parameters (the Modelfile's
/// "Valid Parameters and Values", `api/types.go` `Options` and `Runner`).
pub(super) const OLLAMA: &[Known] = &[
    top("keep_alive", Kind::StringOrNumber),
    under("options", "num_ctx", Kind::Integer),
    under("options", "num_keep", Kind::Integer),
    under("options", "num_predict", Kind::Integer).set_by("use the `max_tokens` option"),
    under("options", "seed", Kind::Integer),
    under("options", "top_k", Kind::Integer),
    under("options", "min_p", Kind::Number),
    under("options", "typical_p", Kind::Number),
    under("options", "repeat_last_n", Kind::Integer),
    under("options", "repeat_penalty", Kind::Number),
    under("options", "presence_penalty", Kind::Number),
    under("options", "frequency_penalty", Kind::Number),
    under("options", "num_batch", Kind::Integer),
    under("options", "num_gpu", Kind::Integer),
    under("options", "main_gpu", Kind::Integer),
    under("options", "num_thread", Kind::Integer),
    under("options", "use_mmap", Kind::Boolean),
];

pub(super) const OLLAMA_OWNED: &[(&str, &str)] = &[
    ("model", "choose the model by name"),
    ("messages", "use the context"),
    ("tools", "use the context's tools"),
    ("stream", "omni always streams"),
    ("think", "use the `thinking` option"),
    ("format", "use the `output` option"),
    ("options", "give its fields one by one as extra options (`num_ctx`, `seed` ...)"),
    ("temperature", "use the `temperature` option"),
    ("top_p", "use the `top_p` option"),
    ("stop", "use the `stop` option"),
];
