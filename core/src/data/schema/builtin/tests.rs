//! The built-in validator on its own (messages, refusals, bounds) and, with the
//! `jsonschema` feature, against the `jsonschema` crate: both must call the same values
//! valid for every schema of the supported subset.

#[cfg(feature = "jsonschema")]
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

/// Schemas of the supported subset, in the shapes schemars and tool authors write.
fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "integer"}),
        json!({"type": "number", "minimum": 0, "exclusiveMaximum": 10.5}),
        json!({"type": ["string", "null"], "minLength": 2, "maxLength": 3}),
        json!({"type": "string", "format": "date-time", "title": "When", "description": "d", "default": "x", "examples": ["y"]}),
        json!({"enum": ["a", 1, null, [1, 2]]}),
        json!({"const": {"k": 1}}),
        json!({"type": "array", "items": {"type": "integer", "maximum": 3}, "minItems": 1, "maxItems": 3, "uniqueItems": true}),
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false}),
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}),
        json!({"type": "object", "minProperties": 1, "maxProperties": 2}),
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
            "required": ["city"],
            "additionalProperties": false
        }),
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}),
        json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
        json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 2}]}),
        json!({"allOf": [{"type": "number"}, {"minimum": 1}, {"maximum": 5}]}),
        json!({"not": {"type": "string"}}),
        json!({"type": "integer", "exclusiveMinimum": -3, "maximum": 18446744073709551615u64}),
        json!(true),
        json!(false),
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["label", "children"]
        }),
        json!({
            "$defs": {"Kind": {"type": "string", "enum": ["home", "office"]}, "Addr": {"type": "object", "properties": {"zip": {"type": ["integer", "null"], "minimum": 0}}, "required": ["zip"]}},
            "type": "object",
            "properties": {"kind": {"$ref": "#/$defs/Kind"}, "addr": {"anyOf": [{"$ref": "#/$defs/Addr"}, {"type": "null"}]}}
        }),
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "integer"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/definitions/n"}, "m": {"type": "number"}},
            "additionalProperties": false
        }),
        // schemars' internally tagged enum.
        json!({
            "oneOf": [
                {"type": "object", "properties": {"shape": {"type": "string", "const": "circle"}, "radius": {"type": "number"}}, "required": ["shape", "radius"]},
                {"type": "object", "properties": {"shape": {"type": "string", "const": "square"}, "side": {"type": "number"}}, "required": ["shape", "side"]}
            ]
        }),
        json!({"type": "object", "properties": {"a~b/c": {"type": "integer"}}}),
        json!({"type": "object", "nullable": true, "x-vendor": 1, "$comment": "ignored"}),
    ]
}

/// Values covering every JSON type, edge numbers, short and long strings, small arrays
/// and objects whose keys the schemas above name.
fn instances() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(0),
        json!(1),
        json!(1.0),
        json!(2.5),
        json!(-3),
        json!(10.5),
        json!(14),
        json!(15),
        json!(18446744073709551615u64),
        json!(""),
        json!("a"),
        json!("ab"),
        json!("éé"),
        json!("abcd"),
        json!("home"),
        json!([]),
        json!([1, 2]),
        json!([1, 1]),
        json!([1, 1.0]),
        json!([1, 2, 3, 4]),
        json!(["x", true]),
        json!(["x", true, 1]),
        json!(["x", 1, 2]),
        json!({}),
        json!({"k": 1}),
        json!({"k": 1.0}),
        json!({"city": "Paris"}),
        json!({"city": "", "days": 3}),
        json!({"city": "Rome", "days": 30}),
        json!({"city": "Rome", "extra": 1}),
        json!({"a": 1, "b": "x"}),
        json!({"a": 1, "b": 2}),
        json!({"shape": "circle", "radius": 1}),
        json!({"shape": "square", "radius": 1}),
        json!({"label": "root", "children": [{"label": "leaf", "children": []}]}),
        json!({"label": "root", "children": [{"label": 3, "children": []}]}),
        json!({"kind": "home", "addr": {"zip": 75001}}),
        json!({"kind": "shop", "addr": {"zip": -1}}),
        json!({"kind": "office", "addr": null}),
        json!({"n": 1, "m": 2.5}),
        json!({"n": 1.5}),
        json!({"a~b/c": "x"}),
    ]
}

