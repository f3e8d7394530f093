//! A session's title, made once after its first committed turn: from its first message's
//! text (the heuristic), or by a short model call over its first messages, whose answer is
//! cleaned and whose failure falls back to the heuristic.

use crate::data::message::{Context, Message, Role};

/// How titles are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TitleMode {
    /// The first message's text, cut short (`heuristic_title`).
    #[default]
    Heuristic,
    /// A short call to the model the driver was given for titles (`title_request`).
    Model,
    /// No title is made.
    Off,
}

/// The longest heuristic title, in characters (the ellipsis not counted).
pub(crate) const HEURISTIC_CHARS: usize = 50;

/// The most tokens a model title may take.
pub(crate) const TITLE_MAX_TOKENS: u32 = 50;

/// How many of the first messages a model title is made from.
pub const TITLE_MESSAGES: usize = 4;

/// The instruction of a model title request.
pub(crate) const TITLE_INSTRUCTION: &str = "Write a concise title of 3 to 6 words for the conversation below. \
Answer with the title only: no quotes, no punctuation, no explanation.";

/// The first message's text with whitespace collapsed, cut to [`HEURISTIC_CHARS`]
/// characters at a word boundary with an ellipsis; `None` when it has no text.
pub(crate) fn heuristic_title(messages: &[Message]) -> Option<String> {
    let first = messages.iter().find(|m| m.role == Role::User).or_else(|| messages.first())?;
    let text = first.text();
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    let whole = words.join(" ");
    if whole.chars().count() <= HEURISTIC_CHARS {
        return Some(whole);
    }
    let mut title = String::new();
    for word in &words {
        let more = usize::from(!title.is_empty()) + word.chars().count();
        if title.chars().count() + more > HEURISTIC_CHARS {
            break;
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
    }
    if title.is_empty() {
        // One word longer than the limit: cut inside it.
        title = whole.chars().take(HEURISTIC_CHARS).collect();
    }
    title.push('…');
    Some(title)
}

/// What a model title request sends: the instruction as the system prompt, and one user
/// message with the first [`TITLE_MESSAGES`] messages written as `Role: text`.
pub(crate) fn title_request(messages: &[Message]) -> Context {
    let mut transcript = String::new();
    for message in messages.iter().take(TITLE_MESSAGES) {
        let role = match message.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
        };
        let text = message.text().split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            continue;
        }
        if !transcript.is_empty() {
            transcript.push('\n');
        }
        transcript.push_str(role);
        transcript.push_str(": ");
        transcript.push_str(&text);
    }
    Context { system: Some(TITLE_INSTRUCTION.to_owned()), messages: vec![Message::user(transcript)], tools: Vec::new() }
}

/// A model's answer as a title: its first line, whitespace collapsed, without the quotes
/// and punctuation models add anyway, cut like a heuristic title; `None` when nothing is
/// left.
pub(crate) fn clean_title(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|line| !line.is_empty())?;
    let line = line.strip_prefix("Title:").or_else(|| line.strip_prefix("title:")).unwrap_or(line);
    let kept: String = line
        .chars()
        .map(|c| if c.is_alphanumeric() || c == '-' || c == '\'' || c.is_whitespace() { c } else { ' ' })
        .collect();
    let kept = kept.trim_matches(|c: char| c == '\'' || c == '-' || c.is_whitespace());
    heuristic_title(&[Message::user(kept)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_first_message_is_the_title_with_whitespace_collapsed() {
        let title = heuristic_title(&[Message::user("  How do\n\tI  sort a Vec?  ")]);
        assert_eq!(title.as_deref(), Some("How do I sort a Vec?"));
    }

    #[test]
    fn a_long_one_is_cut_at_a_word_boundary_with_an_ellipsis() {
        let text = "Please explain the difference between a mutex and a read write lock in Rust";
        let title = heuristic_title(&[Message::user(text)]).unwrap();
        assert_eq!(title, "Please explain the difference between a mutex and…");
        assert!(title.chars().count() <= HEURISTIC_CHARS + 1);
        let word = "x".repeat(80);
        assert_eq!(heuristic_title(&[Message::user(word)]).unwrap().chars().count(), HEURISTIC_CHARS + 1);
        assert_eq!(heuristic_title(&[Message::user(" \n ")]), None);
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let text = "é".repeat(30) + " " + &"ü".repeat(30);
        let title = heuristic_title(&[Message::user(text)]).unwrap();
        assert_eq!(title, "é".repeat(30) + "…");
    }

    #[test]
    fn the_request_writes_the_first_four_messages_as_role_and_text() {
        let messages = vec![
            Message::user("Hi"),
            Message::assistant("Hello!\nHow can I help?"),
            Message::user("Sort a Vec"),
            Message::assistant("Use sort()"),
            Message::user("left out"),
        ];
        let context = title_request(&messages);
        assert_eq!(context.system.as_deref(), Some(TITLE_INSTRUCTION));
        assert_eq!(
            context.messages[0].text(),
            "User: Hi\nAssistant: Hello! How can I help?\nUser: Sort a Vec\nAssistant: Use sort()"
        );
    }

    #[test]
    fn an_answer_loses_quotes_punctuation_and_extra_lines() {
        assert_eq!(
            clean_title("\"Sorting a Vec in Rust.\"\n\nHope this helps").as_deref(),
            Some("Sorting a Vec in Rust")
        );
        assert_eq!(clean_title("Title: Rust's borrow checker!").as_deref(), Some("Rust's borrow checker"));
        assert_eq!(clean_title("  \n\"...\""), None);
    }
}
