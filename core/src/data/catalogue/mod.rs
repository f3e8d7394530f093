//! The model and provider catalogue: built-in data for the common providers, extensible
//! at run time with the same JSON format.
//!
//! Models are named `provider:model`, split at the **first** colon, so ids that contain
//! colons work: `ollama:llama3.2:3b` is model `llama3.2:3b` of provider `ollama`.
//!
//! - [`Catalogue::model`] is strict: the model must be in the catalogue.
//! - [`Catalogue::resolve`] also accepts an unknown model id on a known provider and
//!   builds a [`Model`] from the provider's defaults (its dialect, text input, unknown
//!   limits and zero prices), so any Ollama tag or OpenRouter slug can be used.
//!
//! The data lives in `core/catalogue/*.json`, embedded at compile time (the core does no
//! file I/O) and parsed per provider when first needed; `core/catalogue/README.md`
//! documents the format and where each figure came from.
//!
//! ```
//! use omni_protocol::{Catalogue, Provider};
//!
//! let mut catalogue = Catalogue::builtin()?;
//! let sonnet = catalogue.model("anthropic:claude-sonnet-4-5")?;
//! assert_eq!(sonnet.context_window, 200_000);
//!
//! // Any local model, even one the catalogue has never heard of.
//! let local = catalogue.resolve("ollama:qwen3:30b-a3b")?;
//! assert_eq!(local.id, "qwen3:30b-a3b");
//!
//! // Register an OpenAI-compatible server (vLLM, llama.cpp, LM Studio ...).
//! catalogue.add_provider(Provider::openai_compatible("vllm", "http://gpu-box:8000/v1", None))?;
//! let served = catalogue.resolve("vllm:meta-llama/Llama-3.3-70B-Instruct")?;
//! assert_eq!(served.provider, "vllm");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod builtin;
mod error;
mod file;
pub(crate) mod suggest;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_lazy;

