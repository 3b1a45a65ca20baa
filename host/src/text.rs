//! Text a plugin hands the model: what counts as hidden in it, and how to
//! show it to a person as the model reads it.
//!
//! A plugin chooses its tools' titles, descriptions and schemas, and the
//! host passes them to every client. A reviewer reads them in a terminal or
//! a web page, where some characters draw nothing, draw something else, or
//! reorder what is around them; the model reads the code points. The catalog
//! refuses a plugin whose text holds any of them (see `catalog`), and every
//! command that prints such text goes through [`visible`] or [`json`].

use std::fmt;

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, UnicodeEmoji, UnicodeGeneralCategory};

/// Why a character may not appear in model-facing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HiddenKind {
    /// A C0 or C1 control other than newline and tab, or a line or
    /// paragraph separator.
    Control,
    /// The start of an ANSI/terminal escape sequence (ESC followed by a
    /// sequence introducer, or the C1 CSI).
    TerminalEscape,
    /// A bidirectional embedding, override, isolate or mark: it reorders
    /// what a person sees without changing what the model reads.
    Bidi,
    /// Draws nothing: zero-width spaces and joiners, word joiners, invisible
    /// operators, the byte-order mark, soft hyphens, fillers, Unicode tag
    /// characters and other format characters.
    Invisible,
    /// A variation selector that selects nothing (it follows no character
    /// that has such a variant).
    StrayVariationSelector,
    /// A private-use, unassigned or non-character code point: no agreed
    /// meaning, so a person and the model may read it differently.
    Unassigned,
    /// A compatibility character that NFKC folds into ASCII letters or
    /// digits (fullwidth or mathematical letters, ligatures, circled
    /// letters): it reads as a word a person searching the text would miss.
    Compatibility,
}

impl HiddenKind {
    pub fn describe(self) -> &'static str {
        match self {
            HiddenKind::Control => "a control character",
            HiddenKind::TerminalEscape => "a terminal escape sequence",
            HiddenKind::Bidi => "a bidirectional control character",
            HiddenKind::Invisible => "an invisible character",
            HiddenKind::StrayVariationSelector => "a variation selector that selects nothing",
            HiddenKind::Unassigned => "a private-use or unassigned code point",
            HiddenKind::Compatibility => "a compatibility character that NFKC reads as ASCII",
        }
    }
}

/// A character that may not be in model-facing text, or a run of them of
/// one kind (a fullwidth word, a tag-character message) reported once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    pub kind: HiddenKind,
    /// The first character of the run.
    pub ch: char,
    /// Its position, counted in characters from the start of the text.
    pub index: usize,
    /// How many characters of this kind follow each other from there.
    pub len: usize,
    /// What the run says to a model that reads through it: what NFKC makes
    /// of compatibility characters, the ASCII that tag characters spell.
    pub reads_as: Option<String>,
}

impl fmt::Display for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (U+{:04X}) ",
            self.kind.describe(),
            escaped(self.ch),
            u32::from(self.ch)
        )?;
        if self.len > 1 {
            write!(f, "and {} more like it from ", self.len - 1)?;
        } else {
            write!(f, "at ")?;
        }
        write!(f, "character {}", self.index)?;
        match (&self.reads_as, self.kind) {
            (Some(text), HiddenKind::Compatibility) => {
                write!(f, ", which NFKC reads as \"{}\"", visible(text))
            }
            (Some(text), _) => write!(f, ", which spell \"{}\" in tag characters", visible(text)),
            (None, _) => Ok(()),
        }
    }
}

/// Every character of `text` that may not be shown to the model, in order,
/// with neighbours of one kind joined into one run.
pub fn hidden(text: &str) -> Vec<Hidden> {
    hidden_within(text, usize::MAX).0
}

/// [`hidden`], keeping at most `max` runs: whatever a plugin sends, the
/// report stays small. Also returns how many runs there are in all.
pub fn hidden_within(text: &str, max: usize) -> (Vec<Hidden>, usize) {
    let mut found: Vec<Hidden> = Vec::new();
    let mut total = 0;
    // The last run, kept even once `found` is full, so runs are counted
    // the same way whether or not they are reported.
    let mut last: Option<(HiddenKind, usize)> = None;
    for at in in_context(text) {
        if at.ch.is_ascii() && !at.ch.is_ascii_control() {
            continue;
        }
        let Some((kind, reads_as)) = classify(&at) else {
            continue;
        };
        let reads_as = reads_as.or_else(|| tag_ascii(at.ch).map(String::from));
        match last {
            Some((run_kind, end)) if run_kind == kind && end == at.index => {
                last = Some((kind, at.index + 1));
                if let Some(run) = found.last_mut().filter(|r| r.index + r.len == at.index) {
                    run.len += 1;
                    if let Some(more) = reads_as {
                        run.reads_as.get_or_insert_default().push_str(&more);
                    }
                }
            }
            _ => {
                last = Some((kind, at.index + 1));
                total += 1;
                if found.len() < max {
                    found.push(Hidden {
                        kind,
                        ch: at.ch,
                        index: at.index,
                        len: 1,
                        reads_as,
                    });
                }
            }
        }
    }
    (found, total)
}

