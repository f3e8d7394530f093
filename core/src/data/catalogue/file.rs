//! The catalogue file format (see `core/catalogue/README.md`) and its validation.
//!
//! A file is parsed and checked completely before anything is inserted, so a bad file
//! never leaves a catalogue half-updated.

use serde::Deserialize;

use super::CatalogueError;
use crate::data::dialect::Dialect;
use crate::data::model::{Modality, Model, Prices};
use crate::data::provider::Provider;

/// One file: a provider (defined here, or an existing one named by `extends`) and its models.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    /// A full provider definition; replaces a provider with the same id.
    #[serde(default)]
    provider: Option<Provider>,
    /// The id of a provider defined earlier, to add models to it.
    #[serde(default)]
    extends: Option<String>,
    #[serde(default)]
    models: Vec<FileModel>,
}

/// A model entry: [`Model`] without `provider` (taken from the file), with `dialect`
/// optional (the provider's by default). Unknown fields are errors so typos surface.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileModel {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    dialect: Option<Dialect>,
    #[serde(default)]
    reasoning: bool,
    #[serde(default)]
    input: Option<Vec<Modality>>,
    #[serde(default)]
    context_window: u32,
    #[serde(default)]
    max_output_tokens: u32,
    #[serde(default)]
    prices: Prices,
    #[serde(default)]
    tool_protocol: Option<crate::data::tool_protocol::ToolProtocol>,
}

/// A parsed and validated file, ready to be inserted.
#[derive(Debug)]
pub(super) struct ParsedFile {
    /// Set when the file defines its provider.
    pub provider: Option<Provider>,
    /// The provider id every model belongs to.
    pub provider_id: String,
    /// Models with `provider` and `dialect` filled in.
    pub models: Vec<Model>,
}

/// Parses one file. `source` names embedded files in errors. `lookup_dialect` gives
/// the dialect of an already known provider, for files that use `extends`.
pub(super) fn parse(
    source: Option<&str>,
    json: &str,
    lookup_dialect: impl Fn(&str) -> Option<Dialect>,
) -> Result<ParsedFile, CatalogueError> {
    let file: CatalogueFile = serde_json::from_str(json).map_err(|e| CatalogueError::from_json(source, &e))?;
    let (provider, provider_id, default_dialect) = match (file.provider, file.extends) {
        (Some(provider), None) => {
            validate_provider(source, &provider)?;
            let id = provider.id.clone();
            let dialect = provider.dialect;
            (Some(provider), id, dialect)
        }
        (None, Some(id)) => {
            let dialect = lookup_dialect(&id).ok_or_else(|| CatalogueError::UnknownProvider {
                source: source.map(str::to_string),
                provider: id.clone(),
            })?;
            (None, id, dialect)
        }
        (Some(_), Some(_)) => {
            return Err(CatalogueError::invalid(source, "give either \"provider\" or \"extends\", not both"))
        }
        (None, None) => {
            return Err(CatalogueError::invalid(
                source,
                "missing \"provider\" (an object) or \"extends\" (a provider id)",
            ))
        }
    };
    let models = file
        .models
        .into_iter()
        .map(|m| {
            validate_model_id(source, &m.id)?;
            Ok(Model {
                name: m.name.unwrap_or_else(|| m.id.clone()),
                provider: provider_id.clone(),
                dialect: m.dialect.unwrap_or(default_dialect),
                reasoning: m.reasoning,
                input: m.input.unwrap_or_else(|| vec![Modality::Text]),
                context_window: m.context_window,
                max_output_tokens: m.max_output_tokens,
                prices: m.prices,
                tool_protocol: m.tool_protocol,
                id: m.id,
            })
        })
        .collect::<Result<Vec<_>, CatalogueError>>()?;
    Ok(ParsedFile { provider, provider_id, models })
}

/// Provider ids appear before the first colon of `provider:model`, so they must not
/// contain one; whitespace would make names ambiguous in logs and configs.
pub(super) fn validate_provider(source: Option<&str>, provider: &Provider) -> Result<(), CatalogueError> {
    let id = &provider.id;
    if id.is_empty() || id.contains(':') || id.chars().any(char::is_whitespace) {
        return Err(CatalogueError::invalid(
            source,
            format!("provider id {id:?} must be non-empty, without ':' or whitespace"),
        ));
    }
    if provider.base_url.trim().is_empty() {
        return Err(CatalogueError::invalid(source, format!("provider {id:?} has an empty base_url")));
    }
    Ok(())
}

/// Model ids may contain colons (`llama3.2:3b`) but must not be empty.
pub(super) fn validate_model_id(source: Option<&str>, id: &str) -> Result<(), CatalogueError> {
    if id.trim().is_empty() {
        return Err(CatalogueError::invalid(source, "a model has an empty id"));
    }
    Ok(())
}
