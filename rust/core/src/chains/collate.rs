//! `a.localeCompare(b)` under Node's default ICU collation (root / `en-US`), as far as tool
//! names need it (11 section 8).
//!
//! A small multi-level key, UCA style:
//! - level 1 (primary): base characters, case-insensitive. Control characters are ignorable;
//!   whitespace < punctuation/symbols (in the observed ICU order) < digits < letters; a shorter
//!   prefix sorts first; no numeric collation (`a10` < `a2`);
//! - level 2 (secondary): accents (Latin-1 letters decompose into base letter + accent);
//! - level 3 (tertiary): lowercase before uppercase, plain letters before ligatures.
//!
//! Printable ASCII follows the ICU order exactly. Latin-1 letters are approximated by their
//! decomposition; any other character sorts after the Latin letters by code point (ICU would
//! interleave scripts and symbols differently).

use std::cmp::Ordering;

/// The observed ICU primary order of ASCII punctuation and symbols (after whitespace, before
/// digits).
const PUNCTUATION: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

/// Primary weights: whitespace 1..=6, punctuation 16.., digits 64.., letters 128.., thorn
/// after `z`, everything else after that by code point.
const DIGIT_BASE: u32 = 64;
const LETTER_BASE: u32 = 128;
const THORN: u32 = LETTER_BASE + 26;
const OTHER_BASE: u32 = 0x100;

/// Secondary weights: `COMMON` for base characters, higher for accents (ICU order).
const COMMON: u16 = 1;
const ACUTE: u16 = 2;
const GRAVE: u16 = 3;
const CIRCUMFLEX: u16 = 5;
const RING: u16 = 7;
const DIAERESIS: u16 = 8;
const TILDE: u16 = 10;
const CEDILLA: u16 = 11;
const STROKE: u16 = 13;
const ETH: u16 = 14;

/// Tertiary weights.
const LOWER: u8 = 0;
const UPPER: u8 = 1;
const LIGATURE: u8 = 2;
const LIGATURE_UPPER: u8 = 3;

/// One collation element: a primary weight (0 = an accent, ignorable at level 1), a
/// secondary and a tertiary weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Elem {
    primary: u32,
    secondary: u16,
    tertiary: u8,
}

fn base(primary: u32, tertiary: u8) -> Elem {
    Elem {
        primary,
        secondary: COMMON,
        tertiary,
    }
}

fn accent(secondary: u16) -> Elem {
    Elem {
        primary: 0,
        secondary,
        tertiary: LOWER,
    }
}

fn letter(c: char) -> u32 {
    LETTER_BASE + (u32::from(c.to_ascii_lowercase()) - u32::from('a'))
}

/// Base letter and accent of a Latin-1 Supplement letter.
fn latin1(c: char) -> Option<(char, u16)> {
    let lower = match c {
        'À'..='Þ' if c != '×' => char::from_u32(u32::from(c) + 0x20)?,
        _ => c,
    };
    Some(match lower {
        'à' => ('a', GRAVE),
        'á' => ('a', ACUTE),
        'â' => ('a', CIRCUMFLEX),
        'ã' => ('a', TILDE),
        'ä' => ('a', DIAERESIS),
        'å' => ('a', RING),
        'ç' => ('c', CEDILLA),
        'è' => ('e', GRAVE),
        'é' => ('e', ACUTE),
        'ê' => ('e', CIRCUMFLEX),
        'ë' => ('e', DIAERESIS),
        'ì' => ('i', GRAVE),
        'í' => ('i', ACUTE),
        'î' => ('i', CIRCUMFLEX),
        'ï' => ('i', DIAERESIS),
        'ð' => ('d', ETH),
        'ñ' => ('n', TILDE),
        'ò' => ('o', GRAVE),
        'ó' => ('o', ACUTE),
        'ô' => ('o', CIRCUMFLEX),
        'õ' => ('o', TILDE),
        'ö' => ('o', DIAERESIS),
        'ø' => ('o', STROKE),
        'ù' => ('u', GRAVE),
        'ú' => ('u', ACUTE),
        'û' => ('u', CIRCUMFLEX),
        'ü' => ('u', DIAERESIS),
        'ý' => ('y', ACUTE),
        'ÿ' => ('y', DIAERESIS),
        _ => return None,
    })
}

