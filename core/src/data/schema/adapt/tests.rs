//! Each adapter against its provider's documented rules (sources in each module's doc).

use serde_json::{json, Value};

use super::*;
use crate::data::schema::JsonSchemaValidator;

/// One case: input, expected output, and a text every expected warning contains (one
/// warning per entry, in order).
struct Case {
    name: &'static str,
    input: Value,
    output: Value,
    warnings: &'static [&'static str],
}

fn run(adapter: fn(&Value) -> (Value, Vec<Warning>), cases: Vec<Case>) {
    for case in cases {
        let (output, warnings) = adapter(&case.input);
        assert_eq!(output, case.output, "{}: output", case.name);
        assert_eq!(warnings.len(), case.warnings.len(), "{}: {warnings:#?}", case.name);
        for (warning, expected) in warnings.iter().zip(case.warnings) {
            assert!(warning.message.contains(expected), "{}: {:?} lacks {expected:?}", case.name, warning.message);
        }
        // Pure and deterministic: the same input gives the same answer.
        assert_eq!(adapter(&case.input), (output, warnings), "{}: deterministic", case.name);
    }
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

// OpenAI Structured Outputs guide, "Supported schemas": every object closed, every
// property required, optional ones as a union with null; root an object, not anyOf;
// allOf, not, dependentRequired, dependentSchemas, if/then/else unsupported.
#[test]
fn openai_strict_follows_the_supported_schemas_guide() {
    run(
        openai_strict,
        vec![
            Case {
                name: "already strict: untouched",
                input: obj(json!({"a": {"type": "string"}}), &["a"]),
                output: obj(json!({"a": {"type": "string"}}), &["a"]),
                warnings: &[],
            },
            Case {
                name: "supported constraints stay",
                input: obj(
                    json!({
                        "s": {"type": "string", "pattern": "^@", "format": "email", "minLength": 1, "maxLength": 9},
                        "n": {"type": "number", "minimum": 0, "maximum": 9, "exclusiveMinimum": 0,
                              "exclusiveMaximum": 10, "multipleOf": 0.5},
                        "l": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
                        "e": {"enum": ["F", "C"], "description": "unit", "title": "Unit"},
                        "k": {"const": "x"}
                    }),
                    &["s", "n", "l", "e", "k"],
                ),
                output: obj(
                    json!({
                        "s": {"type": "string", "pattern": "^@", "format": "email", "minLength": 1, "maxLength": 9},
                        "n": {"type": "number", "minimum": 0, "maximum": 9, "exclusiveMinimum": 0,
                              "exclusiveMaximum": 10, "multipleOf": 0.5},
                        "l": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
                        "e": {"enum": ["F", "C"], "description": "unit", "title": "Unit"},
                        "k": {"const": "x"}
                    }),
                    &["s", "n", "l", "e", "k"],
                ),
                warnings: &[],
            },
            Case {
                name: "objects closed, optional properties required and nullable",
                input: json!({"type": "object", "properties": {
                    "a": {"type": "string"},
                    "b": {"type": "integer"},
                    "c": {"type": "string", "enum": ["x", "y"]},
                    "d": {"type": ["string", "null"]},
                    "e": {"type": "array", "items": {"properties": {"f": {"type": "boolean"}}, "required": ["f"]}}
                }, "required": ["a"]}),
                output: obj(
                    json!({
                        "a": {"type": "string"},
                        "b": {"type": ["integer", "null"]},
                        "c": {"anyOf": [{"type": "string", "enum": ["x", "y"]}, {"type": "null"}]},
                        "d": {"type": ["string", "null"]},
                        "e": {"type": ["array", "null"], "items": obj(json!({"f": {"type": "boolean"}}), &["f"])}
                    }),
                    &["a", "b", "c", "d", "e"],
                ),
                warnings: &["sent optional properties as required and nullable at /properties/b, /properties/c"],
            },
            Case {
                name: "a $ref with siblings is inlined, as OpenAI's SDK does",
                input: json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/P", "description": "where"}},
                    "required": ["p"], "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}},
                    "required": ["x"]}}}),
                output: json!({"type": "object", "additionalProperties": false, "required": ["p"],
                    "properties": {"p": {"description": "where", "type": "object", "additionalProperties": false,
                        "properties": {"x": {"type": "number"}}, "required": ["x"]}},
                    "$defs": {"P": obj(json!({"x": {"type": "number"}}), &["x"])}}),
                warnings: &[],
            },
            Case {
                name: "a root $ref is inlined; recursion stays a bare $ref",
                input: json!({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
                    "value": {"type": "number"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
                }, "required": ["value", "next"], "additionalProperties": false}}}),
                output: json!({"type": "object", "properties": {
                    "value": {"type": "number"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
                }, "required": ["value", "next"], "additionalProperties": false, "$defs": {"Node": {"type": "object",
                    "properties": {"value": {"type": "number"}, "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                    "required": ["value", "next"], "additionalProperties": false}}}),
                warnings: &[],
            },
            Case {
                name: "siblings of a recursive $ref are dropped",
                input: obj(
                    json!({"kids": {"type": "array", "items": {"$ref": "#", "description": "a child"}}}),
                    &["kids"],
                ),
                output: obj(json!({"kids": {"type": "array", "items": {"$ref": "#"}}}), &["kids"]),
                warnings: &["removed `description` beside a recursive `$ref` at /properties/kids/items"],
            },
            Case {
                name: "allOf of a reference and an extension merges",
                input: json!({"type": "object", "properties": {"x": {"allOf": [{"$ref": "#/$defs/B"},
                    {"properties": {"extra": {"type": "string"}}, "required": ["extra"]}]}}, "required": ["x"],
                    "additionalProperties": false, "$defs": {"B": obj(json!({"id": {"type": "integer"}}), &["id"])}}),
                output: json!({"type": "object", "properties": {"x": obj(json!({"id": {"type": "integer"},
                    "extra": {"type": "string"}}), &["id", "extra"])}, "required": ["x"], "additionalProperties": false,
                    "$defs": {"B": obj(json!({"id": {"type": "integer"}}), &["id"])}}),
                warnings: &[],
            },
            Case {
                name: "unsupported keywords removed, plain ones kept as a hint",
                input: obj(
                    json!({
                        "a": {"type": "string", "format": "uri", "description": "a link"},
                        "b": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                        "c": {"type": "integer", "not": {"const": 3}},
                        "d": {"type": "string", "allOf": [{"minLength": 1}, {"minLength": 2}]},
                        "e": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
                    }),
                    &["a", "b", "c", "d", "e"],
                ),
                output: obj(
                    json!({
                        "a": {"type": "string", "description": "a link\n\n{format: \"uri\"}"},
                        "b": {"type": "array", "items": {"type": "string"}, "description": "{uniqueItems: true}"},
                        "c": {"type": "integer"},
                        "d": {"type": "string"},
                        "e": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
                    }),
                    &["a", "b", "c", "d", "e"],
                ),
                warnings: &[
                    "removed `format` at /properties/a; removed `uniqueItems` at /properties/b; removed `not` at \
                     /properties/c; removed `allOf` at /properties/d; sent `oneOf` as `anyOf` at /properties/e",
                ],
            },
            Case {
                name: "meta keywords and null defaults go silently; other defaults stay",
                input: json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": "c",
                    "type": "object", "properties": {"n": {"type": ["integer", "null"], "default": null},
                    "m": {"type": "integer", "default": 10}}, "required": ["n", "m"]}),
                output: obj(
                    json!({"n": {"type": ["integer", "null"]}, "m": {"type": "integer", "default": 10}}),
                    &["n", "m"],
                ),
                warnings: &[],
            },
        ],
    );
}

