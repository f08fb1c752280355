//! JavaScript value semantics the core shares: number formatting and rounding ([`num`]),
//! one field of a persisted object as the reference reads it (`field`), the whitespace
//! `trim()` strips, and [`Throw`], where the reference throws.

pub(crate) mod field;
pub mod num;

pub use field::JsField;
pub use num::{format_json_number, format_number, math_round, push_number};

/// Thrown by a phase where the reference throws a `TypeError` (04 section 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throw;

/// JS `WhiteSpace` + `LineTerminator` (the set `trim()` and regex `\s` use):
/// U+0009..U+000D, U+0020, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
/// U+202F, U+205F, U+3000, U+FEFF.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'..='\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}
