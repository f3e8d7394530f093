//! "Did you mean" candidates for unknown provider and model names (and extra option keys).
//!
//! Ranking, best first: the same name up to case and separators (`claude_sonnet_4.5`
//! for `claude-sonnet-4-5`), then names containing the query or contained in it
//! (`sonnet`), then names within a small edit distance (`claude-sonet-4-5`). Ties are
//! broken by distance and then by name, so the output is deterministic.

/// Queries longer than this only get the cheap tiers: the edit distance is quadratic
/// and user input is unbounded.
const MAX_EDIT_QUERY: usize = 128;

/// Up to `limit` candidates close to `query`, best first.
pub(crate) fn closest<'a>(query: &str, candidates: impl IntoIterator<Item = &'a str>, limit: usize) -> Vec<String> {
    let query_norm = normalize(query);
    let threshold = (query_norm.chars().count() / 3).max(2);
    let mut ranked: Vec<(u8, usize, &str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let cand_norm = normalize(candidate);
            let distance =
                if query_norm.len() <= MAX_EDIT_QUERY { levenshtein(&query_norm, &cand_norm) } else { usize::MAX };
            let tier = if cand_norm == query_norm {
                0
            } else if query_norm.chars().count() >= 3
                && cand_norm.chars().count() >= 3
                && (cand_norm.contains(&query_norm) || query_norm.contains(&cand_norm))
            {
                1
            } else if distance <= threshold {
                2
            } else {
                return None;
            };
            Some((tier, distance, candidate))
        })
        .collect();
    ranked.sort_unstable();
    ranked.dedup_by(|a, b| a.2 == b.2);
    ranked.into_iter().take(limit).map(|(_, _, name)| name.to_string()).collect()
}

/// Lowercase, with `_`, `.` and spaces read as `-`.
fn normalize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '_' | '.' | ' ' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Edit distance over chars, two rows.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitution.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("same", "same"), 0);
    }

    #[test]
    fn ranks_separator_variants_first_then_substrings_then_typos() {
        let names = ["claude-sonnet-4-5", "claude-sonnet-5", "claude-haiku-4-5", "gpt-5"];
        assert_eq!(closest("Claude_Sonnet_4.5", names, 3)[0], "claude-sonnet-4-5");
        assert_eq!(closest("sonnet", names, 5), ["claude-sonnet-5", "claude-sonnet-4-5"]);
        assert_eq!(closest("claude-sonet-4-5", names, 1), ["claude-sonnet-4-5"]);
        assert!(closest("zzzzzz", names, 5).is_empty());
    }

    #[test]
    fn long_queries_do_not_run_the_edit_distance() {
        let long = "x".repeat(10_000);
        assert!(closest(&long, ["abc"], 5).is_empty());
    }
}
