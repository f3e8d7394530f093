//! Structured output: parsing and checking a reply, and the correction the model gets.

use serde_json::Value;

use crate::data::response::{Response, StopReason};
use crate::data::schema::adapt::validate_adapted;
use crate::data::schema::Validator;

/// A final reply that is not valid structured output.
#[derive(Debug)]
pub(crate) struct Invalid {
    /// What is wrong with it (what a correction tells the model).
    pub(crate) error: String,
    /// Why no correction may be asked, if so.
    final_because: Option<&'static str>,
}

impl Invalid {
    /// True when a correction may be asked: not for a reply cut by the output token
    /// limit, nor for one that ends with tool calls left to the caller (a correction
    /// after calls without results is a history no provider accepts).
    pub(crate) fn correctable(&self) -> bool {
        self.final_because.is_none()
    }

    /// The error as the response reports it when no correction follows.
    pub(crate) fn into_message(self) -> String {
        match self.final_because {
            Some(why) => format!("{} ({why})", self.error),
            None => self.error,
        }
    }
}

/// The one verdict on a final reply, for a call and an agent's turn alike.
pub(crate) fn judge(validator: &dyn Validator, reply: &Response, stop: StopReason) -> Result<Value, Invalid> {
    check(validator, &reply.text()).map_err(|error| {
        let final_because = if stop == StopReason::Length {
            Some("the reply was cut by the output token limit")
        } else if reply.message.tool_uses().next().is_some() {
            Some("the reply ended with tool calls left to the caller")
        } else {
            None
        };
        Invalid { error, final_because }
    })
}

/// The reply's JSON value if it parses and passes the validator, else a short reason.
fn check(validator: &dyn Validator, text: &str) -> Result<Value, String> {
    let json = strip_code_fence(text.trim());
    if json.is_empty() {
        return Err("the reply is empty, expected a JSON value".into());
    }
    let value: Value = serde_json::from_str(json).map_err(|e| format!("the reply is not valid JSON: {e}"))?;
    // Strict mode sends optional properties as nullable: a `null` there means absent.
    validate_adapted(validator, &value).map_err(|e| format!("the reply does not match the schema: {e}"))
}

/// The user message asking for a corrected reply.
pub(crate) fn correction(error: &str) -> String {
    format!(
        "Your previous reply could not be used: {error}. Reply again with only the JSON value, \
         exactly as the schema requires, and nothing else."
    )
}

/// Models without a native JSON mode often wrap JSON in a Markdown code fence.
fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let Some(body) = rest.strip_suffix("```") else { return text };
    // Drop an info string such as `json` on the opening line.
    match body.split_once('\n') {
        Some((info, code)) if !info.contains('{') && !info.contains('[') => code.trim(),
        _ => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::schema::JsonSchemaValidator;
    use serde_json::json;

    #[test]
    fn checks_json_and_schema() {
        let v =
            JsonSchemaValidator::new(json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}))
                .unwrap();
        assert_eq!(check(&v, r#"{"n": 3}"#), Ok(json!({"n": 3})));
        assert_eq!(check(&v, "```json\n{\"n\": 3}\n```"), Ok(json!({"n": 3})));
        assert!(check(&v, "{\"n\": ").unwrap_err().starts_with("the reply is not valid JSON"));
        let err = check(&v, r#"{"n": "three"}"#).unwrap_err();
        assert!(err.starts_with("the reply does not match the schema: at /n:"), "{err}");
        assert!(check(&v, "  ").is_err());
        // Strict mode's stand-in for an absent optional property.
        let optional =
            JsonSchemaValidator::new(json!({"type":"object","properties":{"n":{"type":"integer"}}})).unwrap();
        assert_eq!(check(&optional, r#"{"n": null}"#), Ok(json!({})));
    }
}
