//! Typed tools: a plugin writes each tool as a Rust function from a
//! deserializable argument struct to a serializable result, and the
//! [`Toolbox`] turns that into the `tools` interface the host calls.
//!
//! The input and output JSON Schemas are generated from the types with
//! [`schemars`], so they cannot drift from the code: bounds are attributes
//! (`#[schemars(length(max = 64))]`, `#[schemars(range(min = 1, max = 100))]`),
//! doc comments become descriptions, and `#[serde(deny_unknown_fields)]`
//! closes an object. The host validates arguments against the input schema
//! before the function runs, and `toolhost lint` checks that it is bounded.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::toolhost::plugin::types::{CallContext, ToolError, ToolSpec};

type Handler = Box<dyn Fn(&CallContext, &str) -> Result<String, ToolError>>;

/// One tool: what `describe()` says of it, and the function behind it.
/// Its schemas and owned strings are made only when `describe()` asks: an
/// instance made for one call only dispatches, and must not pay for every
/// tool's texts and schemas.
struct Entry {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    schemas: fn() -> (String, Option<String>),
    handler: Handler,
}

/// The input and output schemas of a tool from `A` to `R`, as JSON text.
fn schemas_of<A: JsonSchema, R: JsonSchema>() -> (String, Option<String>) {
    (
        input_schema::<A>().to_string(),
        output_schema::<R>().map(|s| s.to_string()),
    )
}

/// The tools of one plugin, in the order `describe()` lists them.
///
/// Build it in a plain function and hand that to
/// [`export_plugin!`](crate::export_plugin); the SDK builds it once per
/// instance.
#[derive(Default)]
pub struct Toolbox {
    tools: Vec<Entry>,
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// Adds a tool named `name` (`<plugin>_<object>_<verb>[_<scope>]`), with
    /// a short `title` for approval prompts and a `description` that says
    /// what it does, what it changes and what it refuses.
    ///
    /// `handler` gets the call's context and the decoded arguments; what it
    /// returns is the result (a struct, so that it serializes to a JSON
    /// object) or a [`ToolError`] the calling model can act on.
    ///
    /// # Panics
    ///
    /// If two tools share a name: a plugin bug, found when the toolbox is
    /// built (at an instance's first `describe()` or `call`).
    pub fn tool<A, R, F>(
        mut self,
        name: &'static str,
        title: &'static str,
        description: &'static str,
        handler: F,
    ) -> Toolbox
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize + JsonSchema,
        F: Fn(&CallContext, A) -> Result<R, ToolError> + 'static,
    {
        assert!(
            !self.tools.iter().any(|t| t.name == name),
            "tool `{name}` is added twice"
        );
        let handler: Handler = Box::new(move |context, arguments| {
            let arguments: A = serde_json::from_str(arguments).map_err(|e| {
                ToolError::new(
                    "invalid_arguments",
                    format!("the arguments do not fit the tool's schema: {e}"),
                )
            })?;
            let result = handler(context, arguments)?;
            serde_json::to_string(&result).map_err(|e| {
                ToolError::new(
                    "plugin_error",
                    format!("the result could not be encoded: {e}"),
                )
            })
        });
        self.tools.push(Entry {
            name,
            title,
            description,
            schemas: schemas_of::<A, R>,
            handler,
        });
        self
    }

    /// What `describe()` returns.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| {
                let (input_schema, output_schema) = (t.schemas)();
                ToolSpec {
                    name: t.name.to_string(),
                    title: t.title.to_string(),
                    description: t.description.to_string(),
                    input_schema,
                    output_schema,
                }
            })
            .collect()
    }

    /// Runs the tool `name` on JSON `arguments`.
    pub fn call(
        &self,
        name: &str,
        arguments: &str,
        context: &CallContext,
    ) -> Result<String, ToolError> {
        match self.tools.iter().find(|t| t.name == name) {
            Some(tool) => (tool.handler)(context, arguments),
            None => Err(ToolError::new(
                "unknown_tool",
                format!("this plugin has no tool `{name}`"),
            )),
        }
    }
}

impl ToolError {
    /// A failure that repeating the same call will not fix. `code` is
    /// stable snake_case (the host's codes, or the plugin's own); `message`
    /// tells the model what to do next.
    pub fn new(code: &str, message: impl Into<String>) -> ToolError {
        ToolError {
            code: code.to_string(),
            message: message.into(),
            retryable: false,
        }
    }

    /// A failure that may pass if the same call is made again later.
    pub fn retryable(code: &str, message: impl Into<String>) -> ToolError {
        ToolError {
            retryable: true,
            ..ToolError::new(code, message)
        }
    }
}

/// The schema of the arguments as a model sends them (deserialized).
fn input_schema<A: JsonSchema>() -> Value {
    let schema = settings()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<A>();
    let mut value = tidy(schema);
    absent_not_null(&mut value);
    value
}

/// An `Option` argument may be left out, not sent as `null`: a model's
/// `null` is refused by the schema rather than read as "absent".
fn absent_not_null(schema: &mut Value) {
    if let Value::Object(map) = schema {
        let required: Vec<String> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if !required.contains(name) {
                    strip_null(property);
                }
            }
        }
    }
    for_each_subschema(schema, absent_not_null);
}

