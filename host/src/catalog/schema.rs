//! A tool's JSON Schema, checked once at load and compiled into a validator.

use std::sync::Arc;

use serde_json::{Map, Value};

/// At most this many violations are reported per call: enough to fix the
/// arguments in one go, short enough for the model to read.
const MAX_REPORTED_ERRORS: usize = 5;

/// A schema that is valid JSON Schema, ready to validate against.
pub struct ToolSchema {
    document: Arc<Map<String, Value>>,
    validator: jsonschema::Validator,
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
        let value: Value =
            serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
        let Value::Object(document) = value else {
            return Err(SchemaError::NotAnObjectSchema);
        };
        if document.get("type") != Some(&Value::String("object".into())) {
            return Err(SchemaError::NotAnObjectSchema);
        }
        // `validator_for` checks the schema against its meta-schema first, so
        // a typo such as `"minLength": "10"` is refused here, not at call time.
        let validator = jsonschema::validator_for(&Value::Object(document.clone()))
            .map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(ToolSchema {
            document: Arc::new(document),
            validator,
        })
    }

    /// The schema as sent to clients.
    pub fn document(&self) -> &Arc<Map<String, Value>> {
        &self.document
    }

    /// Checks `value`; on failure, says where and why in a few lines. The
    /// offending values are not repeated, as they may be huge.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        let mut errors = self.validator.iter_errors(value).peekable();
        if errors.peek().is_none() {
            return Ok(());
        }
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
        if total > lines.len() {
            lines.push(format!("… and {} more", total - lines.len()));
        }
        Err(lines.join("; "))
    }
}
