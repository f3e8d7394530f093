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
//! file I/O); `core/catalogue/README.md` documents the format and where each figure
//! came from.
//!
//! ```
//! use omni_core::{Catalogue, Provider};
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

mod error;
mod file;
mod suggest;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use error::{CatalogueError, LookupError};

use crate::data::model::Model;
use crate::data::provider::Provider;

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

/// How many close matches an error lists.
const MAX_SUGGESTIONS: usize = 5;

/// When nothing is close, an unknown-model error lists every model of the provider if
/// it has at most this many.
const LIST_ALL_UP_TO: usize = 12;

/// Providers and their models, keyed and iterated in sorted order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalogue {
    providers: BTreeMap<String, Provider>,
    /// provider id -> model id -> model.
    models: BTreeMap<String, BTreeMap<String, Model>>,
}

impl Catalogue {
    /// A catalogue with no providers and no models.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in catalogue. The embedded files are parsed once per process and each
    /// call returns a copy, so callers may extend it freely. An error here means the
    /// embedded data is broken, which a unit test rules out.
    pub fn builtin() -> Result<Self, CatalogueError> {
        static BUILTIN: OnceLock<Result<Catalogue, CatalogueError>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                let mut catalogue = Self::empty();
                for (name, json) in BUILTIN_FILES {
                    catalogue.load(Some(name), json)?;
                }
                Ok(catalogue)
            })
            .clone()
    }

    /// Adds the providers and models of one catalogue file (the format of
    /// `core/catalogue/*.json`). Entries replace earlier ones with the same key
    /// (provider id, or provider and model id); a replaced provider keeps its models.
    /// On error nothing is changed.
    pub fn load_json(&mut self, json: &str) -> Result<(), CatalogueError> {
        self.load(None, json)
    }

    fn load(&mut self, source: Option<&str>, json: &str) -> Result<(), CatalogueError> {
        let parsed = file::parse(source, json, |id| self.providers.get(id).map(|p| p.dialect))?;
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
        if !self.providers.contains_key(&model.provider) {
            return Err(CatalogueError::UnknownProvider { source: None, provider: model.provider });
        }
        self.models.entry(model.provider.clone()).or_default().insert(model.id.clone(), model);
        Ok(())
    }

    /// The provider with this id.
    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.get(id)
    }

    /// All providers, sorted by id.
    pub fn providers(&self) -> impl Iterator<Item = &Provider> + '_ {
        self.providers.values()
    }

    /// All models, sorted by provider id and then model id.
    pub fn models(&self) -> impl Iterator<Item = &Model> + '_ {
        self.models.values().flat_map(BTreeMap::values)
    }

    /// The models of one provider, sorted by id (empty for an unknown provider).
    pub fn models_of<'a>(&'a self, provider: &str) -> impl Iterator<Item = &'a Model> + 'a {
        self.models.get(provider).into_iter().flat_map(BTreeMap::values)
    }

    /// Looks up `provider:model` (split at the first colon). Strict: the model must be
    /// in the catalogue; errors suggest close names.
    pub fn model(&self, name: &str) -> Result<&Model, LookupError> {
        let (provider, id) = self.split(name)?;
        self.models.get(provider).and_then(|models| models.get(id)).ok_or_else(|| {
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
        if let Some(model) = self.models.get(provider_id).and_then(|models| models.get(id)) {
            return Ok(model.clone());
        }
        let provider = self.providers.get(provider_id).ok_or_else(|| self.unknown_provider(provider_id))?;
        Ok(Model::new(provider_id, id, provider.dialect))
    }

    /// Splits `provider:model` at the first colon and checks the provider exists.
    fn split<'n>(&self, name: &'n str) -> Result<(&'n str, &'n str), LookupError> {
        match name.split_once(':') {
            Some((provider, id)) if !provider.is_empty() && !id.is_empty() => {
                if self.providers.contains_key(provider) {
                    Ok((provider, id))
                } else {
                    Err(self.unknown_provider(provider))
                }
            }
            _ => Err(self.malformed(name)),
        }
    }

    fn unknown_provider(&self, provider: &str) -> LookupError {
        let known: Vec<String> = self.providers.keys().cloned().collect();
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
