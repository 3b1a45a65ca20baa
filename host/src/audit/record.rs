//! One line of the trail: a record's canonical form, its hash, and the
//! bounds that keep a record small whatever a caller sent.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `prev` of the very first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A record longer than this (arguments included) has its arguments
/// replaced by their size and digest.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// Strings longer than this are cut, keeping their length.
const MAX_STRING_BYTES: usize = 512;
/// How much of a cut string stays readable.
const KEPT_STRING_BYTES: usize = 256;
/// Arrays longer than this keep their first items and a count.
const MAX_ITEMS: usize = 64;
/// Nesting deeper than this is replaced by a marker.
const MAX_DEPTH: usize = 16;

/// The one serialisation that is hashed, by the trail and by approval
/// bindings (`policy`): compact JSON with object keys in byte order at every
/// level. Written here rather than left to serde_json's
/// map order, which a feature flag anywhere in the build could change.
pub fn canonical(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    into_string(out)
}

/// [`canonical`] of a JSON object, without wrapping it in a `Value`.
pub fn canonical_map(map: &Map<String, Value>) -> String {
    let mut out = Vec::new();
    write_object(map, &mut out);
    into_string(out)
}

fn into_string(out: Vec<u8>) -> String {
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

// Straight into one buffer: the trail serialises every record, and a String
// per key and per scalar was most of what that cost.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec"),
    }
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("writing to a Vec");
        out.push(b':');
        write_canonical(value, out);
    }
    out.push(b'}');
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The line for `event` at position `seq` after the record hashed `prev`.
/// `event` is a JSON object carrying at least `"event"`; the chain fields
/// are added here and cannot be set by the event.
///
/// The chain fields are set in `event` itself (replacing any from an
/// earlier, failed write) rather than in a copy: the writer keeps the map to
/// retry with, and a copy per record cost as much as the serialisation.
pub fn line(seq: u64, time: &str, prev: &str, event: &mut Map<String, Value>) -> String {
    event.insert("seq".into(), seq.into());
    event.insert("time".into(), time.into());
    event.insert("prev".into(), prev.into());
    let text = canonical_map(event);
    if text.len() <= MAX_RECORD_BYTES {
        return text;
    }
    // Only a caller-supplied value can be this large: keep everything else
    // and say what was dropped.
    let mut record: Map<String, Value> = match serde_json::from_str(&text) {
        Ok(Value::Object(record)) => record,
        _ => Map::new(),
    };
    for field in ["arguments", "detail"] {
        if let Some(value) = record.get_mut(field) {
            let size = canonical(value).len();
            *value = serde_json::json!({ "cut": true, "bytes": size });
        }
    }
    let mut text = canonical_map(&record);
    if text.len() > MAX_RECORD_BYTES {
        // Then any other long text (a URL a plugin made up, say) is cut, so
        // that the record still says who did what.
        for value in record.values_mut() {
            if let Value::String(long) = value
                && long.len() > MAX_STRING_BYTES
            {
                *long = bounded_text(long);
            }
        }
        text = canonical_map(&record);
    }
    if text.len() <= MAX_RECORD_BYTES {
        text
    } else {
        let mut stub = Map::new();
        stub.insert("event".into(), "record_too_large".into());
        stub.insert("bytes".into(), text.len().into());
        stub.insert("seq".into(), seq.into());
        stub.insert("time".into(), time.into());
        stub.insert("prev".into(), prev.into());
        canonical(&Value::Object(stub))
    }
}

/// Caller-supplied JSON (tool arguments) made small enough to record: long
/// strings and arrays are cut with their length kept, deep nesting is
/// replaced by a marker.
pub fn bounded(value: &Value) -> Value {
    bounded_at(value, 0)
}

/// Caller-supplied text (a tool name nobody offers, an object's key) made
/// small enough to record, with its length kept where it is cut.
pub fn bounded_text(text: &str) -> String {
    if text.len() <= MAX_STRING_BYTES {
        return text.to_string();
    }
    let mut end = KEPT_STRING_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[cut: {} bytes]", &text[..end], text.len())
}

