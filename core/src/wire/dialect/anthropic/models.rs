//! What the request builder must know about a Claude model that the catalogue does not
//! say: which thinking modes and sampling parameters it accepts.
//!
//! Read from the model id, so a new model of a known family is covered the day it
//! appears. Ids come in several shapes, all handled: `claude-sonnet-4-5-20250929`,
//! `claude-3-7-sonnet-latest` (version before the family), `anthropic/claude-opus-4-6`
//! (gateways), `anthropic.claude-opus-4-6-v1` (Bedrock), `claude-mythos-preview`.
//! An id that is not a Claude model (a local server behind `/v1/messages`) gets the
//! most permissive traits: budget thinking, both samplers.

/// Thinking and sampling capabilities of one model, per Anthropic's docs:
/// - adaptive thinking (`thinking.type: "adaptive"` + `output_config.effort`) exists
///   from Claude 4.6 on, and is the only thinking mode from 4.7 on and on Mythos/Fable;
/// - Claude 4.1 to 4.6 reject `temperature` and `top_p` together;
/// - Claude 4.7 and later, Mythos and Fable reject non-default sampling parameters;
/// - effort `xhigh` exists from Opus 4.7 on (not on Mythos Preview, nor on 4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct ModelTraits {
    /// Accepts `thinking: {"type": "adaptive"}`.
    pub adaptive_thinking: bool,
    /// Accepts `thinking: {"type": "enabled", "budget_tokens": N}`.
    pub budget_thinking: bool,
    /// Rejects `temperature` and `top_p` outright.
    pub fixed_sampling: bool,
    /// Rejects `temperature` and `top_p` in the same request.
    pub one_sampler: bool,
    /// Accepts effort `xhigh`.
    pub xhigh_effort: bool,
}

const FAMILIES: [&str; 5] = ["opus", "sonnet", "haiku", "mythos", "fable"];

impl ModelTraits {
    /// Traits for a model id.
    pub(super) fn from_id(id: &str) -> Self {
        let lower = id.to_ascii_lowercase();
        let tokens: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()).collect();
        let Some(family_at) = tokens.iter().position(|t| FAMILIES.contains(t)) else {
            return Self { budget_thinking: true, ..Self::default() };
        };
        let family = tokens.get(family_at).copied().unwrap_or_default();
        let newer_family = matches!(family, "mythos" | "fable");
        let after = version_after(&tokens[family_at + 1..]);
        let version = after.or_else(|| version_before(&tokens[..family_at]));
        let at_least = |major: u32, minor: u32| version.is_some_and(|v| v >= (major, minor));
        let adaptive_only = newer_family || at_least(4, 7);
        Self {
            adaptive_thinking: adaptive_only || at_least(4, 6),
            budget_thinking: !adaptive_only,
            fixed_sampling: adaptive_only,
            one_sampler: at_least(4, 1),
            // Mythos Preview has no version and no xhigh; every versioned model from 4.7 on has it.
            xhigh_effort: at_least(4, 7),
        }
    }
}

/// `opus-4-6-20260101` -> (4, 6); `sonnet-4-20250514` -> (4, 0); dates are not minors.
fn version_after(tokens: &[&str]) -> Option<(u32, u32)> {
    let major = small_number(tokens.first()?)?;
    let minor = tokens.get(1).and_then(|t| small_number(t)).unwrap_or(0);
    Some((major, minor))
}

/// `claude-3-5-sonnet` -> (3, 5); `claude-3-haiku` -> (3, 0).
fn version_before(tokens: &[&str]) -> Option<(u32, u32)> {
    let numbers: Vec<u32> = tokens.iter().rev().map_while(|t| small_number(t)).collect();
    match numbers.as_slice() {
        [] => None,
        [major] => Some((*major, 0)),
        [minor, major, ..] => Some((*major, *minor)),
    }
}

/// A version component: one or two digits (longer numbers are dates or build ids).
fn small_number(token: &str) -> Option<u32> {
    if token.is_empty() || token.len() > 2 || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_from_every_id_shape() {
        let t = ModelTraits::from_id;
        let legacy = ModelTraits { budget_thinking: true, ..ModelTraits::default() };
        assert_eq!(t("claude-3-7-sonnet-20250219"), legacy);
        assert_eq!(t("claude-3-5-haiku-latest"), legacy);
        assert_eq!(t("claude-sonnet-4-20250514"), legacy);
        assert_eq!(t("smollm2"), legacy);
        let one_sampler = ModelTraits { one_sampler: true, ..legacy };
        assert_eq!(t("claude-opus-4-1-20250805"), one_sampler);
        assert_eq!(t("claude-sonnet-4-5"), one_sampler);
        assert_eq!(t("claude-haiku-4-5-20251001"), one_sampler);
        let four_six = ModelTraits { adaptive_thinking: true, ..one_sampler };
        assert_eq!(t("claude-opus-4-6"), four_six);
        assert_eq!(t("anthropic.claude-opus-4-6-v1"), four_six);
        assert_eq!(t("anthropic/claude-sonnet-4-6"), four_six);
        let newest = ModelTraits {
            adaptive_thinking: true,
            budget_thinking: false,
            fixed_sampling: true,
            one_sampler: true,
            xhigh_effort: true,
        };
        assert_eq!(t("claude-opus-4-7"), newest);
        assert_eq!(t("claude-sonnet-5"), newest);
        assert_eq!(t("claude-fable-5-1"), newest);
        assert_eq!(t("claude-mythos-preview"), ModelTraits { one_sampler: false, xhigh_effort: false, ..newest });
    }
}
