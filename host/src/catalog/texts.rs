//! The text each tool hands the model — its title, its description and
//! every string and key of its input and output schemas — checked for
//! characters a person reading it would not see (see `crate::text`).

use std::fmt;

use serde_json::{Map, Value};

use crate::text::{self, Hidden};

/// A hidden character in one tool's model-facing text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenText {
    pub tool: String,
    /// A JSON pointer into the tool as `tools/list` sends it: `/title`,
    /// `/description`, `/inputSchema/properties/key/description`, …
    pub at: String,
    pub hidden: Hidden,
}

impl fmt::Display for HiddenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tool `{}` at {}: {}",
            self.tool,
            text::visible(&self.at),
            self.hidden
        )
    }
}

/// The places a tool's model-facing text holds a hidden character, at most
/// `max` of them, and how many there are in all. The whole schema is
/// walked, keys included: all of it reaches the model, not only
/// `description` and `title`.
pub fn hidden_in_tool(
    tool: &str,
    title: &str,
    description: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
    max: usize,
) -> (Vec<HiddenText>, usize) {
    let mut texts: Vec<(String, &str)> = vec![
        ("/title".into(), title),
        ("/description".into(), description),
    ];
    text::object_strings(input, "/inputSchema", &mut texts);
    if let Some(output) = output {
        text::object_strings(output, "/outputSchema", &mut texts);
    }
    let mut found = Vec::new();
    let mut total = 0;
    for (at, text) in texts {
        let (hidden, all) = text::hidden_within(text, max - found.len());
        total += all;
        found.extend(hidden.into_iter().map(|hidden| HiddenText {
            tool: tool.to_string(),
            at: at.clone(),
            hidden,
        }));
    }
    (found, total)
}
