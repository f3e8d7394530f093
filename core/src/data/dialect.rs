//! Which wire format a model speaks, as an identity: a [`Dialect`] is written, read,
//! compared and shown by its name. What a dialect does (building requests, parsing
//! streams) is the wire's: `wire::dialect` adds that behaviour to this same type, and
//! `wire::dialect::custom` registers the application's own formats.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{PoisonError, RwLock};

use serde::{Deserialize, Serialize};

/// A wire format: one of the five built in, or the application's own
/// ([`Dialect::Custom`], registered with `wire::dialect::custom::register`). Written and
/// read as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    /// Anthropic Messages API (`POST /v1/messages`).
    AnthropicMessages,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`) and compatible servers.
    OpenaiCompletions,
    /// OpenAI Responses API (`POST /v1/responses`).
    OpenaiResponses,
    /// Google Gemini API (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`).
    GoogleGemini,
    /// Ollama native chat (`POST /api/chat`, NDJSON).
    OllamaChat,
    /// A wire format of the application's, registered with `wire::dialect::custom::register`.
    Custom(CustomDialect),
}

impl Serialize for Dialect {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Dialect {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl Dialect {
    /// All dialects.
    pub const ALL: [Self; 5] =
        [Self::AnthropicMessages, Self::OpenaiCompletions, Self::OpenaiResponses, Self::GoogleGemini, Self::OllamaChat];

    /// The dialect's name, e.g. `anthropic_messages`.
    pub fn name(self) -> &'static str {
        match self {
            Self::AnthropicMessages => "anthropic_messages",
            Self::OpenaiCompletions => "openai_completions",
            Self::OpenaiResponses => "openai_responses",
            Self::GoogleGemini => "google_gemini",
            Self::OllamaChat => "ollama_chat",
            Self::Custom(custom) => custom.name,
        }
    }

    /// Looks a dialect up by name: a built-in one, or a registered custom one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name).or_else(|| registered(name))
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown dialect name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDialect(pub String);

impl fmt::Display for UnknownDialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
        write!(
            f,
            "unknown dialect {:?}; known: {} (or a wire format registered with custom::register)",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownDialect {}

impl FromStr for Dialect {
    type Err = UnknownDialect;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| UnknownDialect(s.to_string()))
    }
}

/// A registered wire format of the application's, as [`Dialect::Custom`] holds it:
/// compared, ordered and hashed by name. The format itself is the wire's business
/// (`CustomDialect::format`, in `wire::dialect::custom`): data holds it without knowing
/// what it is, so that a model can name a format without data knowing the wire.
#[derive(Clone, Copy)]
pub struct CustomDialect {
    name: &'static str,
    /// The format, opened only by the wire (which alone made it).
    format: &'static (dyn Any + Send + Sync),
}

impl CustomDialect {
    /// The format's name.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// The format, as the wire gave it to [`register`].
    pub(crate) fn erased(self) -> &'static (dyn Any + Send + Sync) {
        self.format
    }
}

impl fmt::Debug for CustomDialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Custom({})", self.name)
    }
}

impl PartialEq for CustomDialect {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for CustomDialect {}

impl PartialOrd for CustomDialect {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CustomDialect {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name.cmp(other.name)
    }
}

impl std::hash::Hash for CustomDialect {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

/// Formats by name, for names read back (a catalogue file, a session's stored model).
static REGISTRY: RwLock<BTreeMap<&'static str, CustomDialect>> = RwLock::new(BTreeMap::new());

/// Why a format could not be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// The name is a built-in dialect's.
    BuiltIn(String),
    /// Another format has this name.
    Taken(String),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BuiltIn(name) => write!(f, "{name:?} is a built-in dialect's name"),
            Self::Taken(name) => write!(f, "another wire format is registered as {name:?}"),
        }
    }
}

impl std::error::Error for RegisterError {}

/// Registers a format under `name`: the registered one again when `same` says it is this
/// format, a refusal when another has the name, else the one `format` makes (called once
/// per format: registering the same format again makes nothing new).
pub(crate) fn register(
    name: &'static str,
    same: impl Fn(&'static (dyn Any + Send + Sync)) -> bool,
    format: impl FnOnce() -> &'static (dyn Any + Send + Sync),
) -> Result<Dialect, RegisterError> {
    if Dialect::ALL.iter().any(|d| d.name() == name) {
        return Err(RegisterError::BuiltIn(name.into()));
    }
    let mut registry = REGISTRY.write().unwrap_or_else(PoisonError::into_inner);
    match registry.get(name) {
        Some(known) if !same(known.format) => Err(RegisterError::Taken(name.into())),
        Some(known) => Ok(Dialect::Custom(*known)),
        None => {
            let custom = CustomDialect { name, format: format() };
            registry.insert(name, custom);
            Ok(Dialect::Custom(custom))
        }
    }
}

/// The registered format named `name`.
fn registered(name: &str) -> Option<Dialect> {
    let registry = REGISTRY.read().unwrap_or_else(PoisonError::into_inner);
    registry.get(name).map(|custom| Dialect::Custom(*custom))
}
