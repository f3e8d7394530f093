use super::*;
use crate::data::dialect::Dialect;
use crate::data::model::Modality;
use crate::data::provider::{ApiKey, Auth};

/// Models whose dialect deliberately differs from their provider's default.
/// Empty today; add `("provider", "model")` pairs here with a reason when needed.
const DELIBERATE_DIALECT_MISMATCH: [(&str, &str); 0] = [];

fn builtin() -> Catalogue {
    match Catalogue::builtin() {
        Ok(c) => c,
        Err(e) => panic!("embedded catalogue is broken: {e}"),
    }
}

#[test]
fn every_embedded_file_parses_on_its_own() {
    for (name, json) in BUILTIN_FILES {
        let mut catalogue = Catalogue::empty();
        if let Err(e) = catalogue.load(Some(name), json) {
            panic!("{e}");
        }
        assert_eq!(catalogue.providers().count(), 1, "{name} defines one provider");
        assert!(catalogue.models().count() >= 3, "{name} lists a useful set of models");
        let provider = catalogue.providers().next().map(|p| p.id.clone()).unwrap_or_default();
        assert_eq!(format!("{provider}.json"), name, "file is named after its provider");
    }
    assert_eq!(builtin().providers().count(), BUILTIN_FILES.len());
}

#[test]
fn every_model_has_a_provider_and_its_dialect() {
    let catalogue = builtin();
    for model in catalogue.models() {
        let provider = catalogue.provider(&model.provider);
        let Some(provider) = provider else { panic!("{}:{} has no provider", model.provider, model.id) };
        let deliberate = DELIBERATE_DIALECT_MISMATCH.contains(&(model.provider.as_str(), model.id.as_str()));
        assert!(
            model.dialect == provider.dialect || deliberate,
            "{}:{} uses {} but its provider uses {}",
            model.provider,
            model.id,
            model.dialect,
            provider.dialect
        );
    }
}

#[test]
fn every_model_has_plausible_limits_and_prices() {
    for m in builtin().models() {
        let key = format!("{}:{}", m.provider, m.id);
        assert!(!m.name.is_empty() && m.context_window > 0, "{key}");
        assert!(m.accepts(Modality::Text), "{key} accepts text");
        assert!(m.max_output_tokens <= m.context_window, "{key}");
        let p = m.prices;
        if m.provider == "ollama" {
            assert_eq!((p.input, p.output, p.cache_read, p.cache_write), (0.0, 0.0, Some(0.0), Some(0.0)), "{key}");
        } else {
            assert!(p.input > 0.0 && p.output >= p.input, "{key} has real prices");
            assert!(p.cache_read.is_none_or(|r| r < p.input), "{key}: cache reads are a discount");
            assert!(p.cache_write.is_none_or(|w| w >= p.input), "{key}: cache writes cost at least input");
        }
    }
}