#[test]
fn openai_strict_falls_back_when_meaning_would_change() {
    let cases = [
        (json!({"type": "object"}), "a free-form object (no `properties`) at the root"),
        (
            json!({"type": "object", "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            "an object open to other properties (`additionalProperties`) at /properties/tags",
        ),
        (json!({"type": "object", "properties": {}, "additionalProperties": true}), "open to other properties"),
        (json!({"type": "array", "items": {"type": "string"}}), "a root that is not of type object"),
        (json!({"anyOf": [obj(json!({}), &[]), obj(json!({}), &[])]}), "a root that is not of type object"),
        (json!({"type": "object", "properties": {"a": true}}), "the boolean schema `true` at /properties/a"),
        (
            json!({"type": "object", "properties": {"a": {"description": "anything"}}}),
            "a schema without a type at /properties/a",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}),
            "not inside the document",
        ),
        (deep_object(11), "more than 10 levels of nested objects"),
        (obj(json!({"e": {"enum": (0..1001).collect::<Vec<_>>()}}), &["e"]), "1001 enum values (at most 1000)"),
    ];
    for (schema, reason) in cases {
        let (sent, warnings) = openai_strict(&schema);
        assert_eq!(sent, schema, "{reason}: the original is sent");
        assert!(!is_openai_strict(&sent), "{reason}");
        assert_eq!(warnings.len(), 1, "{reason}: {warnings:?}");
        assert_eq!(warnings[0].code, "schema_not_strict");
        assert!(warnings[0].message.contains(reason), "{:?} lacks {reason:?}", warnings[0].message);
    }
    assert!(is_openai_strict(&openai_strict(&deep_object(10)).0));
    assert_eq!(openai_strict(&Value::Null), (Value::Null, Vec::new()));
}