fn builtin(schema: &Value) -> BuiltinValidator {
    BuiltinValidator::new(schema.clone()).unwrap_or_else(|e| panic!("{schema}: {e}"))
}

#[test]
fn messages_and_paths_have_the_jsonschema_shape() {
    let v = builtin(&schemas()[10]);
    let err = v.validate(&json!({"city": "Rome", "days": 30})).unwrap_err();
    assert_eq!((err.path.as_str(), err.message.as_str()), ("/days", "30 is greater than the maximum of 14"));
    let err = v.validate(&json!({"days": 3, "x": 1})).unwrap_err();
    assert_eq!(err.path, "");
    assert_eq!(
        err.message,
        "Additional properties are not allowed ('x' was unexpected); at : \"city\" is a required property"
    );
    let err =
        builtin(&json!({"type": "array", "items": {"type": "integer"}})).validate(&json!([1, "two"])).unwrap_err();
    assert_eq!(err.to_string(), "at /1: \"two\" is not of type \"integer\"");
    let err = builtin(&schemas()[23]).validate(&json!({"a~b/c": "x"})).unwrap_err();
    assert_eq!(err.path, "/a~0b~1c");
    let err = builtin(&json!({"enum": ["a", "b", "c"]})).validate(&json!("d")).unwrap_err();
    assert_eq!(err.message, "\"d\" is not one of \"a\", \"b\" or \"c\"");
    let err = builtin(&json!({"type": ["string", "null"]})).validate(&json!(1)).unwrap_err();
    assert_eq!(err.message, "1 is not of types \"null\", \"string\"");
    // At most three problems, the first one's path the error's.
    let err =
        builtin(&json!({"type": "array", "items": {"type": "string"}})).validate(&json!([1, 2, 3, 4])).unwrap_err();
    assert_eq!(err.path, "/0");
    assert_eq!(err.message.matches("is not of type").count(), 3);
}

#[test]
fn refuses_keywords_it_cannot_check_naming_them() {
    let cases = [
        (json!({"type": "string", "pattern": "^a"}), "pattern", "/pattern"),
        (
            json!({"properties": {"a": {"patternProperties": {"^x": {}}}}}),
            "patternProperties",
            "/properties/a/patternProperties",
        ),
        (json!({"if": {"type": "string"}, "then": {"minLength": 1}}), "if", "/if"),
        (json!({"type": "integer", "multipleOf": 2}), "multipleOf", "/multipleOf"),
        (json!({"items": [{"type": "string"}]}), "items", "/items"),
        (json!({"$schema": "http://json-schema.org/draft-07/schema#", "format": "email"}), "format", "/format"),
        (json!({"$schema": "http://json-schema.org/draft-04/schema#"}), "$schema", "/$schema"),
        (json!({"properties": {"a": {"$id": "https://example.com/a", "type": "string"}}}), "$id", "/properties/a/$id"),
    ];
    for (schema, keyword, path) in cases {
        let err = BuiltinValidator::new(schema.clone()).expect_err("refused");
        assert_eq!(err, SchemaError::Unsupported { keyword: keyword.into(), path: path.into() }, "{schema}");
        let text = err.to_string();
        assert!(text.contains(&format!("`{keyword}`")) && text.contains("`jsonschema` feature"), "{text}");
    }
    let err = BuiltinValidator::new(json!({"$ref": "https://example.com/s.json"})).unwrap_err();
    assert!(
        matches!(&err, SchemaError::Unsupported { keyword, .. } if keyword.contains("https://example.com/s.json")),
        "{err}"
    );
    let err = BuiltinValidator::new(json!({"$ref": "#anchor"})).unwrap_err();
    assert!(matches!(&err, SchemaError::Unsupported { keyword, .. } if keyword.contains("anchor")), "{err}");
    // A property merely *named* like a keyword is no keyword.
    assert!(BuiltinValidator::new(json!({"properties": {"pattern": {"type": "string"}}})).is_ok());
}