fn bounded_at(value: &Value, depth: usize) -> Value {
    if depth >= MAX_DEPTH && matches!(value, Value::Object(_) | Value::Array(_)) {
        return Value::String("…[cut: nested deeper than 16 levels]".into());
    }
    match value {
        Value::String(s) if s.len() > MAX_STRING_BYTES => Value::String(bounded_text(s)),
        Value::Array(items) => {
            let mut kept: Vec<Value> = items
                .iter()
                .take(MAX_ITEMS)
                .map(|item| bounded_at(item, depth + 1))
                .collect();
            if items.len() > MAX_ITEMS {
                kept.push(Value::String(format!("…[cut: {} items]", items.len())));
            }
            Value::Array(kept)
        }
        Value::Object(map) => {
            // Keys are the caller's too: as many and as long as values.
            let mut kept: Map<String, Value> = map
                .iter()
                .take(MAX_ITEMS)
                .map(|(k, v)| (bounded_text(k), bounded_at(v, depth + 1)))
                .collect();
            if map.len() > MAX_ITEMS {
                kept.insert(
                    "…[cut]".into(),
                    Value::String(format!("{} entries", map.len())),
                );
            }
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_at_every_level() {
        let value = json!({"b": 1, "a": {"z": [true, null], "y": "é\n"}});
        assert_eq!(
            canonical(&value),
            r#"{"a":{"y":"é\n","z":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn canonical_is_stable_through_a_parse() {
        let text = canonical(&json!({
            "x": 1.5,
            "n": -3,
            "s": "\u{1}",
            "floats": [0.30000000000000004, 123456.78901234567, 2.2250738585072014e-308, 1.7976931348623157e308, 5e-324]
        }));
        let again: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(canonical(&again), text);
    }

    #[test]
    fn objects_are_cut_like_arrays_and_their_keys_like_strings() {
        let many: Map<String, Value> = (0..1000).map(|n| (format!("k{n:04}"), json!(n))).collect();
        let long_key = "k".repeat(10_000);
        let value = json!({ "many": many, "long": { long_key: 1 } });
        let cut = bounded(&value);
        let many = cut["many"].as_object().unwrap();
        assert_eq!(many.len(), MAX_ITEMS + 1);
        assert_eq!(many["…[cut]"], json!("1000 entries"));
        let key = cut["long"].as_object().unwrap().keys().next().unwrap();
        assert!(
            key.ends_with("…[cut: 10000 bytes]") && key.len() < 400,
            "{key}"
        );
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        let value = json!({"s": "x".repeat(10_000), "a": vec![1; 1000]});
        let cut = bounded(&value);
        let s = cut["s"].as_str().unwrap();
        assert!(s.ends_with("…[cut: 10000 bytes]"), "{s}");
        assert!(s.len() < 400);
        let a = cut["a"].as_array().unwrap();
        assert_eq!(a.len(), MAX_ITEMS + 1);
        assert_eq!(a[MAX_ITEMS], json!("…[cut: 1000 items]"));
    }

    #[test]
    fn an_oversized_record_keeps_its_chain_fields() {
        let mut event = Map::new();
        event.insert("event".into(), "tool_call".into());
        let wide: Map<String, Value> = (0..5_000)
            .map(|i| (format!("key{i}"), Value::String("v".repeat(40))))
            .collect();
        event.insert("arguments".into(), Value::Object(wide));
        let text = line(7, "2026-01-01T00:00:00Z", GENESIS, &mut event);
        assert!(text.len() <= MAX_RECORD_BYTES);
        let record: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(record["seq"], 7);
        assert_eq!(record["arguments"]["cut"], true);
    }

    #[test]
    fn an_oversized_text_field_is_cut_and_the_record_kept() {
        let mut event = Map::new();
        event.insert("event".into(), "outbound_request".into());
        event.insert("plugin".into(), "spy".into());
        event.insert("outcome".into(), "ok".into());
        let url = format!("https://api.example.com/{}", "a".repeat(70_000));
        event.insert("url".into(), url.into());
        event.insert("detail".into(), "d".repeat(1_000).into());
        let text = line(3, "2026-01-01T00:00:00Z", GENESIS, &mut event);
        let record: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(record["event"], "outbound_request");
        assert_eq!(
            (&record["plugin"], &record["outcome"]),
            (&json!("spy"), &json!("ok"))
        );
        let url = record["url"].as_str().unwrap();
        assert!(url.starts_with("https://api.example.com/aaa"), "{url}");
        assert!(url.ends_with("…[cut: 70024 bytes]"), "{url}");
        assert_eq!(record["detail"]["cut"], true);
    }
}