fn deep_object(levels: usize) -> Value {
    let mut schema = obj(json!({}), &[]);
    for _ in 1..levels {
        schema = obj(json!({"inner": schema}), &["inner"]);
    }
    schema
}

#[test]
fn openai_strict_output_always_verifies() {
    let schemas = [
        json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "object", "properties": {"x": {"type": "string"}}},
            {"type": "string", "minLength": 2}]}, "b": {"type": "array", "items": {"properties": {"q": {}}}}}}),
        json!({"type": "object", "properties": {"d": {"type": "string", "format": "date-time"},
            "t": {"type": "array", "items": [{"type": "string"}], "contains": {"type": "string"}}}}),
        json!({"type": "object", "definitions": {"X": {"type": "object", "properties": {"y": {"$ref": "#/definitions/X"}}}},
            "properties": {"x": {"$ref": "#/definitions/X"}}}),
    ];
    for schema in schemas {
        let (sent, warnings) = openai_strict(&schema);
        let fell_back = warnings.iter().any(|w| w.code == "schema_not_strict");
        assert!(is_openai_strict(&sent) != fell_back, "{sent:#}\n{warnings:?}");
    }
}

// The nulls strict mode asks for stand for absent optional properties: the original
// schema accepts the reply once they are dropped.
#[test]
fn strict_replies_validate_against_the_original_schema() {
    let original = json!({"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "note": {"type": ["string", "null"]},
        "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}}
    }, "required": ["city"], "$defs": {"Stop": {"type": "object", "properties": {
        "name": {"type": "string"}, "minutes": {"type": "integer"}}, "required": ["name"]}}});
    let (strict, _) = openai_strict(&original);
    assert!(is_openai_strict(&strict));
    let reply = json!({"city": "Oslo", "unit": null, "note": null, "stops": [{"name": "A", "minutes": null}]});
    let strict_validator = JsonSchemaValidator::new(strict).unwrap();
    assert!(strict_validator.validate(&reply).is_ok(), "the reply fits what was sent");
    let validator = JsonSchemaValidator::new(original).unwrap();
    assert!(validator.validate(&reply).is_err());
    assert_eq!(
        validate_adapted(&validator, &reply),
        Ok(json!({"city": "Oslo", "note": null, "stops": [{"name": "A"}]})),
        "nullable `note` keeps its null"
    );
    let wrong = json!({"city": null});
    let err = validate_adapted(&validator, &wrong).unwrap_err();
    assert_eq!(err.path, "/city", "a required property's null is an error");
}

