//! The vocabulary the rules share: what a verb in a tool name says about its
//! effect, and which words of a description state one. Deliberately small
//! and explicit: a reviewer must be able to read why a name was flagged.

/// What a verb says a tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerbClass {
    Read,
    Write,
    Destructive,
    /// Says nothing about the effect (`run`, `process`, …).
    Vague,
}

/// Verbs that only look: a tool named with one must be `read`.
const READ: &[&str] = &[
    "get",
    "list",
    "search",
    "read",
    "count",
    "stats",
    "find",
    "show",
    "view",
    "describe",
    "lookup",
    "query",
    "fetch",
    "check",
    "inspect",
    "preview",
    "export",
    "summarize",
    "diff",
    "compare",
    "validate",
    "status",
    "browse",
    "peek",
    "resolve",
    "explain",
    "download",
    "render",
    "estimate",
    "verify",
    "test",
    "ping",
];

/// Verbs that change something but can be undone or corrected.
const WRITE: &[&str] = &[
    "create",
    "add",
    "update",
    "set",
    "save",
    "write",
    "send",
    "post",
    "put",
    "patch",
    "edit",
    "modify",
    "change",
    "assign",
    "unassign",
    "answer",
    "reply",
    "close",
    "open",
    "reopen",
    "escalate",
    "categorize",
    "label",
    "tag",
    "untag",
    "move",
    "rename",
    "copy",
    "upload",
    "publish",
    "submit",
    "approve",
    "reject",
    "cancel",
    "merge",
    "start",
    "stop",
    "restart",
    "deploy",
    "schedule",
    "enable",
    "disable",
    "grant",
    "invite",
    "charge",
    "pay",
    "refund",
    "transfer",
    "book",
    "register",
    "import",
    "append",
    "insert",
    "mark",
    "lock",
    "unlock",
    "link",
    "unlink",
    "comment",
    "notify",
    "trigger",
    "restore",
    "archive",
    "commit",
    "push",
    "pin",
    "unpin",
    "star",
    "follow",
    "rate",
    "upsert",
    "increment",
    "decrement",
    "resize",
    "scale",
    "rollback",
    "retry",
];

/// Verbs that lose something for good: a tool named with one must be
/// `destructive`.
const DESTRUCTIVE: &[&str] = &[
    "delete",
    "remove",
    "purge",
    "drop",
    "destroy",
    "revoke",
    "wipe",
    "erase",
    "truncate",
    "terminate",
    "kill",
    "uninstall",
    "reset",
    "shred",
    "expunge",
    "overwrite",
];

/// Verbs that hide what the tool does (the list, and their kin).
const VAGUE: &[&str] = &[
    "process", "manage", "handle", "run", "execute", "sync", "apply", "do", "perform", "invoke",
    "operate", "action", "exec",
];

/// The class of `word` as a verb, if it is one the lint knows.
pub fn verb_class(word: &str) -> Option<VerbClass> {
    if VAGUE.contains(&word) {
        Some(VerbClass::Vague)
    } else if DESTRUCTIVE.contains(&word) {
        Some(VerbClass::Destructive)
    } else if READ.contains(&word) {
        Some(VerbClass::Read)
    } else if WRITE.contains(&word) {
        Some(VerbClass::Write)
    } else {
        None
    }
}

/// Verbs an agent would take to mean the same thing, folded to one, so two
/// tools named `x_doc_get` and `x_doc_fetch` are seen as one intent.
pub fn synonym(verb: &str) -> &str {
    match verb {
        "fetch" | "read" | "show" | "view" | "lookup" | "retrieve" | "describe" => "get",
        "find" | "query" | "browse" => "search",
        "remove" | "purge" | "drop" | "destroy" | "wipe" | "erase" | "expunge" => "delete",
        "edit" | "modify" | "change" | "patch" => "update",
        "add" | "insert" | "new" => "create",
        "store" | "put" | "write" | "upsert" => "save",
        "post" => "send",
        other => other,
    }
}