/// For tests above data (a client resolves through the catalogue): runs `f` with a fresh
/// built-in store (nothing parsed) as this thread's; `f` is given a probe of what has been
/// parsed since: the number of files, and the providers.
#[cfg(test)]
pub(crate) fn with_fresh_builtin<T>(f: impl FnOnce(&dyn Fn() -> (usize, Vec<&'static str>)) -> T) -> T {
    builtin::test_store::with_fresh(|store| {
        f(&|| (store.files_parsed.load(std::sync::atomic::Ordering::Relaxed), store.parsed()))
    })
}

use crate::data::response::Warning;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use error::{CatalogueError, LookupError};

use crate::data::model::Model;
use crate::data::provider::Provider;
use builtin::{BuiltinProvider, Store};

/// The embedded data files, in load order (alphabetical; each file is one provider).
const BUILTIN_FILES: [(&str, &str); 10] = [
    ("alibaba.json", include_str!("../../../catalogue/alibaba.json")),
    ("anthropic.json", include_str!("../../../catalogue/anthropic.json")),
    ("google.json", include_str!("../../../catalogue/google.json")),
    ("groq.json", include_str!("../../../catalogue/groq.json")),
    ("moonshot.json", include_str!("../../../catalogue/moonshot.json")),
    ("ollama.json", include_str!("../../../catalogue/ollama.json")),
    ("openai.json", include_str!("../../../catalogue/openai.json")),
    ("openrouter.json", include_str!("../../../catalogue/openrouter.json")),
    ("venice.json", include_str!("../../../catalogue/venice.json")),
    ("zai.json", include_str!("../../../catalogue/zai.json")),
];

/// The provider each file of [`BUILTIN_FILES`] defines (or `extends`), at the same
/// position: the index that lets one provider be parsed without the others. A unit test
/// checks it against the files.
const BUILTIN_PROVIDERS: [&str; BUILTIN_FILES.len()] =
    ["alibaba", "anthropic", "google", "groq", "moonshot", "ollama", "openai", "openrouter", "venice", "zai"];

/// How many close matches an error lists.
const MAX_SUGGESTIONS: usize = 5;

/// When nothing is close, an unknown-model error lists every model of the provider if
/// it has at most this many.
const LIST_ALL_UP_TO: usize = 12;

/// Providers and their models, keyed and iterated in sorted order.
///
/// A catalogue from [`Catalogue::builtin`] holds the built-in data by reference, parsed
/// per provider on first need, beneath the entries added to it, which win. Equality and
/// `Debug` are by content: the providers and models a catalogue answers with.
#[derive(Clone, Default)]
pub struct Catalogue {
    /// The built-in providers beneath this catalogue's own entries, if any.
    builtin: Option<&'static Store>,
    /// Providers added or replaced here; they hide a built-in one of the same id.
    providers: BTreeMap<String, Provider>,
    /// provider id -> model id -> model, added or replaced here; they hide a built-in
    /// model with the same key, and the built-in provider's other models stay.
    models: BTreeMap<String, BTreeMap<String, Model>>,
}

impl Catalogue {
    /// A catalogue with no providers and no models.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in catalogue, which callers may extend freely. It costs nothing to make:
    /// each embedded file is parsed at most once per process, when a provider it defines
    /// is first looked up (listing all providers or models parses them all). The
    /// `Result` stays for compatibility; it is never an error, and a unit test shows
    /// every embedded file loads.
    pub fn builtin() -> Result<Self, CatalogueError> {
        Ok(Self { builtin: Some(Store::global()), ..Self::default() })
    }

    /// Adds the providers and models of one catalogue file (the format of
    /// `core/catalogue/*.json`). Entries replace earlier ones with the same key
    /// (provider id, or provider and model id); a replaced provider keeps its models.
    /// On error nothing is changed.
    pub fn load_json(&mut self, json: &str) -> Result<(), CatalogueError> {
        self.load(None, json)
    }

    fn load(&mut self, source: Option<&str>, json: &str) -> Result<(), CatalogueError> {
        let parsed = file::parse(source, json, |id| self.provider(id).map(|p| p.dialect))?;
        if let Some(provider) = parsed.provider {
            self.providers.insert(provider.id.clone(), provider);
        }
        let models = self.models.entry(parsed.provider_id).or_default();
        for model in parsed.models {
            models.insert(model.id.clone(), model);
        }
        Ok(())
    }

    /// Adds or replaces a provider (its models stay). Fails on an id that is empty or
    /// contains `:` or whitespace, or on an empty base URL.
    pub fn add_provider(&mut self, provider: Provider) -> Result<(), CatalogueError> {
        file::validate_provider(None, &provider)?;
        self.providers.insert(provider.id.clone(), provider);
        Ok(())
    }

    /// Adds or replaces a model. Its provider must already be in the catalogue, so
    /// every model can be sent somewhere.
    pub fn add_model(&mut self, model: Model) -> Result<(), CatalogueError> {
        file::validate_model_id(None, &model.id)?;
        if self.provider(&model.provider).is_none() {
            return Err(CatalogueError::UnknownProvider { source: None, provider: model.provider });
        }
        self.models.entry(model.provider.clone()).or_default().insert(model.id.clone(), model);
        Ok(())
    }

    /// The provider with this id.
    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.get(id).or_else(|| self.builtin_provider(id).map(|b| &b.provider))
    }

    /// All providers, sorted by id. On a built-in catalogue this parses every embedded
    /// file not parsed yet (lookups by name parse only the provider named).
    pub fn providers(&self) -> impl Iterator<Item = &Provider> + '_ {
        let builtin = self.builtin.into_iter().flat_map(Store::all).map(|b| (b.provider.id.as_str(), &b.provider));
        overlay(builtin, entries(Some(&self.providers)))
    }

    /// All models, sorted by provider id and then model id. Parses like
    /// [`Catalogue::providers`].
    pub fn models(&self) -> impl Iterator<Item = &Model> + '_ {
        let ids: BTreeSet<&str> = self.providers().map(|p| p.id.as_str()).collect();
        ids.into_iter().flat_map(|id| self.models_of(id))
    }

    /// The models of one provider, sorted by id (empty for an unknown provider).
    pub fn models_of<'a>(&'a self, provider: &str) -> impl Iterator<Item = &'a Model> + 'a {
        let builtin = self.builtin_provider(provider).map(|b| &b.models);
        overlay(entries(builtin), entries(self.models.get(provider)))
    }

    /// Looks up `provider:model` (split at the first colon). Strict: the model must be
    /// in the catalogue; errors suggest close names.
    pub fn model(&self, name: &str) -> Result<&Model, LookupError> {
        let (provider, id) = self.split(name)?;
        self.find_model(provider, id).ok_or_else(|| {
            let ids = self.models_of(provider).map(|m| m.id.as_str());
            let mut suggestions = suggest::closest(id, ids, MAX_SUGGESTIONS);
            let count = self.models_of(provider).count();
            if suggestions.is_empty() && count <= LIST_ALL_UP_TO {
                suggestions = self.models_of(provider).map(|m| m.id.clone()).collect();
            }
            LookupError::UnknownModel { provider: provider.to_string(), model: id.to_string(), suggestions }
        })
    }

    /// Like [`Catalogue::model`], but an unknown model id on a known provider gives a
    /// model built from the provider's defaults: its dialect, text input, unknown
    /// (zero) context and output limits, zero prices, `reasoning: false`.
    pub fn resolve(&self, name: &str) -> Result<Model, LookupError> {
        let (provider_id, id) = self.split(name)?;
        if let Some(model) = self.find_model(provider_id, id) {
            return Ok(model.clone());
        }
        let provider = self.provider(provider_id).ok_or_else(|| self.unknown_provider(provider_id))?;
        Ok(Model::new(provider_id, id, provider.dialect))
    }

    /// A warning for `name` when it resolves (a known provider) to a model this catalogue
    /// does not know but that is close to one it does: likely a typo, sent as it is all
    /// the same (catalogues lag new models), so a warning and not an error.
    pub fn unknown_model_warning(&self, name: &str) -> Option<Warning> {
        let (provider, id) = self.split(name).ok()?;
        if self.find_model(provider, id).is_some() {
            return None;
        }
        let ids: Vec<&str> = self.models_of(provider).map(|m| m.id.as_str()).collect();
        let suggestions = suggest::closest(id, ids, 3);
        let first = suggestions.first()?;
        Some(Warning {
            code: "unknown_model".into(),
            message: format!(
                "{provider}:{id} is not in the catalogue and was sent as it is; did you mean {provider}:{first}?"
            ),
        })
    }

    /// The built-in provider `id` beneath this catalogue, parsed on first use.
    fn builtin_provider(&self, id: &str) -> Option<&'static BuiltinProvider> {
        self.builtin?.get(id)
    }

    /// Model `id` of `provider`: this catalogue's own, else the built-in one.
    fn find_model(&self, provider: &str, id: &str) -> Option<&Model> {
        let own = self.models.get(provider).and_then(|models| models.get(id));
        own.or_else(|| self.builtin_provider(provider)?.models.get(id))
    }

    /// Splits `provider:model` at the first colon and checks the provider exists.
    fn split<'n>(&self, name: &'n str) -> Result<(&'n str, &'n str), LookupError> {
        match name.split_once(':') {
            Some((provider, id)) if !provider.is_empty() && !id.is_empty() => {
                if self.provider(provider).is_some() {
                    Ok((provider, id))
                } else {
                    Err(self.unknown_provider(provider))
                }
            }
            _ => Err(self.malformed(name)),
        }
    }

    fn unknown_provider(&self, provider: &str) -> LookupError {
        let known: Vec<String> = self.providers().map(|p| p.id.clone()).collect();
        let suggestions = suggest::closest(provider, known.iter().map(String::as_str), MAX_SUGGESTIONS);
        LookupError::UnknownProvider { provider: provider.to_string(), suggestions, known }
    }

    /// A name without a usable `provider:` prefix: suggest qualified names whose model
    /// part is close to it (for `claude-sonnet-4-5`, `anthropic:claude-sonnet-4-5`).
    fn malformed(&self, name: &str) -> LookupError {
        let bare = name.trim_matches(':');
        let qualified: Vec<String> = self.models().map(|m| format!("{}:{}", m.provider, m.id)).collect();
        let by_id: BTreeMap<&str, Vec<&str>> = qualified.iter().fold(BTreeMap::new(), |mut map, q| {
            if let Some((_, id)) = q.split_once(':') {
                map.entry(id).or_insert_with(Vec::new).push(q.as_str());
            }
            map
        });
        let suggestions = suggest::closest(bare, by_id.keys().copied(), MAX_SUGGESTIONS)
            .iter()
            .flat_map(|id| by_id.get(id.as_str()).into_iter().flatten().map(|q| q.to_string()))
            .take(MAX_SUGGESTIONS)
            .collect();
        LookupError::MalformedName { name: name.to_string(), suggestions }
    }
}