#[test]
fn drop_optional_nulls_follows_nesting_and_leaves_required_ones() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "integer"},
        "b": {"type": "integer"},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"z": {"type": "string"}}}},
        "t": {"prefixItems": [{"type": "object", "properties": {"p": {"type": "string"}}}]},
        "o": {"anyOf": [{"type": "object", "properties": {"w": {"type": "string"}}}, {"type": "string"}]}
    }, "required": ["a"]});
    let mut value = json!({"a": null, "b": null, "m": {"k": {"z": null}}, "t": [{"p": null}], "o": {"w": null}});
    assert!(drop_optional_nulls(&schema, &mut value));
    assert_eq!(value, json!({"a": null, "m": {"k": {}}, "t": [{}], "o": {}}));
    assert!(!drop_optional_nulls(&schema, &mut value));
}

// Gemini API reference, GenerationConfig.responseJsonSchema: the supported keyword list,
// `enum` for strings and numbers, `$ref` alone but for `$` keywords.
#[test]
fn gemini_keeps_the_documented_subset() {
    let supported = json!({"$id": "x", "type": "object", "title": "T", "description": "D",
        "properties": {
            "s": {"type": "string", "format": "date-time", "enum": ["a", "b"]},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "l": {"type": "array", "items": {"$ref": "#/$defs/I"}, "minItems": 1, "maxItems": 2},
            "t": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
            "u": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "o": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}
        },
        "required": ["s"], "propertyOrdering": ["s", "n"], "additionalProperties": false,
        "$defs": {"I": {"type": "string"}}});
    run(
        gemini,
        vec![
            Case { name: "documented subset untouched", input: supported.clone(), output: supported, warnings: &[] },
            Case {
                name: "conversions that keep the meaning",
                input: json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                "definitions": {"D": {"type": "string"}},
                "properties": {
                    "c": {"const": "only"},
                    "e": {"type": "string", "enum": ["x", null]},
                    "i": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
                    "d": {"$ref": "#/definitions/D"},
                    "t": {"type": "array", "items": [{"type": "string"}]},
                    "a": {"allOf": [{"type": "object", "properties": {"p": {"type": "string"}}}, {"required": ["p"]}]},
                    "x": {"type": "string", "default": "hi", "examples": ["yo"]}
                }}),
                output: json!({"type": "object", "$defs": {"D": {"type": "string"}}, "properties": {
                    "c": {"enum": ["only"]},
                    "e": {"type": ["string", "null"], "enum": ["x"]},
                    "i": {"type": "integer", "minimum": 1, "maximum": 9},
                    "d": {"$ref": "#/$defs/D"},
                    "t": {"type": "array", "prefixItems": [{"type": "string"}]},
                    "a": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
                    "x": {"type": "string", "description": "{default: \"hi\", examples: [\"yo\"]}"}
                }}),
                warnings: &[],
            },
            Case {
                name: "what Gemini does not take is removed and reported",
                input: json!({"type": "object", "properties": {
                    "s": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^a"},
                    "n": {"type": "number", "exclusiveMinimum": 0.5, "multipleOf": 2},
                    "b": {"type": "boolean", "const": true},
                    "e": {"enum": [true, "x"]},
                    "u": {"type": "array", "uniqueItems": true},
                    "r": {"$ref": "#", "description": "again"},
                    "w": {"allOf": [{"type": "string"}, {"type": "number"}]},
                    "i": {"if": {"type": "string"}, "then": {"minLength": 1}}
                }}),
                output: json!({"type": "object", "properties": {
                    "s": {"type": "string", "description": "{maxLength: 5, minLength: 2, pattern: \"^a\"}"},
                    "n": {"type": "number", "minimum": 0.5, "description": "{multipleOf: 2}"},
                    "b": {"type": "boolean", "description": "{const: true}"},
                    "e": {"description": "{enum: [true,\"x\"]}"},
                    "u": {"type": "array", "description": "{uniqueItems: true}"},
                    "r": {"$ref": "#"},
                    "w": {},
                    "i": {}
                }}),
                warnings: &["removed `const` at /properties/b; removed `enum` (Gemini takes strings and numbers) at \
                     /properties/e; removed `if` at /properties/i; removed `then` at /properties/i; sent \
                     `exclusiveMinimum` as the inclusive `minimum` at /properties/n; removed `multipleOf` at \
                     /properties/n; removed `description` beside a recursive `$ref` at /properties/r; removed \
                     `maxLength` at /properties/s; removed `minLength` at /properties/s; removed `pattern` at \
                     /properties/s; removed `uniqueItems` at /properties/u; removed `allOf` at /properties/w"],
            },
        ],
    );
}