#[test]
fn providers_match_their_documented_endpoints() {
    let catalogue = builtin();
    let header = |name: &str| Auth::Header { name: name.into() };
    let expected = [
        (
            "alibaba",
            Dialect::OpenaiCompletions,
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
            Auth::Bearer,
            Some("DASHSCOPE_API_KEY"),
            Some("reasoning_content"),
        ),
        (
            "anthropic",
            Dialect::AnthropicMessages,
            "https://api.anthropic.com/v1",
            header("x-api-key"),
            Some("ANTHROPIC_API_KEY"),
            None,
        ),
        (
            "google",
            Dialect::GoogleGemini,
            "https://generativelanguage.googleapis.com/v1beta",
            header("x-goog-api-key"),
            Some("GEMINI_API_KEY"),
            None,
        ),
        (
            "groq",
            Dialect::OpenaiCompletions,
            "https://api.groq.com/openai/v1",
            Auth::Bearer,
            Some("GROQ_API_KEY"),
            Some("reasoning"),
        ),
        (
            "moonshot",
            Dialect::OpenaiCompletions,
            "https://api.moonshot.ai/v1",
            Auth::Bearer,
            Some("MOONSHOT_API_KEY"),
            Some("reasoning_content"),
        ),
        ("ollama", Dialect::OllamaChat, "http://localhost:11434", Auth::None, None, None),
        ("openai", Dialect::OpenaiResponses, "https://api.openai.com/v1", Auth::Bearer, Some("OPENAI_API_KEY"), None),
        (
            "openrouter",
            Dialect::OpenaiCompletions,
            "https://openrouter.ai/api/v1",
            Auth::Bearer,
            Some("OPENROUTER_API_KEY"),
            Some("reasoning"),
        ),
        (
            "venice",
            Dialect::OpenaiCompletions,
            "https://api.venice.ai/api/v1",
            Auth::Bearer,
            Some("VENICE_API_KEY"),
            None,
        ),
        (
            "zai",
            Dialect::OpenaiCompletions,
            "https://api.z.ai/api/paas/v4",
            Auth::Bearer,
            Some("ZAI_API_KEY"),
            Some("reasoning_content"),
        ),
    ];
    let ids: Vec<&str> = catalogue.providers().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, expected.iter().map(|e| e.0).collect::<Vec<_>>(), "providers() is sorted and complete");
    for (id, dialect, base_url, auth, env, reasoning_field) in expected {
        let Some(p) = catalogue.provider(id) else { panic!("missing provider {id}") };
        assert_eq!(p.dialect, dialect, "{id}");
        assert_eq!(p.base_url, base_url, "{id}");
        assert!(!p.base_url.ends_with('/'), "{id}: dialect paths start with '/'");
        assert_eq!(p.auth, auth, "{id}");
        assert_eq!(p.api_key_env.as_deref(), env, "{id}");
        assert_eq!(p.quirks.reasoning_field.as_deref(), reasoning_field, "{id}");
    }
}

#[test]
fn models_iterate_sorted_by_provider_then_id() {
    let catalogue = builtin();
    let keys: Vec<(String, String)> = catalogue.models().map(|m| (m.provider.clone(), m.id.clone())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(catalogue.models_of("ollama").all(|m| m.provider == "ollama"));
    assert_eq!(catalogue.models_of("nobody").count(), 0);
}

#[test]
fn lookups_split_at_the_first_colon() {
    let catalogue = builtin();
    let ollama = catalogue.model("ollama:llama3.2:3b").map(|m| (m.provider.as_str(), m.id.as_str()));
    assert_eq!(ollama, Ok(("ollama", "llama3.2:3b")));
    let sonnet = catalogue.model("anthropic:claude-sonnet-4-5");
    assert_eq!(sonnet.map(|m| m.dialect), Ok(Dialect::AnthropicMessages));
    let routed = catalogue.model("openrouter:anthropic/claude-sonnet-4.5");
    assert_eq!(routed.map(|m| m.dialect), Ok(Dialect::OpenaiCompletions));
    assert_eq!(catalogue.provider("google").map(|p| p.id.as_str()), Some("google"));
    assert!(catalogue.provider("nobody").is_none());
}

#[test]
fn unknown_provider_names_the_candidates() {
    let err = builtin().model("antropic:claude-sonnet-4-5").err();
    let Some(LookupError::UnknownProvider { provider, suggestions, known }) = err.clone() else { panic!("{err:?}") };
    assert_eq!(provider, "antropic");
    assert_eq!(suggestions, ["anthropic"]);
    assert_eq!(known.len(), BUILTIN_FILES.len());
    let message = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("did you mean anthropic?") && message.contains("openrouter"), "{message}");
}

#[test]
fn unknown_model_suggests_close_ids() {
    let catalogue = builtin();
    let err = catalogue.model("anthropic:claude-sonet-4-5").err();
    let Some(LookupError::UnknownModel { provider, model, suggestions }) = err.clone() else { panic!("{err:?}") };
    assert_eq!((provider.as_str(), model.as_str()), ("anthropic", "claude-sonet-4-5"));
    assert_eq!(suggestions.first().map(String::as_str), Some("claude-sonnet-4-5"));
    let message = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("did you mean claude-sonnet-4-5"), "{message}");

    // Nothing close, few models: every model of the provider is a candidate.
    let err = catalogue.model("ollama:zzzz").err();
    let Some(LookupError::UnknownModel { suggestions, .. }) = err else { panic!("{err:?}") };
    assert_eq!(suggestions, catalogue.models_of("ollama").map(|m| m.id.clone()).collect::<Vec<_>>());
}

