//! A tool's JSON Schema, checked once at load and compiled into a validator.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

/// At most this many violations are reported per call: enough to fix the
/// arguments in one go, short enough for the model to read.
const MAX_REPORTED_ERRORS: usize = 5;

/// A schema that is valid JSON Schema, ready to validate against.
pub struct ToolSchema {
    document: Arc<Map<String, Value>>,
    /// Compiled at load, or, for a schema this host accepted before, at
    /// its first check.
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

/// Why a value was not accepted.
#[derive(Debug)]
pub enum CheckError {
    /// The value does not match: where and why, in a few lines.
    Mismatch(String),
    /// A schema accepted at an earlier start no longer compiles here (a
    /// changed validator library): nothing is accepted until it is
    /// loaded afresh.
    Unusable(String),
}

/// Why a plugin's schema cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("is not JSON: {0}")]
    NotJson(String),
    #[error("must be a JSON object with \"type\": \"object\" at the top level")]
    NotAnObjectSchema,
    #[error("is not valid JSON Schema: {0}")]
    Invalid(String),
}

impl ToolSchema {
    /// Parses and compiles a schema a plugin described. MCP requires both the
    /// input and the output schema to describe an object.
    pub fn parse(text: &str) -> Result<ToolSchema, SchemaError> {
        let document = object_schema(text)?;
        // `validator_for` checks the schema against its meta-schema first, so
        // a typo such as `"minLength": "10"` is refused here, not at call time.
        let validator = compile(&document).map_err(SchemaError::Invalid)?;
        Ok(ToolSchema {
            document: Arc::new(document),
            validator: OnceLock::from(Ok(validator)),
        })
    }

    /// A schema this host checked and compiled at an earlier start (kept
    /// with what its component described, under the same pinned digest):
    /// its shape is checked now, and it is compiled at its first check,
    /// which saves a restart the compiling of every tool's schemas.
    pub fn parse_accepted(text: &str) -> Result<ToolSchema, SchemaError> {
        Ok(ToolSchema {
            document: Arc::new(object_schema(text)?),
            validator: OnceLock::new(),
        })
    }

    /// The schema as sent to clients.
    pub fn document(&self) -> &Arc<Map<String, Value>> {
        &self.document
    }

    /// Checks `value`; on failure, says where and why in a few lines. The
    /// offending values are not repeated, as they may be huge.
    pub fn check(&self, value: &Value) -> Result<(), CheckError> {
        let validator = self.validator()?;
        // Almost every value matches: the yes-or-no walk stops at the first
        // mismatch and builds no error, at a fraction of the cost of
        // collecting errors, which only a failure needs.
        if validator.is_valid(value) {
            return Ok(());
        }
        let errors = validator.iter_errors(value);
        let mut lines = Vec::new();
        let mut total = 0;
        for error in errors {
            total += 1;
            if lines.len() < MAX_REPORTED_ERRORS {
                let path = error.instance_path().to_string();
                let at = if path.is_empty() {
                    "(top level)".into()
                } else {
                    path
                };
                lines.push(format!("{at}: {}", error.masked()));
            }
        }
        if lines.is_empty() {
            lines.push("(top level): does not match".to_string());
        }
        if total > lines.len() {
            lines.push(format!("… and {} more", total - lines.len()));
        }
        Err(CheckError::Mismatch(lines.join("; ")))
    }
}

impl ToolSchema {
    /// Compiles the schema if it is not yet: a caller that will check a
    /// value only after acting (the output of a call) asks first, so a
    /// schema that no longer compiles refuses the call before it runs.
    pub fn ready(&self) -> Result<(), CheckError> {
        self.validator().map(|_| ())
    }

    fn validator(&self) -> Result<&jsonschema::Validator, CheckError> {
        self.validator
            .get_or_init(|| compile(&self.document))
            .as_ref()
            .map_err(|e| CheckError::Unusable(format!("its schema does not compile: {e}")))
    }
}

/// `text` as a JSON object with `"type": "object"` at its top.
fn object_schema(text: &str) -> Result<Map<String, Value>, SchemaError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
    let Value::Object(document) = value else {
        return Err(SchemaError::NotAnObjectSchema);
    };
    if document.get("type") != Some(&Value::String("object".into())) {
        return Err(SchemaError::NotAnObjectSchema);
    }
    Ok(document)
}

fn compile(document: &Map<String, Value>) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(&Value::Object(document.clone())).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TICKET: &str =
        r#"{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}"#;

    #[test]
    fn an_accepted_schema_is_compiled_at_its_first_check_and_checks_the_same() {
        for schema in [
            ToolSchema::parse(TICKET).unwrap(),
            ToolSchema::parse_accepted(TICKET).unwrap(),
        ] {
            assert!(schema.check(&json!({"key": "T-1"})).is_ok());
            match schema.check(&json!({"key": 7})) {
                Err(CheckError::Mismatch(detail)) => assert!(detail.contains("/key"), "{detail}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn an_accepted_schema_that_no_longer_compiles_accepts_nothing() {
        // The meta-schema refuses a string where a number belongs.
        let broken = r#"{"type":"object","minProperties":"1"}"#;
        assert!(matches!(
            ToolSchema::parse(broken),
            Err(SchemaError::Invalid(_))
        ));
        let schema = ToolSchema::parse_accepted(broken).unwrap();
        assert!(matches!(schema.ready(), Err(CheckError::Unusable(_))));
        for value in [json!({}), json!({"a": 1})] {
            assert!(matches!(schema.check(&value), Err(CheckError::Unusable(_))));
        }
        assert!(ToolSchema::parse_accepted(TICKET).unwrap().ready().is_ok());
        // Its shape is still checked at once.
        assert!(matches!(
            ToolSchema::parse_accepted(r#"{"type":"array"}"#),
            Err(SchemaError::NotAnObjectSchema)
        ));
    }
}
