//! Rules on input schemas: every argument a model can send is closed and
//! bounded, so the host's validator refuses what the plugin never meant to
//! take before the plugin sees it.
//!
//! Output schemas are the plugin's own promise about its results and are
//! not linted.

use serde_json::{Map, Value};

use super::{Findings, Rule, Subject};

pub fn check(findings: &mut Findings, tool: &Subject<'_>) {
    walk(findings, tool, tool.input, "", true);
}

/// Keywords whose value is one subschema.
const ONE: [&str; 6] = ["items", "additionalItems", "not", "if", "then", "else"];
/// Keywords whose value is a list of subschemas.
const LIST: [&str; 4] = ["prefixItems", "anyOf", "oneOf", "allOf"];
/// Keywords whose value maps names to subschemas.
const MAP: [&str; 4] = ["properties", "patternProperties", "$defs", "definitions"];

fn walk(
    findings: &mut Findings,
    tool: &Subject<'_>,
    schema: &Map<String, Value>,
    at: &str,
    top: bool,
) {
    let types = types(schema);
    let constrained_by_value = ["enum", "const", "$ref"]
        .iter()
        .any(|k| schema.contains_key(*k));
    let composed = LIST.iter().any(|k| schema.contains_key(*k));
    if !schema.contains_key("type")
        && types.is_empty()
        && !constrained_by_value
        && !composed
        && !top
    {
        findings.schema(
            Rule::SchemaFreeObject,
            tool,
            at,
            "this argument accepts any JSON value".into(),
            "give it a `type` with bounds, or an `enum`".into(),
        );
    }
    for ty in &types {
        match *ty {
            "object" => object(findings, tool, schema, at),
            "integer" | "number" if !constrained_by_value => {
                let has = |a: &str, b: &str| schema.contains_key(a) || schema.contains_key(b);
                if !(has("maximum", "exclusiveMaximum") && has("minimum", "exclusiveMinimum")) {
                    findings.schema(
                        Rule::SchemaNumberBounds,
                        tool,
                        at,
                        format!("this {ty} has no `minimum` and `maximum`"),
                        "bound it to the range the plugin handles, e.g. \"minimum\": 1, \"maximum\": 100".into(),
                    );
                }
            }
            "string"
                if !constrained_by_value
                    && !["maxLength", "pattern"]
                        .iter()
                        .any(|k| schema.contains_key(*k)) =>
            {
                findings.schema(
                    Rule::SchemaStringBounds,
                    tool,
                    at,
                    "this string has no `maxLength`, `enum` or `pattern`".into(),
                    "add \"maxLength\" (the longest value the plugin needs), or list the values with \"enum\"".into(),
                );
            }
            "array" if !schema.contains_key("maxItems") => findings.schema(
                Rule::SchemaArrayBounds,
                tool,
                at,
                "this array has no `maxItems`".into(),
                "add \"maxItems\" with the most items a call needs".into(),
            ),
            _ => {}
        }
    }
    if let Some(Value::String(target)) = schema.get("$ref")
        && !["#/$defs/", "#/definitions/"]
            .iter()
            .any(|p| target.starts_with(p))
    {
        // Only targets under `$defs`/`definitions` are walked, so a reference
        // anywhere else could hide an unbounded schema.
        findings.schema(
            Rule::SchemaFreeObject,
            tool,
            at,
            format!(
                "this argument refers to {target:?}, outside `$defs`, so the lint cannot check it"
            ),
            "define referenced schemas under \"$defs\" and refer to them as \"#/$defs/NAME\""
                .into(),
        );
    }
    for key in ONE {
        match schema.get(key) {
            Some(sub @ (Value::Object(_) | Value::Bool(_))) => {
                sub_schema(findings, tool, sub, &format!("{at}/{key}"));
            }
            // Draft 7's tuple form of `items`.
            Some(Value::Array(list)) => {
                for (i, sub) in list.iter().enumerate() {
                    sub_schema(findings, tool, sub, &format!("{at}/{key}/{i}"));
                }
            }
            _ => {}
        }
    }
    for key in LIST {
        for (i, sub) in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            sub_schema(findings, tool, sub, &format!("{at}/{key}/{i}"));
        }
    }
    for key in MAP {
        if let Some(Value::Object(subs)) = schema.get(key) {
            for (name, sub) in subs {
                sub_schema(
                    findings,
                    tool,
                    sub,
                    &format!("{at}/{key}/{}", pointer_escape(name)),
                );
            }
        }
    }
}