#[test]
fn rejects_malformed_schemas() {
    for schema in [
        json!({"type": 12}),
        json!({"type": "text"}),
        json!({"required": "a"}),
        json!({"minLength": -1}),
        json!({"anyOf": []}),
        json!({"properties": {"a": 3}}),
        json!({"$ref": "#/$defs/missing"}),
        json!(3),
    ] {
        assert!(matches!(BuiltinValidator::new(schema.clone()), Err(SchemaError::Invalid(_))), "{schema}");
    }
}

#[test]
fn bounded_in_depth_and_reference_loops() {
    let mut deep = json!({"type": "integer"});
    for _ in 0..MAX_DEPTH {
        deep = json!({"items": deep});
    }
    assert!(matches!(BuiltinValidator::new(deep), Err(SchemaError::Invalid(_))));
    // A `$ref` loop that never descends into the value ends with an error, not a crash.
    let looping =
        builtin(&json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}));
    assert!(looping.validate(&json!(1)).unwrap_err().message.contains("too deeply"));
    let mut value = json!(1);
    for _ in 0..=MAX_DEPTH {
        value = json!([value]);
    }
    assert!(builtin(&json!(true)).validate(&value).is_err());
}

#[test]
fn table_of_schemas_and_instances() {
    for schema in schemas() {
        let v = builtin(&schema);
        for instance in instances() {
            // Never panics; the agreement with `jsonschema` is checked below.
            let _ = v.validate(&instance);
        }
    }
    let v = builtin(&schemas()[21]);
    assert!(v.validate(&json!({"n": 1, "m": 2.5})).is_ok());
    assert_eq!(v.validate(&json!({"n": 1.5})).unwrap_err().path, "/n");
}

#[cfg(feature = "jsonschema")]
mod against_jsonschema {
    use super::*;

    fn reference(schema: &Value) -> jsonschema::Validator {
        jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{schema}: {e}"))
    }

    fn agree(schema: &Value, instance: &Value) -> Result<(), TestCaseError> {
        let ours = builtin(schema).validate(instance);
        let theirs = reference(schema);
        prop_assert_eq!(ours.is_ok(), theirs.is_valid(instance), "{} against {}: {:?}", instance, schema, ours);
        if let (Err(ours), Some(first)) = (&ours, theirs.iter_errors(instance).next()) {
            // Same first path whenever there is one problem only.
            if theirs.iter_errors(instance).count() == 1 && !ours.message.contains("; ") {
                prop_assert_eq!(&ours.path, &first.instance_path().to_string(), "{} against {}", instance, schema);
            }
        }
        Ok(())
    }

    #[test]
    fn agrees_on_the_table() {
        for schema in schemas() {
            for instance in instances() {
                agree(&schema, &instance).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }

    #[test]
    fn same_messages_for_single_problems() {
        for schema in schemas() {
            let theirs = reference(&schema);
            for instance in instances() {
                let errors: Vec<_> = theirs.iter_errors(&instance).collect();
                if let [only] = errors.as_slice() {
                    let ours = builtin(&schema).validate(&instance).unwrap_err();
                    // `jsonschema` words a few messages its own way (`oneOf` …); where
                    // the keyword is one of ours both are the same.
                    if !matches!(only.kind(), jsonschema::error::ValidationErrorKind::FalseSchema) {
                        assert_eq!(ours.message, only.to_string(), "{instance} against {schema}");
                    }
                }
            }
        }
    }

    /// Any JSON value, small: scalars at the edges, arrays and objects with the keys the
    /// schemas name.
    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-20i64..20).prop_map(Value::from),
            (-20.0f64..20.0).prop_map(|f| json!((f * 4.0).round() / 4.0)),
            "[a-c]{0,4}".prop_map(Value::String),
            prop::sample::select(vec!["home", "office", "circle", "square", "éé"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec![
                        "a", "b", "k", "n", "m", "city", "days", "extra", "shape", "radius", "side", "label",
                        "children", "kind", "addr", "zip",
                    ]),
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn agrees_on_random_values(index in 0..schemas().len(), instance in any_value()) {
            agree(&schemas()[index], &instance)?;
        }
    }
}