/// Words of effect a write or destructive tool's description must use at
/// least one of, in any inflection ("writes", "deleted", "sending").
const EFFECT: &[&str] = &[
    "write",
    "send",
    "delete",
    "charge",
    "create",
    "update",
    "change",
    "modify",
    "save",
    "store",
    "record",
    "set",
    "add",
    "remove",
    "move",
    "close",
    "open",
    "reopen",
    "assign",
    "post",
    "publish",
    "replace",
    "overwrite",
    "append",
    "cancel",
    "mark",
    "escalate",
    "categorize",
    "answer",
    "reply",
    "submit",
    "upload",
    "transfer",
    "pay",
    "refund",
    "revoke",
    "purge",
    "erase",
    "destroy",
    "drop",
    "wipe",
    "trash",
    "edit",
    "insert",
    "rename",
    "copy",
    "archive",
    "restore",
    "merge",
    "deploy",
    "start",
    "stop",
    "restart",
    "enable",
    "disable",
    "grant",
    "invite",
    "notify",
    "book",
    "register",
    "import",
    "lock",
    "unlock",
    "link",
    "unlink",
    "comment",
    "tag",
    "label",
    "schedule",
    "approve",
    "reject",
    "commit",
    "push",
    "increment",
    "decrement",
    "reset",
    "truncate",
    "terminate",
    "kill",
    "uninstall",
    "upsert",
    "put",
    "patch",
];

/// Past forms that do not follow the rules `inflects` knows.
const IRREGULAR: &[(&str, &str)] = &[
    ("wrote", "write"),
    ("written", "write"),
    ("sent", "send"),
    ("paid", "pay"),
    ("put", "put"),
    ("set", "set"),
];

/// Whether `word` (lowercase) is a form of a verb of effect.
pub fn states_effect(word: &str) -> bool {
    IRREGULAR.iter().any(|(form, _)| *form == word)
        || EFFECT.iter().any(|base| inflects(base, word))
}

/// `word` is `base`, or `base` with -s, -es, -d, -ed, -ing, -ies/-ied, or
/// a doubled last consonant (`dropped`).
fn inflects(base: &str, word: &str) -> bool {
    if word == base {
        return true;
    }
    let Some(rest) = word.strip_prefix(base) else {
        if let Some(stem) = base.strip_suffix('y') {
            return word
                .strip_prefix(stem)
                .is_some_and(|s| s == "ies" || s == "ied");
        }
        if let Some(stem) = base.strip_suffix('e') {
            return word.strip_prefix(stem).is_some_and(|s| s == "ing");
        }
        return false;
    };
    let doubled = base.chars().last().map(|c| c.to_string());
    matches!(rest, "s" | "es" | "d" | "ed" | "ing")
        || doubled.is_some_and(|d| rest == format!("{d}ed") || rest == format!("{d}ing"))
}

/// Lowercase words of a text: letters and digits, split at everything else.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// Words that carry no meaning of their own, left out when descriptions
/// are compared.
pub fn is_filler(word: &str) -> bool {
    const FILLER: &[&str] = &[
        "a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "is", "it", "its", "by",
        "with", "as", "at", "be", "this", "that", "from", "one", "if", "not", "no", "are", "was",
        "can", "you", "your", "their", "all", "any", "each", "only", "into", "than", "which",
    ];
    word.len() < 3 || FILLER.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_words_are_found_in_their_inflections() {
        for word in [
            "writes",
            "deleted",
            "sending",
            "charges",
            "dropped",
            "categorizes",
            "sent",
            "copies",
            "closing",
            "updates",
        ] {
            assert!(states_effect(word), "{word}");
        }
        for word in ["returns", "reads", "lists", "shows", "ticket", "settings"] {
            assert!(!states_effect(word), "{word}");
        }
    }

    #[test]
    fn verbs_have_one_class() {
        for list in [READ, WRITE, DESTRUCTIVE, VAGUE] {
            for verb in list {
                let classes = [READ, WRITE, DESTRUCTIVE, VAGUE]
                    .iter()
                    .filter(|l| l.contains(verb))
                    .count();
                assert_eq!(classes, 1, "{verb} is in {classes} lists");
            }
        }
    }
}
