//! Models as data: what a model is, what it accepts and what it costs.

use serde::{Deserialize, Serialize};

use crate::data::dialect::Dialect;

/// A kind of input a model accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    /// Text.
    Text,
    /// Images.
    Image,
    /// PDF documents.
    Pdf,
    /// Audio.
    Audio,
    /// Video.
    Video,
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Prices {
    /// Uncached input.
    #[serde(default)]
    pub input: f64,
    /// Output (reasoning included).
    #[serde(default)]
    pub output: f64,
    /// Cache reads; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Cache writes; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

/// A model: plain data, from the catalogue or built by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The id the provider's API expects, e.g. `claude-sonnet-4-5`.
    pub id: String,
    /// A display name.
    #[serde(default)]
    pub name: String,
    /// Provider id, e.g. `anthropic`.
    pub provider: String,
    /// Wire format used to talk to it.
    pub dialect: Dialect,
    /// Whether the model can reason (thinking options are sent only then).
    #[serde(default)]
    pub reasoning: bool,
    /// Accepted inputs.
    #[serde(default = "default_modalities")]
    pub input: Vec<Modality>,
    /// Context window in tokens.
    #[serde(default)]
    pub context_window: u32,
    /// Maximum output tokens.
    #[serde(default)]
    pub max_output_tokens: u32,
    /// Prices per million tokens.
    #[serde(default)]
    pub prices: Prices,
    /// The text tool-call protocol the model needs (it has no native tool calling, or a
    /// broken one); the `tool_protocol` option's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_protocol: Option<crate::data::tool_protocol::ToolProtocol>,
}

fn default_modalities() -> Vec<Modality> {
    vec![Modality::Text]
}

impl Model {
    /// A model with only the essentials; everything else at its default.
    pub fn new(provider: impl Into<String>, id: impl Into<String>, dialect: Dialect) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            id,
            provider: provider.into(),
            dialect,
            reasoning: false,
            input: default_modalities(),
            context_window: 0,
            max_output_tokens: 0,
            prices: Prices::default(),
            tool_protocol: None,
        }
    }

    /// Whether the model accepts this kind of input.
    pub fn accepts(&self, modality: Modality) -> bool {
        self.input.contains(&modality)
    }
}
