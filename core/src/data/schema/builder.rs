//! Builders producing plain JSON Schema values.

use serde_json::{Map, Value};

/// A JSON Schema under construction; every setter adds one keyword.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema(Map<String, Value>);

fn typed(kind: &str) -> Schema {
    let mut map = Map::new();
    map.insert("type".into(), Value::String(kind.into()));
    Schema(map)
}

/// `{"type": "object"}`; add keys with [`Schema::property`] and [`Schema::required`].
pub fn object() -> Schema {
    let mut s = typed("object");
    s.0.insert("properties".into(), Value::Object(Map::new()));
    s
}

/// `{"type": "string"}`.
pub fn string() -> Schema {
    typed("string")
}

/// `{"type": "number"}`.
pub fn number() -> Schema {
    typed("number")
}

/// `{"type": "integer"}`.
pub fn integer() -> Schema {
    typed("integer")
}

/// `{"type": "boolean"}`.
pub fn boolean() -> Schema {
    typed("boolean")
}

/// `{"type": "array", "items": items}`.
pub fn array(items: Schema) -> Schema {
    typed("array").with("items", items.into_value())
}

/// A string from a fixed set: `{"type": "string", "enum": [...]}`.
pub fn enumeration<S: Into<String>>(values: impl IntoIterator<Item = S>) -> Schema {
    let values = values.into_iter().map(|v| Value::String(v.into())).collect();
    typed("string").with("enum", Value::Array(values))
}

/// Any of the given schemas: `{"anyOf": [...]}`.
pub fn any_of(schemas: impl IntoIterator<Item = Schema>) -> Schema {
    let mut map = Map::new();
    map.insert("anyOf".into(), Value::Array(schemas.into_iter().map(Schema::into_value).collect()));
    Schema(map)
}

impl Schema {
    /// Sets any keyword.
    pub fn with(mut self, keyword: &str, value: Value) -> Self {
        self.0.insert(keyword.into(), value);
        self
    }

    /// `description`.
    pub fn description(self, text: impl Into<String>) -> Self {
        self.with("description", Value::String(text.into()))
    }

    /// `title`.
    pub fn title(self, text: impl Into<String>) -> Self {
        self.with("title", Value::String(text.into()))
    }

    /// Adds an object property.
    pub fn property(mut self, name: impl Into<String>, schema: Self) -> Self {
        let props = self.0.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.insert(name.into(), schema.into_value());
        }
        self
    }

    /// Marks object keys as required (added to any already required).
    pub fn required<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        let list = self.0.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            for name in names {
                let name = Value::String(name.into());
                if !list.contains(&name) {
                    list.push(name);
                }
            }
        }
        self
    }

    /// `additionalProperties`.
    pub fn additional_properties(self, allowed: bool) -> Self {
        self.with("additionalProperties", Value::Bool(allowed))
    }

    /// `minLength`.
    pub fn min_length(self, n: u64) -> Self {
        self.with("minLength", n.into())
    }

    /// `maxLength`.
    pub fn max_length(self, n: u64) -> Self {
        self.with("maxLength", n.into())
    }

    /// `pattern` (an ECMA 262 regular expression).
    pub fn pattern(self, regex: impl Into<String>) -> Self {
        self.with("pattern", Value::String(regex.into()))
    }

    /// `format`, e.g. `date-time`, `email`, `uri`.
    pub fn format(self, format: impl Into<String>) -> Self {
        self.with("format", Value::String(format.into()))
    }

    /// `minimum`.
    pub fn minimum(self, n: impl Into<serde_json::Number>) -> Self {
        self.with("minimum", Value::Number(n.into()))
    }

    /// `maximum`.
    pub fn maximum(self, n: impl Into<serde_json::Number>) -> Self {
        self.with("maximum", Value::Number(n.into()))
    }

    /// `minItems`.
    pub fn min_items(self, n: u64) -> Self {
        self.with("minItems", n.into())
    }

    /// `maxItems`.
    pub fn max_items(self, n: u64) -> Self {
        self.with("maxItems", n.into())
    }

    /// The schema as JSON.
    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }
}

impl From<Schema> for Value {
    fn from(s: Schema) -> Self {
        s.into_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builds_plain_json_schema() {
        let s = object()
            .property("name", string().min_length(1).max_length(80).description("Full name"))
            .property("age", integer().minimum(0).maximum(150))
            .property("email", string().format("email"))
            .property("tags", array(string().pattern("^[a-z]+$")).min_items(1).max_items(5))
            .property("role", enumeration(["admin", "user"]))
            .property("score", any_of([number(), boolean()]))
            .required(["name", "age"])
            .additional_properties(false);
        assert_eq!(
            s.into_value(),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 80, "description": "Full name"},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "email": {"type": "string", "format": "email"},
                    "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1, "maxItems": 5},
                    "role": {"type": "string", "enum": ["admin", "user"]},
                    "score": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}
                },
                "required": ["name", "age"],
                "additionalProperties": false
            })
        );
    }
}