#[test]
fn a_name_without_provider_suggests_qualified_names() {
    let catalogue = builtin();
    for name in ["claude-sonnet-4-5", "anthropic:", ":claude-sonnet-4-5", ""] {
        let err = catalogue.model(name).err();
        let Some(LookupError::MalformedName { name: got, suggestions }) = err else { panic!("{name}: {err:?}") };
        assert_eq!(got, name);
        if name.contains("sonnet") {
            assert_eq!(suggestions.first().map(String::as_str), Some("anthropic:claude-sonnet-4-5"), "{name}");
        }
    }
    let err = catalogue.resolve("gpt-oss:20b").err();
    // "gpt-oss" is not a provider, so the colon split finds an unknown provider.
    assert!(matches!(err, Some(LookupError::UnknownProvider { .. })), "{err:?}");
}

#[test]
fn resolve_accepts_unknown_ids_on_known_providers_while_model_stays_strict() {
    let catalogue = builtin();
    let name = "ollama:qwen3:30b-a3b-instruct-2507-q4_K_M";
    assert!(matches!(catalogue.model(name), Err(LookupError::UnknownModel { .. })));
    let Ok(model) = catalogue.resolve(name) else { panic!("resolve failed") };
    assert_eq!(model.provider, "ollama");
    assert_eq!(model.id, "qwen3:30b-a3b-instruct-2507-q4_K_M");
    assert_eq!(model.dialect, Dialect::OllamaChat);
    assert_eq!((model.context_window, model.prices.input), (0, 0.0));

    let routed = catalogue.resolve("openrouter:deepseek/deepseek-v4").map(|m| m.dialect);
    assert_eq!(routed, Ok(Dialect::OpenaiCompletions));
    // A known model resolves to the catalogue entry itself.
    assert_eq!(catalogue.resolve("google:gemini-2.5-pro").ok().as_ref(), catalogue.model("google:gemini-2.5-pro").ok());
    assert!(matches!(catalogue.resolve("nobody:x"), Err(LookupError::UnknownProvider { .. })));
}

const EXTRA: &str = r#"{
  "provider": {
    "id": "lmstudio",
    "base_url": "http://localhost:1234/v1",
    "dialect": "openai_completions",
    "auth": { "kind": "none" }
  },
  "models": [
    { "id": "qwen/qwen3-4b", "context_window": 32768 },
    { "id": "special", "dialect": "openai_responses", "input": ["text", "image"] }
  ]
}"#;

#[test]
fn load_json_extends_and_overrides() {
    let mut catalogue = builtin();
    let before = catalogue.models().count();
    assert_eq!(catalogue.load_json(EXTRA), Ok(()));
    assert_eq!(catalogue.models().count(), before + 2);
    let qwen = catalogue.model("lmstudio:qwen/qwen3-4b");
    assert_eq!(
        qwen.map(|m| (m.name.as_str(), m.dialect, m.context_window)),
        Ok(("qwen/qwen3-4b", Dialect::OpenaiCompletions, 32768))
    );
    assert_eq!(catalogue.model("lmstudio:special").map(|m| m.dialect), Ok(Dialect::OpenaiResponses));

    // Same key later: the model is replaced, the provider's other models stay.
    let cheaper = r#"{ "extends": "anthropic", "models": [
        { "id": "claude-sonnet-4-5", "reasoning": true, "context_window": 1000000, "prices": { "input": 1, "output": 2 } },
        { "id": "claude-next", "name": "Claude Next" } ] }"#;
    assert_eq!(catalogue.load_json(cheaper), Ok(()));
    let sonnet = catalogue.model("anthropic:claude-sonnet-4-5");
    assert_eq!(
        sonnet.map(|m| (m.context_window, m.prices.input, m.dialect)),
        Ok((1_000_000, 1.0, Dialect::AnthropicMessages))
    );
    assert!(catalogue.model("anthropic:claude-haiku-4-5").is_ok());
    assert_eq!(catalogue.model("anthropic:claude-next").map(|m| m.name.as_str()), Ok("Claude Next"));

    // A provider redefined later replaces the provider but keeps its models.
    let moved = r#"{ "provider": { "id": "ollama", "base_url": "http://gpu-box:11434", "dialect": "ollama_chat", "auth": { "kind": "none" } } }"#;
    assert_eq!(catalogue.load_json(moved), Ok(()));
    assert_eq!(catalogue.provider("ollama").map(|p| p.base_url.as_str()), Some("http://gpu-box:11434"));
    assert!(catalogue.model("ollama:llama3.2:3b").is_ok());
}

