//! Rules on tool names: their shape, what their verb says against the risk
//! class, names an agent would confuse, and tools that switch between
//! reading and writing on an argument.

use serde_json::Value;

use super::words::{self, VerbClass};
use super::{Findings, Rule, Subject};
use crate::manifest::RiskClass;

/// A tool name split as `<system>_<object>_<verb>[_<scope>]`.
struct Parts<'a> {
    tokens: Vec<&'a str>,
    /// Index of the verb in `tokens`, if one was found.
    verb: Option<usize>,
}

impl<'a> Parts<'a> {
    /// The object may be several words (`pull_request`): the verb is the
    /// first known verb after the first word of the object; without one,
    /// the third word stands in for it.
    fn of(name: &'a str) -> Parts<'a> {
        let tokens: Vec<&str> = name.split('_').collect();
        let verb = (2..tokens.len())
            .find(|&i| words::verb_class(tokens[i]).is_some())
            .or((tokens.len() >= 3).then_some(2));
        Parts { tokens, verb }
    }

    fn verb(&self) -> Option<&'a str> {
        self.verb.map(|i| self.tokens[i])
    }

    /// The verb word from the verb's place on that says the most (delete
    /// over update over get), so neither a verb-like word in the object
    /// (`order_status_update`) nor a second verb (`note_get_delete`) hides
    /// what the tool may do.
    fn strongest(&self) -> Option<(VerbClass, &'a str)> {
        let rank = |c: VerbClass| match c {
            VerbClass::Read => 1,
            VerbClass::Write => 2,
            VerbClass::Destructive => 3,
            VerbClass::Vague => 0,
        };
        self.tokens[self.verb?..]
            .iter()
            .filter_map(|t| words::verb_class(t).map(|c| (c, *t)))
            .filter(|(c, _)| *c != VerbClass::Vague)
            .max_by_key(|(c, _)| rank(*c))
    }

    fn object(&self) -> String {
        let end = self.verb.unwrap_or(self.tokens.len());
        self.tokens[1.min(end)..end].join("_")
    }
}

/// The risk class a name's verb says: what a manifest should declare.
pub fn risk_of_verb(name: &str) -> RiskClass {
    match Parts::of(name).strongest() {
        Some((VerbClass::Read, _)) => RiskClass::Read,
        Some((VerbClass::Destructive, _)) => RiskClass::Destructive,
        _ => RiskClass::Write,
    }
}

/// Shape and verb of one tool's name.
pub fn check(findings: &mut Findings, tool: &Subject<'_>) {
    let parts = Parts::of(tool.name);
    if parts.tokens[0] != tool.plugin {
        findings.tool(
            Rule::NameShape,
            tool,
            format!(
                "the name does not start with its plugin's name `{}`",
                tool.plugin
            ),
            format!(
                "name it `{}_<object>_<verb>[_<scope>]`, e.g. `{}_{}`",
                tool.plugin,
                tool.plugin,
                parts.tokens[1..].join("_")
            ),
        );
    }
    let Some(verb) = parts.verb() else {
        findings.tool(
            Rule::NameShape,
            tool,
            "the name has no object and verb after the plugin's name".into(),
            format!(
                "name it `{}_<object>_<verb>[_<scope>]`, e.g. `{}_ticket_get`",
                tool.plugin, tool.plugin
            ),
        );
        return;
    };
    let object = parts.object();
    match words::verb_class(verb) {
        None => findings.tool(
            Rule::NameUnknownVerb,
            tool,
            format!(
                "`{verb}` is not a verb the lint knows, so it cannot check the name against the risk class"
            ),
            "use a verb from docs/lint.md (get, list, search, create, update, send, delete, …), or accept the finding with lint_allow".into(),
        ),
        Some(VerbClass::Vague) => findings.tool(
            Rule::NameVagueVerb,
            tool,
            format!("the verb `{verb}` does not say what the tool does to the {object}"),
            format!(
                "name the effect instead (`{}_{object}_get`, `…_create`, `…_send`, …); if the object makes it clear, accept it with lint_allow = {{ name-vague-verb = \"why\" }}",
                tool.plugin
            ),
        ),
        Some(first) => {
            let (class, verb) = parts.strongest().unwrap_or((first, verb));
            let expected = match (class, tool.risk) {
                (VerbClass::Read, RiskClass::Read) => None,
                (VerbClass::Read, _) => Some("read"),
                (VerbClass::Destructive, RiskClass::Destructive) => None,
                (VerbClass::Destructive, _) => Some("destructive"),
                (VerbClass::Write, RiskClass::Read) => Some("write"),
                (VerbClass::Write, _) => None,
                (VerbClass::Vague, _) => unreachable!("handled above"),
            };
            if let Some(expected) = expected {
                findings.tool(
                    Rule::RiskVerb,
                    tool,
                    format!(
                        "the verb `{verb}` says {expected}, but the manifest classes the tool `{}`",
                        tool.risk.as_str()
                    ),
                    format!(
                        "set risk = \"{expected}\" if that is what it does; otherwise rename the tool so its verb says what it does"
                    ),
                );
            }
        }
    }
    action_switch(findings, tool);
}

