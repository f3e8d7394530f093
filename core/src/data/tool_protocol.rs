//! How a request offers its tools, as a choice: the provider's own tool calling, or a
//! text protocol, named. The choice is data (an option, a catalogue model's or a
//! provider's field, written and read by name); what a text protocol does (the prompt,
//! the rendering, the parser) is `text_tools`', which adds it to this same type
//! (`ToolProtocol::text`, `ToolProtocol::custom`).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// How a request offers its tools to the model: the provider's own tool calling, or a
/// text protocol (the `tool_protocol` option; a catalogue model may name the one it needs).
#[derive(Clone, Default)]
pub enum ToolProtocol {
    /// The provider's own tool calls.
    #[default]
    Native,
    /// The `xml` text protocol (`text_tools::xml::Xml`).
    Xml,
    /// The `json` text protocol (`text_tools::json::Json`).
    Json,
    /// The `hermes` text protocol (`text_tools::hermes::Hermes`).
    Hermes,
    /// An application's own protocol, made with `ToolProtocol::custom`.
    Custom(CustomProtocol),
}

impl ToolProtocol {
    /// Its name: `native`, `xml`, `json`, `hermes`, or the custom protocol's.
    pub fn name(&self) -> &str {
        match self {
            Self::Native => "native",
            Self::Xml => "xml",
            Self::Json => "json",
            Self::Hermes => "hermes",
            Self::Custom(protocol) => &protocol.name,
        }
    }
}

/// An application's text protocol, as [`ToolProtocol::Custom`] holds it: its name, and
/// the protocol object, which only `text_tools` opens (`CustomProtocol::protocol`), so that
/// an option can hold a protocol without data knowing what a protocol does.
#[derive(Clone)]
pub struct CustomProtocol {
    name: Arc<str>,
    /// The protocol, as `text_tools` gave it.
    object: Arc<dyn Any + Send + Sync>,
    /// The address of the protocol object: two custom protocols are the same only when
    /// they are the same object (however often it was wrapped).
    identity: usize,
}

impl CustomProtocol {
    /// A protocol named `name`, `identity` telling one object from another; `object` is
    /// what `text_tools` reads back with [`object`](Self::object).
    pub(crate) fn new(name: &str, identity: usize, object: Arc<dyn Any + Send + Sync>) -> Self {
        Self { name: name.into(), object, identity }
    }

    /// The protocol object.
    pub(crate) fn object(&self) -> &(dyn Any + Send + Sync) {
        &*self.object
    }
}

impl fmt::Debug for ToolProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for CustomProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Two custom protocols are the same only when they are the same object.
impl PartialEq for ToolProtocol {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Custom(a), Self::Custom(b)) => a.identity == b.identity,
            (Self::Custom(_), _) | (_, Self::Custom(_)) => false,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// Written as its name; a custom protocol is code, so only the built-in names read back.
impl serde::Serialize for ToolProtocol {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for ToolProtocol {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        match name.as_str() {
            "native" => Ok(Self::Native),
            "xml" => Ok(Self::Xml),
            "json" => Ok(Self::Json),
            "hermes" => Ok(Self::Hermes),
            other => Err(serde::de::Error::custom(format!(
                "unknown tool protocol {other:?}: native, xml, json or hermes (a custom protocol is set in code)"
            ))),
        }
    }
}