// Anthropic structured outputs guide, "JSON Schema limitations".
#[test]
fn anthropic_output_follows_the_json_schema_limitations() {
    run(
        anthropic_output,
        vec![
            Case {
                name: "objects closed, optional properties stay optional, supported keywords stay",
                input: json!({"type": "object", "properties": {
                    "d": {"type": "string", "format": "uri", "pattern": "^https?://\\w+"},
                    "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"const": 1}}}, "minItems": 1},
                    "e": {"enum": ["a", 1, true, null], "default": "a"},
                    "r": {"$ref": "#/$defs/R"}
                }, "required": ["d"], "$defs": {"R": {"type": "object", "properties": {}}}}),
                output: json!({"type": "object", "additionalProperties": false, "properties": {
                    "d": {"type": "string", "format": "uri", "pattern": "^https?://\\w+"},
                    "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"const": 1}},
                        "additionalProperties": false}, "minItems": 1},
                    "e": {"enum": ["a", 1, true, null], "default": "a"},
                    "r": {"$ref": "#/$defs/R"}
                }, "required": ["d"], "$defs": {"R": {"type": "object", "properties": {}, "additionalProperties": false}}}),
                warnings: &[],
            },
            Case {
                name: "numerical, length and array constraints removed; minItems above 1 sent as 1",
                input: json!({"type": "object", "properties": {
                    "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "count"},
                    "s": {"type": "string", "minLength": 3, "format": "int32", "pattern": "(?=a)a"},
                    "l": {"type": "array", "minItems": 2, "maxItems": 4, "uniqueItems": true},
                    "o": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                    "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "x": {"enum": [{"a": 1}]}
                }}),
                output: json!({"type": "object", "additionalProperties": false, "properties": {
                    "n": {"type": "integer", "description": "count\n\n{maximum: 10, minimum: 1}"},
                    "s": {"type": "string", "description": "{format: \"int32\", minLength: 3, pattern: \"(?=a)a\"}"},
                    "l": {"type": "array", "minItems": 1, "description": "{maxItems: 4, minItems: 2, uniqueItems: true}"},
                    "o": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "m": {"type": "object", "additionalProperties": false},
                    "x": {}
                }}),
                warnings: &["sent `minItems` above 1 as 1 at /properties/l; removed `maxItems` at /properties/l; \
                     removed `uniqueItems` at /properties/l; closed an object open to other properties at /properties/m; \
                     removed `maximum` at /properties/n; removed `minimum` at /properties/n; sent `oneOf` as `anyOf` at \
                     /properties/o; removed `format` at /properties/s; removed `minLength` at /properties/s; removed \
                     `pattern` at /properties/s; removed `enum` (objects and arrays in it) at /properties/x"],
            },
            Case {
                name: "allOf with a $ref is merged",
                input: json!({"type": "object", "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}], "description": "d"}},
                    "$defs": {"P": {"type": "object", "properties": {"q": {"type": "string"}}}}}),
                output: json!({"type": "object", "additionalProperties": false, "properties": {"p": {"type": "object",
                    "description": "d", "properties": {"q": {"type": "string"}}, "additionalProperties": false}},
                    "$defs": {"P": {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false}}}),
                warnings: &[],
            },
            Case {
                name: "recursion cannot be adapted",
                input: json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                    "additionalProperties": false}),
                output: json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                    "additionalProperties": false}),
                warnings: &["is recursive"],
            },
        ],
    );
}

#[test]
fn ollama_passes_schemas_through() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "pattern": "^a"}}});
    assert_eq!(ollama(&schema), (schema, Vec::new()));
}

#[test]
fn labels_name_the_schema() {
    let (_, warnings) = gemini(&json!({"type": "string", "minLength": 1}));
    let labelled: Vec<Warning> = label(warnings, "tool `t`").collect();
    assert_eq!(labelled.len(), 1);
    assert_eq!(labelled[0].code, "schema_adapted");
    assert!(labelled[0].message.starts_with("tool `t`: the JSON Schema was adapted for Gemini: removed `minLength`"));
}