/// One argument that chooses between looking and changing: an enum whose
/// values are verbs of different classes (`"action": ["get", "delete"]`),
/// or a flag named after a verb that changes (`"delete": true`). Either way
/// the risk class cannot describe the tool, and the grant is too coarse.
fn action_switch(findings: &mut Findings, tool: &Subject<'_>) {
    let Some(Value::Object(properties)) = tool.input.get("properties") else {
        return;
    };
    for (name, schema) in properties {
        let classes: Vec<VerbClass> = schema
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|v| {
                v.split(['-', '_', ' '])
                    .find_map(words::verb_class)
                    .filter(|c| *c != VerbClass::Vague)
            })
            .collect();
        let mixed = classes.iter().any(|c| *c != classes[0]);
        let flag = schema.get("type") == Some(&Value::String("boolean".into()))
            && matches!(
                words::verb_class(name),
                Some(VerbClass::Write | VerbClass::Destructive)
            );
        if mixed || flag {
            findings.tool(
                Rule::ActionSwitch,
                tool,
                format!(
                    "argument `{name}` switches the tool between reading and changing, so one risk class and one grant cover both"
                ),
                format!(
                    "split it into one tool per effect (`{}_<object>_get`, `…_update`, `…_delete`), each with its own risk class",
                    tool.plugin
                ),
            );
        }
    }
}

/// Word overlap (Jaccard) from which two descriptions read as one.
const DESCRIPTION_OVERLAP: f64 = 0.8;
/// Names this close in characters read as a typo of each other.
const NAME_DISTANCE: usize = 2;

/// Pairs of tools of one plugin an agent would confuse: the same object and
/// verb up to synonyms, names a typo apart, or descriptions that say the
/// same thing. Across plugins the `<system>` prefix tells tools apart, and
/// equal names are `name-clash`.
pub fn collisions(findings: &mut Findings, tools: &[Subject<'_>]) {
    let keys: Vec<String> = tools.iter().map(|t| intent(t.name)).collect();
    let described: Vec<Vec<String>> = tools
        .iter()
        .map(|t| {
            let mut w: Vec<String> = words::words(t.description)
                .filter(|w| !words::is_filler(w))
                .collect();
            w.sort();
            w.dedup();
            w
        })
        .collect();
    for i in 0..tools.len() {
        for j in i + 1..tools.len() {
            let (a, b) = (&tools[i], &tools[j]);
            if a.plugin != b.plugin {
                continue;
            }
            let why = if keys[i] == keys[j] {
                Some(format!(
                    "`{}` and `{}` name the same object and verbs of the same meaning",
                    a.name, b.name
                ))
            } else if let Some(distance) =
                Some(strsim::levenshtein(a.name, b.name)).filter(|&d| d <= NAME_DISTANCE)
            {
                Some(format!(
                    "`{}` and `{}` differ by {distance} character(s)",
                    a.name, b.name
                ))
            } else {
                let overlap = jaccard(&described[i], &described[j]);
                (overlap >= DESCRIPTION_OVERLAP).then(|| {
                    format!(
                        "the descriptions of `{}` and `{}` share {:.0}% of their words",
                        a.name,
                        b.name,
                        overlap * 100.0
                    )
                })
            };
            if let Some(why) = why {
                findings.tool(
                    Rule::IntentCollision,
                    b,
                    format!("an agent could confuse it with `{}`: {why}", a.name),
                    "make the names and descriptions say how the two differ (object, verb, scope), or drop one".into(),
                );
            }
        }
    }
}

/// A name with each verb folded to its synonym.
fn intent(name: &str) -> String {
    name.split('_')
        .map(words::synonym)
        .collect::<Vec<_>>()
        .join("_")
}

fn jaccard(a: &[String], b: &[String]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.iter().filter(|w| b.binary_search(w).is_ok()).count();
    shared as f64 / (a.len() + b.len() - shared) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strongest_verb_decides_the_risk() {
        assert_eq!(risk_of_verb("shop_order_status_update"), RiskClass::Write);
        assert_eq!(risk_of_verb("x_note_get_delete"), RiskClass::Destructive);
        assert_eq!(risk_of_verb("helpdesk_stats_get"), RiskClass::Read);
    }

    #[test]
    fn the_verb_is_found_after_a_multi_word_object() {
        let parts = Parts::of("github_pull_request_get_open");
        assert_eq!(parts.verb(), Some("get"));
        assert_eq!(parts.object(), "pull_request");
        let parts = Parts::of("crm_contact_list_recent");
        assert_eq!(parts.verb(), Some("list"));
        assert_eq!(parts.object(), "contact");
        assert!(Parts::of("crm_contact").verb().is_none());
    }

    #[test]
    fn synonyms_fold_to_one_intent() {
        assert_eq!(intent("docs_page_fetch"), intent("docs_page_get"));
        assert_ne!(intent("docs_page_list"), intent("docs_page_get"));
    }
}