/// Takes `null` out of what a schema accepts, unless `null` is all it
/// accepts (an empty list would make the schema invalid or accept nothing).
fn strip_null(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let is_null = |b: &Value| {
        b.get("type") == Some(&Value::String("null".into()))
            || b.get("const") == Some(&Value::Null)
            || b.get("enum") == Some(&Value::Array(vec![Value::Null]))
    };
    if let Some(Value::Array(types)) = map.get_mut("type")
        && types.iter().any(|t| t != "null")
    {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && values.iter().any(|v| !v.is_null())
    {
        values.retain(|v| !v.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get_mut(key)
            && branches.iter().any(|b| !is_null(b))
        {
            branches.retain(|b| !is_null(b));
        }
    }
}

/// Calls `f` on each direct subschema of `schema`, through the keywords
/// that hold schemas only: never into `default`, `const`, `enum` or
/// `examples`, which are data, nor into a `properties` map as if it were a
/// schema itself.
fn for_each_subschema(schema: &mut Value, f: fn(&mut Value)) {
    let Value::Object(map) = schema else { return };
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties" => f(value),
            "prefixItems" | "anyOf" | "oneOf" | "allOf" => {
                if let Value::Array(list) = value {
                    list.iter_mut().for_each(f);
                }
            }
            "properties" | "patternProperties" | "$defs" | "definitions" => {
                if let Value::Object(subs) = value {
                    subs.values_mut().for_each(f);
                }
            }
            _ => {}
        }
    }
}

/// Draft 2020-12 with every subschema written in place: a model reads the
/// schema as it is, and not every client resolves `$ref`.
fn settings() -> SchemaSettings {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings
}

/// The schema of the result as the plugin writes it (serialized); only an
/// object schema can be an MCP `outputSchema`.
fn output_schema<R: JsonSchema>() -> Option<Value> {
    let schema = settings()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<R>();
    let value = tidy(schema);
    (value.get("type") == Some(&Value::String("object".into()))).then_some(value)
}

/// Drops what clients do not need (`$schema`, the Rust type's name as
/// `title`) and gives every object with properties a `required` list, so an
/// all-optional struct still says, explicitly, that nothing is required.
fn tidy(schema: Schema) -> Value {
    let mut value = schema.to_value();
    if let Value::Object(top) = &mut value {
        top.remove("$schema");
        top.remove("title");
    }
    require_all(&mut value);
    value
}

fn require_all(schema: &mut Value) {
    if let Value::Object(map) = schema
        && map.contains_key("properties")
        && !map.contains_key("required")
    {
        map.insert("required".into(), Value::Array(Vec::new()));
    }
    for_each_subschema(schema, require_all);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Arguments of a test tool.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// The ticket's key.
        #[schemars(length(max = 6))]
        key: String,
        /// How many to return.
        #[schemars(range(min = 1, max = 10))]
        limit: Option<u32>,
    }

    #[derive(Serialize, JsonSchema)]
    struct Answer {
        key: String,
        limit: u32,
    }

    fn context() -> CallContext {
        CallContext {
            session_id: "s".into(),
            task_id: None,
            call_id: "c".into(),
        }
    }

    fn toolbox() -> Toolbox {
        Toolbox::new().tool(
            "test_ticket_get",
            "Get",
            "Returns a ticket.",
            |_, a: Args| {
                Ok(Answer {
                    key: a.key,
                    limit: a.limit.unwrap_or(1),
                })
            },
        )
    }

    #[test]
    fn schemas_are_generated_closed_and_bounded() {
        let spec = &toolbox().specs()[0];
        let input: Value = serde_json::from_str(&spec.input_schema).unwrap();
        assert_eq!(input["type"], "object");
        assert_eq!(input["additionalProperties"], false);
        assert_eq!(input["required"], serde_json::json!(["key"]));
        assert_eq!(input["properties"]["key"]["maxLength"], 6);
        assert_eq!(
            input["properties"]["key"]["description"],
            "The ticket's key."
        );
        assert_eq!(input["properties"]["limit"]["maximum"], 10);
        assert_eq!(input["properties"]["limit"]["type"], "integer");
        assert!(input.get("$schema").is_none());
        let output: Value = serde_json::from_str(spec.output_schema.as_deref().unwrap()).unwrap();
        assert_eq!(output["properties"]["key"]["type"], "string");
    }

    #[test]
    fn post_processing_leaves_data_and_property_names_alone() {
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "properties": { "type": ["string", "null"] },
                "only_null": { "type": "null" },
                "thing": { "type": "object", "default": { "properties": {} } }
            }
        });
        require_all(&mut schema);
        absent_not_null(&mut schema);
        assert_eq!(schema["required"], serde_json::json!([]));
        assert_eq!(schema["properties"]["properties"]["type"], "string");
        assert!(schema["properties"].get("required").is_none());
        assert_eq!(schema["properties"]["only_null"]["type"], "null");
        assert_eq!(
            schema["properties"]["thing"]["default"],
            serde_json::json!({ "properties": {} })
        );
    }

    #[test]
    fn calls_decode_dispatch_and_encode() {
        let toolbox = toolbox();
        let out = toolbox
            .call("test_ticket_get", r#"{"key":"T-1"}"#, &context())
            .unwrap();
        assert_eq!(out, r#"{"key":"T-1","limit":1}"#);
        let bad = toolbox
            .call("test_ticket_get", r#"{"nope":1}"#, &context())
            .unwrap_err();
        assert_eq!(bad.code, "invalid_arguments");
        let unknown = toolbox
            .call("test_ticket_put", "{}", &context())
            .unwrap_err();
        assert_eq!(unknown.code, "unknown_tool");
    }
}