/// A character with what its classification looks at around it.
struct InContext {
    ch: char,
    index: usize,
    before: Option<char>,
    after: Option<char>,
    /// The last character before it that is not a presentation selector or
    /// a skin-tone modifier: what a joiner joins.
    base: Option<char>,
}

/// The characters of `text` in context, without copying the text.
fn in_context(text: &str) -> impl Iterator<Item = InContext> + '_ {
    let mut chars = text.chars().peekable();
    let mut index = 0;
    let mut before = None;
    let mut base = None;
    std::iter::from_fn(move || {
        let ch = chars.next()?;
        let at = InContext {
            ch,
            index,
            before,
            after: chars.peek().copied(),
            base,
        };
        index += 1;
        before = Some(ch);
        if !is_emoji_modifier(ch) {
            base = Some(ch);
        }
        Some(at)
    })
}

/// The emoji presentation selector and the skin-tone modifiers, which may
/// stand between an emoji and the joiner that follows it.
fn is_emoji_modifier(c: char) -> bool {
    matches!(c, '\u{fe0f}' | '\u{1f3fb}'..='\u{1f3ff}')
}

/// The ASCII character a Unicode tag character stands for: tags spell
/// text no one sees (the "ASCII smuggling" channel).
fn tag_ascii(c: char) -> Option<char> {
    matches!(c, '\u{e0020}'..='\u{e007e}')
        .then(|| char::from_u32(u32::from(c) - 0xe0000))
        .flatten()
}

/// Why a character is hidden, given its neighbours, or `None` if it may
/// stay.
fn classify(at: &InContext) -> Option<(HiddenKind, Option<String>)> {
    let kind = match at.ch {
        '\n' | '\t' => return None,
        '\u{1b}' if at.after.is_some_and(is_escape_introducer) => HiddenKind::TerminalEscape,
        '\u{9b}' => HiddenKind::TerminalEscape,
        '\u{2028}' | '\u{2029}' => HiddenKind::Control,
        c if c.is_control() => HiddenKind::Control,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' => {
            HiddenKind::Bidi
        }
        // The one invisible character with a visible use: joining emoji
        // into one picture (a family, a profession).
        '\u{200d}' if joins_emoji(at.base, at.after) => return None,
        '\u{fe00}'..='\u{fe0f}'
        | '\u{e0100}'..='\u{e01ef}'
        | '\u{180b}'..='\u{180d}'
        | '\u{180f}' => {
            if presents_emoji(at.ch, at.before, at.after) {
                return None;
            }
            HiddenKind::StrayVariationSelector
        }
        c if is_default_ignorable(c) => HiddenKind::Invisible,
        c => match c.general_category() {
            GeneralCategory::Format => HiddenKind::Invisible,
            GeneralCategory::PrivateUse | GeneralCategory::Unassigned => HiddenKind::Unassigned,
            _ => return compatibility(c).map(|reads| (HiddenKind::Compatibility, Some(reads))),
        },
    };
    Some((kind, None))
}

/// The byte after ESC that starts a terminal sequence: CSI `[`, OSC `]`,
/// the character-set and other Fe/Fp/nF introducers.
fn is_escape_introducer(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{7e}')
}

/// Code points Unicode marks as ignorable by default (drawn as nothing when
/// not supported): the list of DerivedCoreProperties, less the variation
/// selectors, which are judged by what they follow.
fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}'
        | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{feff}' | '\u{ffa0}'
        | '\u{fff0}'..='\u{fff8}' | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e00ff}' | '\u{e01f0}'..='\u{e0fff}')
}

/// A zero-width joiner between two emoji (`base` is the last character
/// before it past the presentation selector and skin-tone modifiers).
fn joins_emoji(base: Option<char>, after: Option<char>) -> bool {
    let is_pictograph = |c: char| c.is_emoji_char() && !c.is_ascii();
    base.is_some_and(is_pictograph) && after.is_some_and(is_pictograph)
}