#[test]
fn a_failed_load_changes_nothing() {
    let mut catalogue = builtin();
    let snapshot = catalogue.clone();
    let cases = [
        r#"{ "extends": "nobody", "models": [] }"#,
        r#"{ "models": [] }"#,
        r#"{ "extends": "ollama", "provider": { "id": "x", "base_url": "http://x", "dialect": "ollama_chat", "auth": { "kind": "none" } } }"#,
        r#"{ "provider": { "id": "bad:id", "base_url": "http://x", "dialect": "ollama_chat", "auth": { "kind": "none" } } }"#,
        r#"{ "provider": { "id": "x", "base_url": "http://x", "dialect": "ollama_chat", "auth": { "kind": "none" } }, "models": [ { "id": "ok" }, { "id": "" } ] }"#,
    ];
    for json in cases {
        let result = catalogue.load_json(json);
        assert!(result.is_err(), "{json}");
        assert_eq!(catalogue, snapshot, "{json}");
    }
    assert!(
        matches!(catalogue.load_json(cases[0]), Err(CatalogueError::UnknownProvider { provider, .. }) if provider == "nobody")
    );
    assert!(matches!(catalogue.load_json(cases[3]), Err(CatalogueError::Invalid { .. })));
}

#[test]
fn bad_json_reports_line_and_column() {
    let mut catalogue = Catalogue::empty();
    let broken = "{\n  \"provider\": {\n    \"id\": \"x\",,\n  }\n}";
    let err = catalogue.load_json(broken).err();
    let Some(CatalogueError::Json { source, line, column, message }) = err.clone() else { panic!("{err:?}") };
    assert_eq!((source, line, column), (None, 3, 15));
    assert!(!message.contains("at line"), "{message}");
    assert_eq!(err.map(|e| e.to_string()).unwrap_or_default(), format!("catalogue JSON:3:15: {message}"));

    // Shape errors are located too: a misspelt model field on line 4.
    let typo = "{ \"extends\": \"x\",\n  \"models\": [\n    { \"id\": \"m\",\n      \"context_windw\": 5 } ] }";
    let err = catalogue.load_json(typo).err();
    assert!(
        matches!(err, Some(CatalogueError::Json { line: 4, ref message, .. }) if message.contains("context_windw")),
        "{err:?}"
    );
    let bad_dialect =
        r#"{ "provider": { "id": "x", "base_url": "u", "dialect": "smoke_signals", "auth": { "kind": "none" } } }"#;
    assert!(matches!(catalogue.load_json(bad_dialect), Err(CatalogueError::Json { line: 1, .. })));
    assert!(matches!(catalogue.load_json(""), Err(CatalogueError::Json { .. })));
    assert_eq!(catalogue, Catalogue::empty());
}

