//! The built-in data is parsed per provider on first need, and a catalogue holding it
//! that way answers exactly like one that loaded every file itself.

use std::sync::atomic::Ordering;

use super::builtin::{test_store, Store};
use super::*;
use crate::data::dialect::Dialect;

/// What `Catalogue::builtin()` used to build: every embedded file loaded in order.
fn loaded_eagerly() -> Catalogue {
    let mut catalogue = Catalogue::empty();
    for (name, json) in BUILTIN_FILES {
        if let Err(e) = catalogue.load(Some(name), json) {
            panic!("{e}");
        }
    }
    catalogue
}

fn builtin() -> Catalogue {
    match Catalogue::builtin() {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

fn files_parsed(store: &Store) -> usize {
    store.files_parsed.load(Ordering::Relaxed)
}

#[test]
fn the_index_names_the_provider_each_file_defines_or_extends() {
    for (position, ((name, json), indexed)) in BUILTIN_FILES.into_iter().zip(BUILTIN_PROVIDERS).enumerate() {
        // Loaded after the earlier files of its provider only, a file must load and
        // touch nothing but the provider the index gives it.
        let mut catalogue = Catalogue::empty();
        let earlier = BUILTIN_FILES[..position].iter().zip(BUILTIN_PROVIDERS).filter(|(_, p)| *p == indexed);
        for ((earlier_name, earlier_json), _) in earlier {
            assert_eq!(catalogue.load(Some(earlier_name), earlier_json), Ok(()), "{earlier_name}");
        }
        assert_eq!(catalogue.load(Some(name), json), Ok(()), "{name} loads after its provider's earlier files only");
        let ids: Vec<&str> = catalogue.providers().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, [indexed], "{name} is indexed under the provider it defines or extends");
        assert!(catalogue.models.keys().all(|p| p == indexed), "{name} adds models to {indexed} only");
    }
}

#[test]
fn the_lazy_builtin_equals_a_full_parse() {
    test_store::with_fresh(|store| {
        let lazy = builtin();
        let eager = loaded_eagerly();
        assert_eq!(lazy, eager);
        assert_eq!(format!("{lazy:?}"), format!("{eager:?}"));
        assert!(lazy.providers().eq(eager.providers()));
        assert!(lazy.models().eq(eager.models()));
        for provider in eager.providers() {
            assert!(lazy.models_of(&provider.id).eq(eager.models_of(&provider.id)), "{}", provider.id);
            let Some(parsed) = store.get(&provider.id) else { panic!("{} is not built in", provider.id) };
            assert_eq!(&parsed.provider, provider);
        }
        // Every embedded file was parsed for that, and once only.
        assert_eq!(files_parsed(store), BUILTIN_FILES.len());
        assert_eq!(lazy, builtin());
        assert_eq!(files_parsed(store), BUILTIN_FILES.len());
    });
}

#[test]
fn errors_still_suggest_across_every_built_in_provider() {
    let eager = loaded_eagerly();
    for name in ["openai:gpt-5-turbo", "antropic:claude-sonnet-4-5", "claude-sonnet-4-5", "gpt-oss:20b", "ollama:zz"] {
        test_store::with_fresh(|store| {
            let lazy = builtin();
            assert_eq!(lazy.resolve("openai:gpt-5").map(|m| m.provider), Ok("openai".to_string()));
            assert_eq!(lazy.model(name), eager.model(name), "{name}");
            assert_eq!(lazy.resolve(name), eager.resolve(name), "{name}");
            assert!(files_parsed(store) <= BUILTIN_FILES.len(), "each file at most once");
        });
    }
    // The names above do reach across providers: the one without a provider is matched
    // against another provider's models, the misspelt provider against every provider.
    let Err(LookupError::MalformedName { suggestions, .. }) = eager.model("claude-sonnet-4-5") else { panic!() };
    assert_eq!(suggestions.first().map(String::as_str), Some("anthropic:claude-sonnet-4-5"));
    let Err(LookupError::UnknownProvider { known, .. }) = eager.model("antropic:x") else { panic!() };
    assert_eq!(known.len(), BUILTIN_FILES.len());
}

#[test]
fn added_entries_win_over_built_in_ones_as_with_a_full_parse() {
    let moved = Provider::openai_compatible("ollama", "http://gpu-box:11434/v1", None);
    let mut cheap = Model::new("openai", "gpt-5", Dialect::OpenaiCompletions);
    cheap.context_window = 7;
    let extra = r#"{ "extends": "anthropic", "models": [ { "id": "claude-next" } ] }"#;
    let vllm = Provider::openai_compatible("vllm", "http://gpu:8000/v1", None);
    let served = Model::new("vllm", "m", Dialect::OpenaiCompletions);

    let apply = |catalogue: &mut Catalogue| {
        assert_eq!(catalogue.add_provider(moved.clone()), Ok(()));
        assert_eq!(catalogue.add_model(cheap.clone()), Ok(()));
        assert_eq!(catalogue.load_json(extra), Ok(()));
        assert_eq!(catalogue.add_provider(vllm.clone()), Ok(()));
        assert_eq!(catalogue.add_model(served.clone()), Ok(()));
    };
    test_store::with_fresh(|store| {
        let mut lazy = builtin();
        apply(&mut lazy);
        // `extends` parsed the provider it extends, and nothing else was needed.
        assert_eq!(store.parsed(), ["anthropic", "openai"]);

        assert_eq!(lazy.provider("ollama"), Some(&moved));
        assert_eq!(lazy.model("openai:gpt-5").map(|m| m.context_window), Ok(7));
        assert_eq!(lazy.resolve("openai:gpt-5").map(|m| m.dialect), Ok(Dialect::OpenaiCompletions));
        assert!(lazy.model("openai:gpt-5-mini").is_ok(), "the provider's other built-in models stay");
        assert!(lazy.model("ollama:llama3.2:3b").is_ok(), "a replaced provider keeps its built-in models");
        assert_eq!(lazy.model("anthropic:claude-next").map(|m| m.dialect), Ok(Dialect::AnthropicMessages));
        assert_eq!(lazy.resolve("vllm:other").map(|m| m.provider), Ok("vllm".to_string()));

        let mut eager = loaded_eagerly();
        apply(&mut eager);
        assert_eq!(lazy, eager);
        assert_eq!(format!("{lazy:?}"), format!("{eager:?}"));
        assert!(lazy.providers().eq(eager.providers()));
        assert!(lazy.models().eq(eager.models()));
        let listed: Vec<u32> = lazy.models().filter(|m| m.id == "gpt-5").map(|m| m.context_window).collect();
        assert_eq!(listed, [7], "a replaced model is listed once, as replaced");
        assert_ne!(lazy, builtin());
    });
}

#[test]
fn an_empty_catalogue_holds_no_built_in_data() {
    test_store::with_fresh(|store| {
        let empty = Catalogue::empty();
        assert!(empty.provider("openai").is_none());
        assert!(matches!(empty.resolve("openai:gpt-5"), Err(LookupError::UnknownProvider { .. })));
        assert_eq!(empty.providers().count() + empty.models().count(), 0);
        assert_eq!(files_parsed(store), 0);
        assert_ne!(empty, builtin());
    });
}