/// The one use of a variation selector a tool's text has: asking for the
/// text or emoji presentation of an emoji (❤️), or making a keycap (1️⃣).
/// Every other selector (the standardized and ideographic variants, a
/// second selector, one after a letter) can carry bits no one sees, and is
/// refused.
fn presents_emoji(selector: char, base: Option<char>, after: Option<char>) -> bool {
    if !matches!(selector, '\u{fe0e}' | '\u{fe0f}') {
        return false;
    }
    match base {
        Some(base) if base.is_ascii() => {
            selector == '\u{fe0f}'
                && matches!(base, '0'..='9' | '#' | '*')
                && after == Some('\u{20e3}')
        }
        Some(base) => base.is_emoji_char(),
        None => false,
    }
}

/// What NFKC makes of `c`, when that spells ASCII letters or digits with a
/// character that is not one: `ｎｏｔｅｓ` reads as `notes` to a model but
/// not to a reviewer's search. Visibly different forms stay: emoji (ℹ️,
/// Ⓜ️), CJK squared units and enclosed ideographs (㎡, ㋀), superscript
/// modifier letters (1ᵉʳ). Numbers written another way (fullwidth,
/// superscript, fractions, circled) and a few common signs (™, №, ℃, ª) say the
/// same thing either way and stay: fullwidth digits are ordinary in
/// Japanese text.
fn compatibility(c: char) -> Option<String> {
    if c.is_ascii()
        || matches!(
            c.general_category(),
            GeneralCategory::DecimalNumber
                | GeneralCategory::OtherNumber
                | GeneralCategory::ModifierLetter
        )
        || c.is_emoji_char()
        || matches!(c, '\u{3200}'..='\u{33ff}')
        || matches!(c, '™' | '℠' | '№' | '℃' | '℉' | 'ª' | 'º')
    {
        return None;
    }
    let folded: String = std::iter::once(c).nfkc().collect();
    (folded != c.to_string()
        && folded
            .chars()
            .any(|f| f.is_ascii_alphanumeric() || f == '_'))
    .then_some(folded)
}

/// The character as the escapes show it: `\u{200b}`.
fn escaped(c: char) -> String {
    format!("\\u{{{:x}}}", u32::from(c))
}

/// Whether [`visible`] writes `c` as an escape: everything that draws
/// nothing or controls the display, and letters that NFKC folds into ASCII,
/// so a reviewer sees `\u{ff43}` where the model reads `c`.
fn needs_escape(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control()
        || compatibility(c).is_some()
        || is_default_ignorable(c)
        || matches!(c,
            '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' | '\u{180b}'..='\u{180f}'
            | '\u{2028}' | '\u{2029}')
        || matches!(
            c.general_category(),
            GeneralCategory::Format
                | GeneralCategory::PrivateUse
                | GeneralCategory::Unassigned
                | GeneralCategory::SpaceSeparator
        )
}

/// `text` for a person's terminal or page: every character that draws
/// nothing, draws a space other than the plain one, controls the display,
/// or is a letter NFKC folds into ASCII is written as `\u{…}` (newline and
/// tab as `\n` and `\t`), and a backslash as `\\`, so the escapes cannot be
/// forged. Everything else, umlauts, CJK and emoji among it, is shown as it
/// is.
pub fn visible(text: &str) -> String {
    escape(text, true)
}

/// [`visible`] without doubling backslashes: for messages that already
/// hold escapes made by [`visible`] or a [`Hidden`], and may also quote
/// plugin text, so that what reaches a terminal is safe either way.
pub fn escape_hidden(text: &str) -> String {
    escape(text, false)
}

fn escape(text: &str, backslash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for at in in_context(text) {
        match at.ch {
            '\\' if backslash => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            _ if escapes(&at) => out.push_str(&escaped(at.ch)),
            c => out.push(c),
        }
    }
    out
}

/// Whether a character is written escaped. Joiners and selectors that are
/// part of an emoji (👨‍👩‍👧, ❤️) are shown as they are, as the check lets
/// them pass; elsewhere they are escaped.
fn escapes(at: &InContext) -> bool {
    if !needs_escape(at.ch) {
        return false;
    }
    if matches!(at.ch, '\u{200d}' | '\u{fe0e}' | '\u{fe0f}') {
        return classify(at).is_some();
    }
    true
}

