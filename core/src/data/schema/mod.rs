//! JSON Schemas: builders for the common shapes, schemas from Rust types (feature
//! `schemars`: `for_type`), validation behind a trait, and [`adapt`]ation to what each
//! provider accepts.
//!
//! ```
//! use omni_protocol::schema::{self, Validator};
//!
//! let city = schema::object()
//!     .property("city", schema::string().description("City name").min_length(1))
//!     .property("days", schema::integer().minimum(1).maximum(14))
//!     .required(["city"]);
//! let validator = schema::JsonSchemaValidator::new(city.into_value()).unwrap();
//! assert!(validator.validate(&serde_json::json!({"city": "Paris"})).is_ok());
//! let err = validator.validate(&serde_json::json!({"city": "Paris", "days": 30})).unwrap_err();
//! assert_eq!(err.path, "/days");
//! ```

pub mod adapt;
mod builder;
mod builtin;
mod typed;
mod validate;

pub use builder::{any_of, array, boolean, enumeration, integer, number, object, string, Schema};
pub use builtin::BuiltinValidator;
pub use typed::decode_output;
#[cfg(feature = "schemars")]
pub use typed::{for_type, name_for, output_for};
pub use validate::{JsonSchemaValidator, SchemaError, ValidationError, Validator};