/// A subschema: an object is walked; `true` accepts anything and is a
/// finding; `false` accepts nothing and is fine.
fn sub_schema(findings: &mut Findings, tool: &Subject<'_>, sub: &Value, at: &str) {
    match sub {
        Value::Object(sub) => walk(findings, tool, sub, at, false),
        Value::Bool(true) => findings.schema(
            Rule::SchemaFreeObject,
            tool,
            at,
            "this subschema is `true`, so it accepts any JSON value".into(),
            "give it a `type` with bounds, or an `enum`".into(),
        ),
        _ => {}
    }
}

fn object(findings: &mut Findings, tool: &Subject<'_>, schema: &Map<String, Value>, at: &str) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    // An argument object with no named fields takes whatever a model puts in
    // it; the top level may be empty when the tool takes no arguments.
    if properties.is_none_or(Map::is_empty) && !(at.is_empty() && closed) {
        findings.schema(
            Rule::SchemaFreeObject,
            tool,
            at,
            "this object names no properties, so it takes anything".into(),
            "list its fields under \"properties\" with their types and bounds".into(),
        );
    }
    if !closed {
        findings.schema(
            Rule::SchemaClosed,
            tool,
            at,
            "this object does not set \"additionalProperties\": false".into(),
            "add \"additionalProperties\": false so a misspelt or extra argument is refused".into(),
        );
    }
    if properties.is_some_and(|p| !p.is_empty()) && !schema.contains_key("required") {
        findings.schema(
            Rule::SchemaRequired,
            tool,
            at,
            "this object does not declare `required`".into(),
            "list the fields a call must give under \"required\" (an empty list if none)".into(),
        );
    }
    if let Some(Value::Object(extra)) = schema.get("additionalProperties") {
        walk(
            findings,
            tool,
            extra,
            &format!("{at}/additionalProperties"),
            false,
        );
    }
}

/// The `type` keyword as a list, without `null`.
fn types(schema: &Map<String, Value>) -> Vec<&str> {
    let mut types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() && schema.contains_key("properties") {
        types.push("object");
    }
    types.retain(|t| *t != "null");
    types
}

/// RFC 6901: `~` and `/` in a property name.
pub(super) fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::RiskClass;

    fn rules(input: Value) -> Vec<(Rule, String)> {
        let Value::Object(input) = input else {
            panic!("an object schema")
        };
        let tool = Subject {
            plugin: "x",
            name: "x_thing_get",
            risk: RiskClass::Read,
            title: "Thing",
            description: "Returns one thing by its name.",
            input: &input,
            output: None,
            allowed: &[],
        };
        let mut findings = Findings { list: Vec::new() };
        check(&mut findings, &tool);
        findings
            .list
            .into_iter()
            .map(|f| (f.rule, f.at.unwrap_or_default()))
            .collect()
    }

    #[test]
    fn subschemas_that_accept_anything_are_found() {
        let found = rules(serde_json::json!({
            "type": "object",
            "properties": { "a": true, "b": { "type": "array", "maxItems": 2, "items": true } },
            "patternProperties": { ".*": true },
            "required": [],
            "additionalProperties": false
        }));
        let mut free: Vec<&str> = found
            .iter()
            .filter(|(r, _)| *r == Rule::SchemaFreeObject)
            .map(|(_, at)| at.as_str())
            .collect();
        free.sort();
        assert_eq!(
            free,
            [
                "/patternProperties/.*",
                "/properties/a",
                "/properties/b/items"
            ],
            "{found:?}"
        );
    }

    #[test]
    fn a_reference_outside_defs_is_found_and_one_inside_is_walked() {
        let found = rules(serde_json::json!({
            "type": "object",
            "properties": { "a": { "$ref": "#/x" }, "b": { "$ref": "#/$defs/B" } },
            "$defs": { "B": { "type": "string" } },
            "x": {},
            "required": [],
            "additionalProperties": false
        }));
        assert!(
            found.contains(&(Rule::SchemaFreeObject, "/properties/a".into())),
            "{found:?}"
        );
        assert!(
            found.contains(&(Rule::SchemaStringBounds, "/$defs/B".into())),
            "{found:?}"
        );
        assert_eq!(found.len(), 2, "{found:?}");
    }
}
