//! Nested `{bN}` placeholders in chain summaries (04 section 5.1).

use crate::jsstr::{JsBuf, JsSlice};

/// Replaces every `\{b(\d+)\}` (ASCII digits, leading zeros kept) with
/// `lookup("b" + digits)`, except the block's own id and unknown ids, which
/// stay literal. One level only: inserted text is not re-scanned. (Tests: the render writes
/// into its buffer with [`substitute_block_refs_into`].)
#[cfg(test)]
pub fn substitute_block_refs<F>(text: &str, lookup: F, self_block_id: Option<&str>) -> String
where
    F: FnMut(&str) -> Option<String>,
{
    let mut out = JsBuf::with_capacity(text.len());
    substitute_block_refs_into(&mut out, text.into(), lookup, self_block_id);
    out.finish().into_string()
}

/// The next `{b<digits>}` placeholder of `text` at or after byte `from`: its start, and the
/// end of its digits (where the closing `}` is).
fn next_block_ref(text: &str, mut from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    // `find(char)` is a memchr scan; most summaries hold no `{` at all.
    while let Some(found) = text.get(from..).and_then(|rest| rest.find('{')) {
        let start = from + found;
        if bytes.get(start + 1) == Some(&b'b') {
            let digits_start = start + 2;
            let mut end = digits_start;
            while bytes.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            if end > digits_start && bytes.get(end) == Some(&b'}') {
                return Some((start, end));
            }
        }
        from = start + 1;
    }
    None
}

/// Whether `text` holds a `{b<digits>}` placeholder (otherwise substitution keeps it as is).
pub fn has_block_ref(text: &str) -> bool {
    next_block_ref(text, 0).is_some()
}

/// [`substitute_block_refs`] appending to `out`, lone surrogates of `text` and of the
/// replacements kept.
pub fn substitute_block_refs_into<'t, F, T>(
    out: &mut JsBuf,
    whole: JsSlice<'t>,
    mut lookup: F,
    self_block_id: Option<&str>,
) where
    F: FnMut(&str) -> Option<T>,
    T: for<'a> JsPiece<'a>,
{
    let text = whole.as_str();
    let mut copied = 0;
    let mut block_id = String::new();
    let mut from = 0;
    while let Some((start, end)) = next_block_ref(text, from) {
        // All indices sit on ASCII bytes, so they are char boundaries.
        block_id.clear();
        block_id.push('b');
        block_id.push_str(text.get(start + 2..end).unwrap_or_default());
        if self_block_id != Some(block_id.as_str())
            && let Some(replacement) = lookup(&block_id)
        {
            out.push(whole.get(copied..start));
            out.push(replacement.piece());
            copied = end + 1;
        }
        from = end + 1;
    }
    out.push(whole.get(copied..text.len()));
}

/// A replacement text for [`substitute_block_refs_into`].
pub trait JsPiece<'a> {
    /// The text as a slice.
    fn piece(&'a self) -> JsSlice<'a>;
}

impl<'a> JsPiece<'a> for String {
    fn piece(&'a self) -> JsSlice<'a> {
        JsSlice::from(self.as_str())
    }
}

impl<'a, 'b> JsPiece<'a> for std::borrow::Cow<'b, crate::jsstr::JsStr> {
    fn piece(&'a self) -> JsSlice<'a> {
        let text: &crate::jsstr::JsStr = self;
        JsSlice::from(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(id: &str) -> Option<String> {
        match id {
            "b1" => Some("ONE".into()),
            "b2" => Some("TWO {b1}".into()),
            "b01" => Some("LEADING".into()),
            _ => None,
        }
    }

    #[test]
    fn substitutes_known_blocks() {
        assert_eq!(
            substitute_block_refs("see {b1}.", lookup, Some("b9")),
            "see ONE."
        );
        assert_eq!(
            substitute_block_refs("{b1}{b1}", lookup, Some("b9")),
            "ONEONE"
        );
    }

    #[test]
    fn one_level_only() {
        assert_eq!(
            substitute_block_refs("x {b2} y", lookup, Some("b9")),
            "x TWO {b1} y"
        );
    }

    #[test]
    fn self_and_unknown_stay_literal() {
        assert_eq!(
            substitute_block_refs("{b1} {b7}", lookup, Some("b1")),
            "{b1} {b7}"
        );
    }

    #[test]
    fn placeholder_detection() {
        for text in ["{b1}", "x {b{b22} y", "{b007}"] {
            assert!(has_block_ref(text), "{text}");
        }
        for text in ["", "{b}", "{b1", "{ b1}", "{B1}", "{b1x}", "b1}", "{{b}1}"] {
            assert!(!has_block_ref(text), "{text}");
        }
    }

    #[test]
    fn digits_are_kept_as_written() {
        assert_eq!(
            substitute_block_refs("{b01}", lookup, Some("b1")),
            "LEADING"
        );
    }

    #[test]
    fn malformed_placeholders_are_text() {
        for text in ["{b}", "{b1", "{ b1}", "{B1}", "{b1x}", "{b\u{0661}}", "b1}"] {
            assert_eq!(substitute_block_refs(text, lookup, Some("b9")), text);
        }
        assert_eq!(substitute_block_refs("{b{b1}", lookup, Some("b9")), "{bONE");
        assert_eq!(
            substitute_block_refs("\u{1F600}{b1}\u{1F600}", lookup, Some("b9")),
            "\u{1F600}ONE\u{1F600}"
        );
    }
}
