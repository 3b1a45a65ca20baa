//! The argument validator on both of its untrusted inputs: arguments a
//! client sends, checked against fixed tool schemas, and schemas a plugin
//! describes, compiled and then used. The first byte chooses which.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use toolhost::catalog::ToolSchema;

/// Schemas shaped like the example catalog's: patterns, bounds, enums,
/// nested arrays of objects.
const SCHEMAS: [&str; 3] = [
    r#"{"type":"object","properties":{"key":{"type":"string","pattern":"^T-[0-9]{1,6}$","maxLength":9}},"required":["key"],"additionalProperties":false}"#,
    r#"{"type":"object","properties":{"slug":{"type":"string","pattern":"^[a-z0-9]+(-[a-z0-9]+)*$","maxLength":64},"body":{"type":"string","maxLength":20000},"tags":{"type":"array","items":{"type":"string","maxLength":32},"maxItems":10,"uniqueItems":true},"mode":{"enum":["create","replace"]}},"required":["slug","body"],"additionalProperties":false}"#,
    r#"{"type":"object","properties":{"filters":{"type":"array","maxItems":5,"items":{"type":"object","properties":{"field":{"enum":["status","owner"]},"value":{"type":"string","maxLength":40}},"required":["field","value"],"additionalProperties":false}},"limit":{"type":"integer","minimum":1,"maximum":100}},"additionalProperties":false}"#,
];

fn schemas() -> &'static [ToolSchema] {
    static COMPILED: OnceLock<Vec<ToolSchema>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        SCHEMAS
            .iter()
            .map(|s| ToolSchema::parse(s).expect("the fixed schemas are valid"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    if choice & 1 == 0 {
        let Ok(arguments) = serde_json::from_slice::<Value>(rest) else {
            return;
        };
        let schema = &schemas()[usize::from(choice >> 1) % SCHEMAS.len()];
        let _ = schema.check(&arguments);
    } else {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        if let Ok(schema) = ToolSchema::parse(text) {
            for arguments in [
                json!({}),
                json!({ "key": "T-1041", "limit": 5, "tags": ["a", "b"] }),
                json!({ "a": { "b": [1, 2.5, null, "x", { "c": true }] } }),
            ] {
                let _ = schema.check(&arguments);
            }
        }
    }
});
