//! Errors of catalogue loading and model lookup.

use std::fmt;

/// Why catalogue data could not be loaded. Loading is all or nothing: on error the
/// catalogue is left as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CatalogueError {
    /// The text is not valid JSON or does not have the catalogue file shape
    /// (unknown field, wrong type, unknown dialect ...).
    Json {
        /// Name of the file for embedded data, `None` for data given to
        /// [`Catalogue::load_json`](super::Catalogue::load_json).
        source: Option<String>,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What serde_json reported, without its position suffix.
        message: String,
    },
    /// The data is well-formed but not usable (bad id, neither or both of
    /// `provider` and `extends`, ...).
    Invalid {
        /// File name for embedded data.
        source: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// Models were added to a provider the catalogue does not know.
    UnknownProvider {
        /// File name for embedded data.
        source: Option<String>,
        /// The missing provider id.
        provider: String,
    },
}

impl CatalogueError {
    pub(super) fn from_json(source: Option<&str>, err: &serde_json::Error) -> Self {
        let full = err.to_string();
        let suffix = format!(" at line {} column {}", err.line(), err.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
        Self::Json { source: source.map(str::to_string), line: err.line(), column: err.column(), message }
    }

    pub(super) fn invalid(source: Option<&str>, message: impl Into<String>) -> Self {
        Self::Invalid { source: source.map(str::to_string), message: message.into() }
    }
}

fn origin(source: &Option<String>) -> &str {
    source.as_deref().unwrap_or("catalogue JSON")
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json { source, line, column, message } => {
                write!(f, "{}:{line}:{column}: {message}", origin(source))
            }
            Self::Invalid { source, message } => write!(f, "{}: {message}", origin(source)),
            Self::UnknownProvider { source, provider } => write!(
                f,
                "{}: unknown provider {provider:?}; define it with a \"provider\" object first",
                origin(source)
            ),
        }
    }
}

impl std::error::Error for CatalogueError {}

/// Why a model name could not be looked up. Every variant carries candidates so the
/// message can say what would have worked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LookupError {
    /// The name is not of the form `provider:model` (no colon, or an empty part).
    MalformedName {
        /// The name as given.
        name: String,
        /// Qualified names (`provider:model`) that look like what was meant.
        suggestions: Vec<String>,
    },
    /// No provider has this id.
    UnknownProvider {
        /// The provider part of the name.
        provider: String,
        /// Close provider ids, best first.
        suggestions: Vec<String>,
        /// Every known provider id, sorted.
        known: Vec<String>,
    },
    /// The provider exists but has no model with this id (only from
    /// [`Catalogue::model`](super::Catalogue::model); `resolve` accepts it).
    UnknownModel {
        /// The provider id.
        provider: String,
        /// The model part of the name.
        model: String,
        /// Close model ids of that provider, best first; when none is close and the
        /// provider has only a few models, all of them.
        suggestions: Vec<String>,
    },
}

fn list(items: &[String]) -> String {
    items.join(", ")
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MalformedName { name, suggestions } => {
                write!(f, "model name {name:?} must be \"provider:model\"")?;
                if !suggestions.is_empty() {
                    write!(f, "; did you mean {}?", list(suggestions))?;
                }
                Ok(())
            }
            Self::UnknownProvider { provider, suggestions, known } => {
                write!(f, "unknown provider {provider:?}")?;
                if !suggestions.is_empty() {
                    write!(f, "; did you mean {}?", list(suggestions))?;
                }
                write!(f, " (known providers: {})", list(known))
            }
            Self::UnknownModel { provider, model, suggestions } => {
                write!(f, "unknown model {model:?} for provider {provider:?}")?;
                if !suggestions.is_empty() {
                    write!(f, "; did you mean {}?", list(suggestions))?;
                }
                write!(f, " (Catalogue::resolve accepts any model id of a known provider)")
            }
        }
    }
}

impl std::error::Error for LookupError {}