/// The values of `base` and `own` sorted by key, where an entry of `own` hides one of
/// `base` with the same key.
fn overlay<'a, V: 'a>(
    base: impl Iterator<Item = (&'a str, &'a V)>,
    own: impl Iterator<Item = (&'a str, &'a V)>,
) -> impl Iterator<Item = &'a V> + 'a {
    let mut merged: BTreeMap<&'a str, &'a V> = base.collect();
    merged.extend(own);
    merged.into_values()
}

/// The entries of a map that may be absent, keyed by `&str`.
fn entries<V>(map: Option<&BTreeMap<String, V>>) -> impl Iterator<Item = (&str, &V)> {
    map.into_iter().flatten().map(|(key, value)| (key.as_str(), value))
}

/// What a catalogue answers with: every provider and, by provider, every model
/// (providers without models are left out, whichever way they were added).
#[derive(PartialEq)]
struct Content<'a> {
    providers: BTreeMap<&'a str, &'a Provider>,
    models: BTreeMap<&'a str, BTreeMap<&'a str, &'a Model>>,
}

impl Catalogue {
    fn content(&self) -> Content<'_> {
        let providers = self.providers().map(|p| (p.id.as_str(), p)).collect();
        let mut models: BTreeMap<&str, BTreeMap<&str, &Model>> = BTreeMap::new();
        for model in self.models() {
            models.entry(model.provider.as_str()).or_default().insert(model.id.as_str(), model);
        }
        Content { providers, models }
    }
}

/// By content, so a catalogue holding the built-in data lazily equals one that loaded
/// the same files itself (comparing parses whatever built-in data is not parsed yet).
impl PartialEq for Catalogue {
    fn eq(&self, other: &Self) -> bool {
        self.content() == other.content()
    }
}

/// By content, as [`PartialEq`] (printing parses the built-in data not parsed yet), in
/// the shape a derived `Debug` of the maps would have.
impl fmt::Debug for Catalogue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Content { providers, models } = self.content();
        f.debug_struct("Catalogue").field("providers", &providers).field("models", &models).finish()
    }
}