fn push_elements(c: char, out: &mut Vec<Elem>) {
    let case = if c.is_uppercase() { UPPER } else { LOWER };
    match c {
        '\u{0}'..='\u{8}' | '\u{e}'..='\u{1f}' | '\u{7f}' => {}
        '\t' => out.push(base(1, LOWER)),
        '\n' => out.push(base(2, LOWER)),
        '\u{b}' => out.push(base(3, LOWER)),
        '\u{c}' => out.push(base(4, LOWER)),
        '\r' => out.push(base(5, LOWER)),
        ' ' => out.push(base(6, LOWER)),
        '0'..='9' => out.push(base(DIGIT_BASE + (u32::from(c) - u32::from('0')), LOWER)),
        'a'..='z' | 'A'..='Z' => out.push(base(letter(c), case)),
        'æ' | 'Æ' => {
            let t = if c == 'Æ' { LIGATURE_UPPER } else { LIGATURE };
            out.push(base(letter('a'), t));
            out.push(base(letter('e'), t));
        }
        'ß' => {
            out.push(base(letter('s'), LIGATURE));
            out.push(base(letter('s'), LIGATURE));
        }
        'þ' | 'Þ' => out.push(base(THORN, case)),
        _ => {
            if let Some(rank) = PUNCTUATION.find(c) {
                // Every PUNCTUATION character is one byte: the byte index is its rank.
                out.push(base(16 + rank as u32, LOWER));
            } else if let Some((letter_of, mark)) = latin1(c) {
                out.push(base(letter(letter_of), case));
                out.push(accent(mark));
            } else {
                out.push(base(OTHER_BASE + u32::from(c), LOWER));
            }
        }
    }
}

fn elements(s: &str) -> Vec<Elem> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        push_elements(c, &mut out);
    }
    out
}

/// `a.localeCompare(b)` (sign only): compares primary, then secondary, then tertiary weight
/// sequences; strings equal at all three levels compare equal.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let (ea, eb) = (elements(a), elements(b));
    let primary = |e: &[Elem]| {
        e.iter()
            .filter(|x| x.primary != 0)
            .map(|x| x.primary)
            .collect::<Vec<_>>()
    };
    primary(&ea)
        .cmp(&primary(&eb))
        .then_with(|| {
            let secondary = |e: &[Elem]| e.iter().map(|x| x.secondary).collect::<Vec<_>>();
            secondary(&ea).cmp(&secondary(&eb))
        })
        .then_with(|| {
            let tertiary = |e: &[Elem]| e.iter().map(|x| x.tertiary).collect::<Vec<_>>();
            tertiary(&ea).cmp(&tertiary(&eb))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(words: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
        v.sort_by(|a, b| locale_compare(a, b));
        v
    }

    #[test]
    fn spec_example_sort() {
        // 11 section 8: "A a1 a10 a2 bash read Read web_fetch web-fetch web.fetch webfetch".
        let want = [
            "A",
            "a1",
            "a10",
            "a2",
            "bash",
            "read",
            "Read",
            "web_fetch",
            "web-fetch",
            "web.fetch",
            "webfetch",
        ];
        let mut shuffled = want;
        shuffled.reverse();
        shuffled.swap(0, 5);
        assert_eq!(sorted(&shuffled), want);
    }

    #[test]
    fn spec_ascii_primary_order() {
        // 11 section 8: the observed primary order of printable ASCII.
        let order = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";
        let chars: Vec<String> = order.chars().map(String::from).collect();
        for pair in chars.windows(2) {
            assert_eq!(
                locale_compare(&pair[0], &pair[1]),
                Ordering::Less,
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
        for c in 'a'..='z' {
            let (lower, upper) = (c.to_string(), c.to_ascii_uppercase().to_string());
            assert_eq!(locale_compare(&lower, &upper), Ordering::Less);
            // Case is only a tertiary difference.
            assert_eq!(locale_compare(&upper, &format!("{lower}a")), Ordering::Less);
        }
    }

    #[test]
    fn deterministic_body_vector_tie_break() {
        // 05 section 12: bash sorts before Bash.
        assert_eq!(locale_compare("bash", "Bash"), Ordering::Less);
        assert_eq!(locale_compare("Bash", "read"), Ordering::Less);
    }

    #[test]
    fn whitespace_before_punctuation_and_controls_ignorable() {
        assert_eq!(locale_compare(" ", "_"), Ordering::Less);
        assert_eq!(locale_compare("\u{1}a", "a"), Ordering::Equal);
        assert_eq!(locale_compare("a", "a"), Ordering::Equal);
    }

    #[test]
    fn accents_are_secondary() {
        assert_eq!(locale_compare("e", "é"), Ordering::Less);
        assert_eq!(locale_compare("é", "f"), Ordering::Less);
        assert_eq!(locale_compare("E", "é"), Ordering::Less);
        assert_eq!(locale_compare("ae", "æ"), Ordering::Less);
        assert_eq!(locale_compare("ss", "ß"), Ordering::Less);
        assert_eq!(locale_compare("z", "þ"), Ordering::Less);
        assert_eq!(locale_compare("z", "\u{4e00}"), Ordering::Less);
    }
}