#[test]
fn add_model_and_provider_validate() {
    let mut catalogue = Catalogue::empty();
    let orphan = Model::new("vllm", "m", Dialect::OpenaiCompletions);
    assert!(matches!(catalogue.add_model(orphan.clone()), Err(CatalogueError::UnknownProvider { .. })));
    assert!(catalogue.add_provider(Provider::openai_compatible("v:llm", "http://x", None)).is_err());
    assert!(catalogue.add_provider(Provider::openai_compatible("vllm", "", None)).is_err());
    assert_eq!(catalogue.add_provider(Provider::openai_compatible("vllm", "http://gpu:8000/v1/", None)), Ok(()));
    assert!(catalogue.add_model(Model::new("vllm", " ", Dialect::OpenaiCompletions)).is_err());
    assert_eq!(catalogue.add_model(orphan), Ok(()));
    assert_eq!(catalogue.model("vllm:m").map(|m| m.id.as_str()), Ok("m"));
    assert_eq!(catalogue.resolve("vllm:other").map(|m| m.dialect), Ok(Dialect::OpenaiCompletions));
}

#[test]
fn openai_compatible_providers() {
    let keyed = Provider::openai_compatible("lmstudio", "http://localhost:1234/v1/", Some("LMSTUDIO_KEY"));
    assert_eq!((keyed.auth.clone(), keyed.api_key_env.as_deref()), (Auth::Bearer, Some("LMSTUDIO_KEY")));
    assert_eq!((keyed.dialect, keyed.base_url.as_str()), (Dialect::OpenaiCompletions, "http://localhost:1234/v1"));
    assert!(keyed.needs_key());
    let open = Provider::openai_compatible("llamacpp", "http://localhost:8080/v1", None);
    assert_eq!((open.auth.clone(), open.api_key_env.as_deref()), (Auth::None, None));
    assert!(!open.needs_key());
}

#[test]
fn debug_output_never_contains_a_key() {
    let secret = "sk-live-very-secret-value";
    let catalogue = builtin();
    let Some(provider) = catalogue.provider("openai") else { panic!("no openai") };
    let env = |name: &str| (name == "OPENAI_API_KEY").then(|| secret.to_string());
    let key: Option<ApiKey> = provider.resolve_key(None, None, env);
    assert_eq!(key.as_ref().map(ApiKey::expose), Some(secret));
    for printed in
        [format!("{provider:?}"), format!("{key:?}"), format!("{catalogue:?}"), format!("{:?}", key.as_ref())]
    {
        assert!(!printed.contains(secret), "{printed}");
    }
}

#[test]
fn a_model_may_declare_the_text_protocol_it_needs() {
    let mut catalogue = builtin();
    let local = r#"{ "extends": "ollama", "models": [
        { "id": "tiny-no-tools", "tool_protocol": "xml" },
        { "id": "tiny-json", "tool_protocol": "json" } ] }"#;
    assert_eq!(catalogue.load_json(local), Ok(()));
    let protocol = |name: &str| catalogue.model(name).map(|m| m.tool_protocol.clone());
    assert_eq!(protocol("ollama:tiny-no-tools"), Ok(Some(crate::data::tool_protocol::ToolProtocol::Xml)));
    assert_eq!(protocol("ollama:tiny-json"), Ok(Some(crate::data::tool_protocol::ToolProtocol::Json)));
    assert_eq!(protocol("anthropic:claude-sonnet-4-5"), Ok(None), "native by default");
    // A provider may declare it for all its models (a gateway without native tools).
    let gateway = r#"{ "provider": { "id": "gateway", "base_url": "http://gw.invalid/v1",
        "dialect": "openai_completions", "auth": { "kind": "none" }, "tool_protocol": "json" },
        "models": [ { "id": "any" } ] }"#;
    assert_eq!(catalogue.load_json(gateway), Ok(()));
    let declared = catalogue.provider("gateway").map(|p| p.tool_protocol.clone());
    assert_eq!(declared, Some(Some(crate::data::tool_protocol::ToolProtocol::Json)));
    let unknown = r#"{ "extends": "ollama", "models": [ { "id": "x", "tool_protocol": "yaml" } ] }"#;
    assert!(catalogue.load_json(unknown).is_err(), "an unknown protocol name is an error");
}
