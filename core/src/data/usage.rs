//! Token usage and cost, normalised across dialects.
//!
//! The same meaning everywhere, so usage from different providers can be summed:
//! - `input_tokens` excludes cached tokens (read or written): the uncached prompt only;
//! - `cache_read_tokens` and `cache_write_tokens` are the cached parts of the prompt;
//! - `output_tokens` is every generated token, reasoning included (what is billed as output);
//! - `reasoning_tokens` is the part of `output_tokens` spent on reasoning (informative,
//!   never added again).

use std::iter::Sum;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

use crate::data::model::Prices;

/// Tokens used by one or more requests, and their cost when the prices are known.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Part of `output_tokens` spent on reasoning.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Cost in US dollars, from the model's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// Cost in US dollars, split by kind of token.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cost {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// Sum of the above.
    pub total: f64,
}

impl Usage {
    /// Total tokens (input, cached and output).
    pub fn total_tokens(&self) -> u64 {
        // Saturating, here and in `add`: the counts are whatever the provider sent.
        self.input_tokens
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
            .saturating_add(self.output_tokens)
    }

    /// Sets [`Usage::cost`] from prices given per million tokens.
    pub fn with_cost(mut self, prices: &Prices) -> Self {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        let input = per(self.input_tokens, prices.input);
        let output = per(self.output_tokens, prices.output);
        let cache_read = per(self.cache_read_tokens, prices.cache_read.unwrap_or(prices.input));
        let cache_write = per(self.cache_write_tokens, prices.cache_write.unwrap_or(prices.input));
        self.cost =
            Some(Cost { input, output, cache_read, cache_write, total: input + output + cache_read + cache_write });
        self
    }
}

impl Add for Cost {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            input: self.input + o.input,
            output: self.output + o.output,
            cache_read: self.cache_read + o.cache_read,
            cache_write: self.cache_write + o.cache_write,
            total: self.total + o.total,
        }
    }
}

impl Add for Usage {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            input_tokens: self.input_tokens.saturating_add(o.input_tokens),
            output_tokens: self.output_tokens.saturating_add(o.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_add(o.cache_read_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_add(o.cache_write_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(o.reasoning_tokens),
            cost: match (self.cost, o.cost) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            },
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, o: Self) {
        *self = *self + o;
    }
}

impl Sum for Usage {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), Add::add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_tokens_and_costs() {
        let prices = Prices { input: 3.0, output: 15.0, cache_read: Some(0.3), cache_write: Some(3.75) };
        let a = Usage { input_tokens: 1_000_000, output_tokens: 100_000, ..Usage::default() }.with_cost(&prices);
        let b = Usage { cache_read_tokens: 1_000_000, ..Usage::default() }.with_cost(&prices);
        let sum: Usage = [a, b].into_iter().sum();
        assert_eq!(sum.input_tokens, 1_000_000);
        assert_eq!(sum.cache_read_tokens, 1_000_000);
        let cost = sum.cost.unwrap();
        assert!((cost.total - (3.0 + 1.5 + 0.3)).abs() < 1e-9, "{cost:?}");
    }
}
