//! Matching a query against notes, and the snippet a search shows instead
//! of the body: enough to judge whether to read the note, never the note.

use crate::note::Note;

/// A snippet has at most this many characters, ellipses included.
pub const SNIPPET_MAX: usize = 200;
/// How much text before the match a snippet shows, so the match reads in
/// context but stays near the start.
const SNIPPET_LEAD: usize = 60;
const ELLIPSIS: char = '…';

/// The lower-cased words of a query. Every one must occur for a note to
/// match, in any field: a model's query is usually a few keywords, rarely a
/// phrase in the note's exact wording.
pub fn query_words(query: &str) -> Vec<String> {
    query.split_whitespace().map(str::to_lowercase).collect()
}

/// Whether every word occurs, case-insensitively, in the slug, title, body
/// or tags of `note`.
pub fn matches(note: &Note, words: &[String]) -> bool {
    let haystack = format!(
        "{}\n{}\n{}\n{}",
        note.slug,
        note.title,
        note.body,
        note.tags.join("\n")
    )
    .to_lowercase();
    words.iter().all(|w| haystack.contains(w.as_str()))
}

/// At most `SNIPPET_MAX` characters of `body` around the first place any
/// word occurs; the start of the body if the words matched only elsewhere.
/// Line breaks become spaces so that the snippet reads as one line.
pub fn snippet(body: &str, words: &[String]) -> String {
    let chars: Vec<char> = body
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let hit = (0..chars.len())
        .find(|&i| words.iter().any(|w| starts_with_lowered(&chars[i..], w)))
        .unwrap_or(0);
    excerpt(&chars, hit)
}

/// Whether `chars`, lower-cased, begin with `word` (already lower-cased).
/// Compared char by char on the original text, so the position found is a
/// position in the body even where lower-casing changes a text's length.
fn starts_with_lowered(chars: &[char], word: &str) -> bool {
    let mut lowered = chars.iter().flat_map(|c| c.to_lowercase());
    word.chars().all(|w| lowered.next() == Some(w))
}

fn excerpt(chars: &[char], hit: usize) -> String {
    if chars.len() <= SNIPPET_MAX {
        return chars.iter().collect();
    }
    let end = (hit.saturating_sub(SNIPPET_LEAD) + SNIPPET_MAX).min(chars.len());
    let start = end - SNIPPET_MAX;
    // Each cut side gives up one character to its ellipsis, so the snippet
    // stays within SNIPPET_MAX.
    let cut_front = start > 0;
    let cut_back = end < chars.len();
    let mut out = String::new();
    if cut_front {
        out.push(ELLIPSIS);
    }
    out.extend(&chars[start + usize::from(cut_front)..end - usize::from(cut_back)]);
    if cut_back {
        out.push(ELLIPSIS);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(body: &str) -> Note {
        Note {
            slug: "release-process".into(),
            title: "How we release".into(),
            body: body.into(),
            tags: vec!["ops".into()],
            version: 1,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    fn words(q: &str) -> Vec<String> {
        query_words(q)
    }

    #[test]
    fn every_word_must_occur_somewhere() {
        let n = note("Tag the build, then run the Canary for an hour.");
        assert!(matches(&n, &words("canary")));
        assert!(matches(&n, &words("CANARY release")));
        assert!(matches(&n, &words("ops canary")));
        assert!(matches(&n, &words("how")));
        assert!(!matches(&n, &words("canary rollback")));
    }

    #[test]
    fn short_bodies_are_shown_whole() {
        let body = "Line one.\nLine two.";
        assert_eq!(snippet(body, &words("two")), "Line one. Line two.");
    }

    #[test]
    fn snippet_surrounds_the_first_match() {
        let body = format!("{}NEEDLE{}", "a".repeat(500), "b".repeat(500));
        let s = snippet(&body, &words("needle"));
        assert!(s.chars().count() <= SNIPPET_MAX);
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert!(s.contains("NEEDLE"));
        let before = s.find("NEEDLE").unwrap();
        // Lead of 60 characters, the first of which became the ellipsis.
        assert_eq!(s[..before].chars().count(), SNIPPET_LEAD);
    }

    #[test]
    fn snippet_near_the_ends_has_one_ellipsis() {
        let body = format!("needle {}", "x".repeat(400));
        let s = snippet(&body, &words("needle"));
        assert!(s.starts_with("needle") && s.ends_with('…'));
        assert_eq!(s.chars().count(), SNIPPET_MAX);

        let body = format!("{} needle", "x".repeat(400));
        let s = snippet(&body, &words("needle"));
        assert!(s.starts_with('…') && s.ends_with("needle"));
        assert_eq!(s.chars().count(), SNIPPET_MAX);
    }

    #[test]
    fn no_match_in_body_shows_its_start() {
        let body = "y".repeat(300);
        let s = snippet(&body, &words("ops"));
        assert!(s.starts_with('y') && s.ends_with('…'));
        assert_eq!(s.chars().count(), SNIPPET_MAX);
        assert_eq!(snippet("", &words("ops")), "");
    }

    #[test]
    fn case_folding_keeps_positions_in_the_body() {
        // 'İ' lower-cases to two chars; the match after it must still be found
        // at its place in the original text.
        let body = format!("{}İ TARGET {}", "z".repeat(300), "z".repeat(300));
        let s = snippet(&body, &words("target"));
        assert!(s.contains("TARGET"));
        assert!(s.chars().count() <= SNIPPET_MAX);
        // Multi-byte text is cut on char boundaries.
        let body = "ü".repeat(1_000);
        assert_eq!(snippet(&body, &words("q")).chars().count(), SNIPPET_MAX);
    }
}