/// `value` as JSON (indented when `pretty`), with every character
/// [`visible`] would escape written as a JSON `\u` escape: the same
/// document, safe to print.
pub fn json(value: &Value, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .expect("a JSON value serialises");
    let mut out = String::with_capacity(text.len());
    for at in in_context(&text) {
        let c = at.ch;
        // serde_json has already escaped the ASCII controls and the quote
        // and backslash; what is left to escape can only be inside strings
        // (and DEL, which it leaves as it is).
        if c == '\u{7f}' || (!c.is_ascii() && escapes(&at)) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every string in `value`, and every object key, with the JSON pointer
/// (below `at`) that reaches it; a key's pointer is that of its value.
pub fn strings<'a>(value: &'a Value, at: &str, found: &mut Vec<(String, &'a str)>) {
    match value {
        Value::String(s) => found.push((at.to_string(), s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(item, &format!("{at}/{i}"), found);
            }
        }
        Value::Object(map) => object_strings(map, at, found),
        _ => {}
    }
}

/// [`strings`] of a JSON object.
pub fn object_strings<'a>(
    map: &'a Map<String, Value>,
    at: &str,
    found: &mut Vec<(String, &'a str)>,
) {
    for (key, item) in map {
        let below = format!("{at}/{}", pointer_escape(key));
        found.push((below.clone(), key));
        strings(item, &below, found);
    }
}

/// A key as one JSON pointer segment (RFC 6901).
pub fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(HiddenKind, char)> {
        hidden(text).into_iter().map(|h| (h.kind, h.ch)).collect()
    }

    #[test]
    fn each_class_of_hidden_character_is_found() {
        use HiddenKind::*;
        let cases: &[(&str, HiddenKind, char)] = &[
            ("a\u{0}b", Control, '\u{0}'),
            ("a\rb", Control, '\r'),
            ("a\u{7f}b", Control, '\u{7f}'),
            ("a\u{85}b", Control, '\u{85}'),
            ("a\u{2028}b", Control, '\u{2028}'),
            ("red \u{1b}[31mtext", TerminalEscape, '\u{1b}'),
            ("title \u{1b}]0;x\u{7}", TerminalEscape, '\u{1b}'),
            ("a\u{9b}31m", TerminalEscape, '\u{9b}'),
            ("abc\u{202e}fed", Bidi, '\u{202e}'),
            ("a\u{2066}b\u{2069}", Bidi, '\u{2066}'),
            ("a\u{200f}b", Bidi, '\u{200f}'),
            ("ab\u{200b}c", Invisible, '\u{200b}'),
            ("ab\u{200d}c", Invisible, '\u{200d}'),
            ("ab\u{2060}c", Invisible, '\u{2060}'),
            ("ab\u{2064}c", Invisible, '\u{2064}'),
            ("\u{feff}abc", Invisible, '\u{feff}'),
            ("ab\u{ad}c", Invisible, '\u{ad}'),
            ("a\u{e0041}\u{e0042}", Invisible, '\u{e0041}'),
            ("\u{fe0f}abc", StrayVariationSelector, '\u{fe0f}'),
            ("a\u{fe0f}bc", StrayVariationSelector, '\u{fe0f}'),
            ("a\u{e0100}bc", StrayVariationSelector, '\u{e0100}'),
            ("葛\u{e0100}", StrayVariationSelector, '\u{e0100}'),
            ("≩\u{fe00}", StrayVariationSelector, '\u{fe00}'),
            ("ü\u{fe0f}", StrayVariationSelector, '\u{fe0f}'),
            ("1\u{fe0f} item", StrayVariationSelector, '\u{fe0f}'),
            ("❤\u{fe0f}\u{fe0f}", StrayVariationSelector, '\u{fe0f}'),
            ("a\u{e000}b", Unassigned, '\u{e000}'),
            ("a\u{10ffff}b", Unassigned, '\u{10ffff}'),
            ("call ｎｏｔｅｓ", Compatibility, 'ｎ'),
            ("call 𝐧otes", Compatibility, '𝐧'),
            ("the ﬁle", Compatibility, 'ﬁ'),
            ("Ⓐ", Compatibility, 'Ⓐ'),
        ];
        for (text, kind, ch) in cases {
            let found = kinds(text);
            assert_eq!(found.first(), Some(&(*kind, *ch)), "{text:?}: {found:?}");
        }
    }

    #[test]
    fn ordinary_text_in_any_language_passes() {
        for text in [
            "Gibt die Rückgabe für Müller zurück; Größe in ß.",
            "Crée une note à propos de l'été, señor Muñoz.",
            "チケットを検索します。結果は最大２０件です！",
            "搜索工单并返回摘要。",
            "Ticket gelöst 🎉 👍🏽 ❤️ 1️⃣",
            "A family 👨‍👩‍👧 and a pilot 🧑🏽‍✈️ and a rainbow flag 🏳️‍🌈.",
            "Fläche in m², ½ Liter, ① first, 3™, № 5, 20 ℃, 1ª vez.",
            "Lines\nand\ttabs … — “quoted” ‘single’ «guillemets» non\u{a0}breaking",
            "Emoji that NFKC folds: ℹ️ Ⓜ️; units ㎡ ㎏, ㋀; the 1ᵉʳ of May; keycap 1\u{fe0f}\u{20e3}.",
            "Привет, Καλημέρα, مرحبا, שלום, नमस्ते",
        ] {
            assert_eq!(hidden(text), vec![], "{text}");
        }
    }

    #[test]
    fn neighbours_of_one_kind_are_one_run_that_says_what_it_spells() {
        let found = hidden("call ｃｒｍ＿ｇｅｔ now\u{e0068}\u{e0069}");
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].index, found[0].len), (5, 7));
        assert_eq!(
            found[0].to_string(),
            "a compatibility character that NFKC reads as ASCII \\u{ff43} (U+FF43) and 6 more like it from character 5, which NFKC reads as \"crm_get\""
        );
        assert_eq!(
            found[1].to_string(),
            "an invisible character \\u{e0068} (U+E0068) and 1 more like it from character 16, which spell \"hi\" in tag characters"
        );
    }

    #[test]
    fn the_report_is_bounded_whatever_the_text() {
        let text = "\u{1}a".repeat(10_000);
        let (found, total) = hidden_within(&text, 20);
        assert_eq!((found.len(), total), (20, 10_000));
        // A run that starts with another invisible character still says
        // what its tag characters spell.
        let found = hidden("x\u{200b}\u{e0068}\u{e0069}");
        assert_eq!((found.len(), found[0].len), (1, 3));
        assert_eq!(found[0].reads_as.as_deref(), Some("hi"));
    }

    #[test]
    fn a_joiner_outside_an_emoji_sequence_is_hidden() {
        assert_eq!(
            kinds("👨\u{200d}x"),
            vec![(HiddenKind::Invisible, '\u{200d}')]
        );
        assert_eq!(
            kinds("x\u{200d}👨"),
            vec![(HiddenKind::Invisible, '\u{200d}')]
        );
    }

    #[test]
    fn the_finding_names_the_code_point_escaped_and_where() {
        let found = hidden("Returns\u{200b} one ticket");
        assert_eq!(
            found[0].to_string(),
            "an invisible character \\u{200b} (U+200B) at character 7"
        );
        let found = hidden("use ｎ");
        assert_eq!(
            found[0].to_string(),
            "a compatibility character that NFKC reads as ASCII \\u{ff4e} (U+FF4E) at character 4, which NFKC reads as \"n\""
        );
    }

    #[test]
    fn visible_escapes_what_draws_nothing_and_keeps_the_rest() {
        assert_eq!(
            visible(
                "a\u{200b}b\u{1b}[31m\u{202e}c\\u{200b}\nü 日本 🎉\u{a0} ｃ２ 👨\u{200d}👩 ❤\u{fe0f} a\u{fe0f}"
            ),
            "a\\u{200b}b\\u{1b}[31m\\u{202e}c\\\\u{200b}\\nü 日本 🎉\\u{a0} \\u{ff43}２ 👨\u{200d}👩 ❤\u{fe0f} a\\u{fe0f}"
        );
    }

    #[test]
    fn json_escapes_hidden_characters_and_stays_the_same_document() {
        let value = serde_json::json!({"d\u{200b}": "x\u{202e}y\u{e0041} ü", "n": 1});
        let shown = json(&value, false);
        assert!(
            !shown.contains('\u{200b}') && !shown.contains('\u{202e}'),
            "{shown}"
        );
        assert!(
            shown.contains("\\u200b") && shown.contains("\\udb40\\udc41") && shown.contains('ü')
        );
        assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), value);
    }

    #[test]
    fn strings_reach_every_key_and_value_with_a_pointer() {
        let value = serde_json::json!({"properties": {"a/b": {"enum": ["x", "y"]}}});
        let mut found = Vec::new();
        strings(&value, "/inputSchema", &mut found);
        let pointers: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert!(
            pointers.contains(&"/inputSchema/properties/a~1b/enum/1"),
            "{pointers:?}"
        );
        assert!(
            found
                .iter()
                .any(|(p, s)| p == "/inputSchema/properties/a~1b" && *s == "a/b")
        );
    }
}
