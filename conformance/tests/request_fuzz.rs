//! Every dialect's request builder against arbitrary input: contexts of any shape (any
//! roles, blocks, unicode with control characters, odd ids and media types, tool inputs of
//! any JSON), odd model ids and options out of every range. Whatever comes in, building
//! must not panic; it either refuses with a typed error or gives a request whose body is
//! JSON, whose URL has no space or control character, whose headers cannot inject a
//! line (no CR or LF in any name or value), and whose credentials are marked sensitive and
//! found nowhere else. The inputs and the checks are the test kit's, which users run on
//! their own formats (`omni_testkit::check::strategy`, `omni_testkit::check::wire`); this
//! runs them many more times than the kit's default.

use omni_protocol::Catalogue;
use omni_protocol::{dialect::RequestSpec, ApiKey, Dialect, Model};
use omni_testkit::check::strategy::{context, options, text};
use omni_testkit::check::wire::check_request;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};

#[test]
fn any_input_builds_a_sound_request_or_a_typed_refusal() {
    let catalogue = Catalogue::builtin().expect("the built-in catalogue");
    let provider_of = |dialect: Dialect| {
        let id = match dialect {
            Dialect::AnthropicMessages => "anthropic",
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => "openai",
            Dialect::GoogleGemini => "google",
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => "ollama",
        };
        catalogue.provider(id).cloned().unwrap_or_else(|| panic!("provider {id}"))
    };
    let config = Config { cases: 1_500, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config.clone(), TestRng::deterministic_rng(config.rng_algorithm));
    let strategy = (0..Dialect::ALL.len(), text(), any::<bool>(), context(), options());
    let (built, refused) = (std::cell::Cell::new(0usize), std::cell::Cell::new(0usize));
    let result = runner.run(&strategy, |(d, model_id, reasoning, context, options)| {
        let dialect = Dialect::ALL[d];
        let provider = provider_of(dialect);
        let mut model = Model::new(provider.id.clone(), model_id, dialect);
        model.reasoning = reasoning;
        let key = ApiKey::new("sk-fuzz");
        let spec = RequestSpec {
            model: &model,
            provider: &provider,
            context: &context,
            options: &options,
            api_key: Some(&key),
        };
        match dialect.build_request(&spec) {
            Ok(request) => {
                built.set(built.get() + 1);
                check_request(&request.request, "sk-fuzz")
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", dialect.name())))
            }
            Err(_) => {
                refused.set(refused.get() + 1);
                Ok(())
            }
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (built, refused) = (built.get(), refused.get());
    println!("request builders: {built} requests built, {refused} refused with a typed error");
    assert!(built > 0, "the fuzz must reach built requests, not only refusals");
}
