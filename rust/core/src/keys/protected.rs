//! Protected tool calls: by exact tool name, or by a glob on the call's
//! `args.path` (with every `\` read as `/`).
//!
//! A glob is translated as the reference does, into an anchored JavaScript
//! regex (no flags), scanning left to right:
//!
//! | glob | regex | meaning |
//! |---|---|---|
//! | `**/` | `(?:[^/]*/)*` | zero or more whole directories |
//! | `**` (not before `/`) | `.*` | anything except JS line terminators |
//! | `*` | `[^/]*` | within one segment |
//! | `?` | `[^/]` | one UTF-16 code unit that is not `/` |
//! | other | itself, regex-escaped | literal, case-sensitive |
//!
//! Instead of a regex engine we run that regex's automaton directly over
//! UTF-16 code units, which is what a JS regex without the `u` flag sees:
//! `?` never matches an astral character (two units), and `.` excludes
//! `\n`, `\r`, U+2028 and U+2029 while `[^/]` does not.

use std::sync::atomic::{AtomicU64, Ordering};

/// One element of a translated glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// A literal code unit.
    Lit(u16),
    /// `[^/]`
    One,
    /// `[^/]*`
    SegStar,
    /// `.*`
    AnyStar,
    /// `(?:[^/]*/)*`
    DirStar,
}

impl Token {
    fn can_be_empty(self) -> bool {
        matches!(self, Token::SegStar | Token::AnyStar | Token::DirStar)
    }
}

const SLASH: u16 = b'/' as u16;
const BACKSLASH: u16 = b'\\' as u16;
const STAR: u16 = b'*' as u16;
const QUESTION: u16 = b'?' as u16;

fn is_line_terminator(unit: u16) -> bool {
    matches!(unit, 0x000A | 0x000D | 0x2028 | 0x2029)
}

fn is_regex_special(unit: u16) -> bool {
    u8::try_from(unit).is_ok_and(|b| b".*+?^${}()|[]\\".contains(&b))
}

/// A compiled protected-path glob (full-path, anchored, case-sensitive match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Vec<u16>,
    tokens: Vec<Token>,
    /// Bit `i` set when token `i` (< 64) may match the empty string.
    empty: u64,
    /// The literal units after the last wildcard, when all ASCII: a matching text ends
    /// with them (a whole-text match), so most paths are ruled out by their last bytes.
    ascii_tail: Option<Box<[u8]>>,
}

impl Glob {
    /// Compiles a glob. Every pattern compiles; there is no error case.
    pub fn new(pattern: &str) -> Self {
        Self::from_utf16(&pattern.encode_utf16().collect::<Vec<_>>())
    }

    /// Compiles a glob given as UTF-16 code units.
    pub fn from_utf16(pattern: &[u16]) -> Self {
        let mut tokens = Vec::with_capacity(pattern.len());
        let mut i = 0;
        while let Some(&unit) = pattern.get(i) {
            if unit == STAR {
                if pattern.get(i + 1) == Some(&STAR) {
                    if pattern.get(i + 2) == Some(&SLASH) {
                        tokens.push(Token::DirStar);
                        i += 3;
                    } else {
                        tokens.push(Token::AnyStar);
                        i += 2;
                    }
                } else {
                    tokens.push(Token::SegStar);
                    i += 1;
                }
            } else if unit == QUESTION {
                tokens.push(Token::One);
                i += 1;
            } else {
                tokens.push(Token::Lit(unit));
                i += 1;
            }
        }
        let empty = tokens
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, token)| token.can_be_empty())
            .fold(0u64, |mask, (i, _)| mask | (1 << i));
        let literal_tail = tokens
            .iter()
            .rev()
            .map_while(|token| match token {
                Token::Lit(unit) => u8::try_from(*unit).ok().filter(u8::is_ascii),
                _ => None,
            })
            .collect::<Vec<u8>>();
        let all_literal_ascii = tokens
            .iter()
            .rev()
            .take_while(|token| matches!(token, Token::Lit(_)))
            .count()
            == literal_tail.len();
        let ascii_tail = all_literal_ascii.then(|| literal_tail.into_iter().rev().collect());
        Glob {
            pattern: pattern.to_vec(),
            tokens,
            empty,
            ascii_tail,
        }
    }

    /// Whether `path`, read with every `\` as `/`, ends with the literal ASCII units that
    /// end the glob; `false` means it cannot match (`true` when the glob's ending is not
    /// ASCII: not checked).
    fn may_match_path(&self, path: &str) -> bool {
        let Some(tail) = self.ascii_tail.as_deref() else {
            return true;
        };
        // ASCII units are single bytes in both encodings.
        let bytes = path.as_bytes();
        bytes
            .len()
            .checked_sub(tail.len())
            .and_then(|start| bytes.get(start..))
            .is_some_and(|last| {
                last.iter().zip(tail).all(|(&byte, &unit)| {
                    if byte == b'\\' {
                        unit == b'/'
                    } else {
                        byte == unit
                    }
                })
            })
    }

    /// The pattern as given, in UTF-16 code units.
    pub fn pattern_utf16(&self) -> &[u16] {
        &self.pattern
    }

    /// The source of the equivalent JavaScript regex, e.g.
    /// `**/skills/**/*.md` -> `^(?:[^/]*/)*skills/(?:[^/]*/)*[^/]*\.md$`
    /// (lone surrogates shown as U+FFFD).
    pub fn regex_source(&self) -> String {
        let mut units: Vec<u16> = Vec::with_capacity(self.pattern.len() * 2 + 2);
        units.push(u16::from(b'^'));
        for token in &self.tokens {
            match *token {
                Token::Lit(unit) => {
                    if is_regex_special(unit) {
                        units.push(BACKSLASH);
                    }
                    units.push(unit);
                }
                Token::One => units.extend("[^/]".encode_utf16()),
                Token::SegStar => units.extend("[^/]*".encode_utf16()),
                Token::AnyStar => units.extend(".*".encode_utf16()),
                Token::DirStar => units.extend("(?:[^/]*/)*".encode_utf16()),
            }
        }
        units.push(u16::from(b'$'));
        String::from_utf16_lossy(&units)
    }

    /// Whether the whole of `text` matches (no path normalization).
    pub fn is_match(&self, text: &str) -> bool {
        self.matches_units(text.encode_utf16())
    }

    /// [`Glob::is_match`] over UTF-16 code units.
    pub fn is_match_utf16(&self, text: &[u16]) -> bool {
        self.matches_units(text.iter().copied())
    }

    /// Whether the whole unit sequence matches.
    fn matches_units<I: IntoIterator<Item = u16>>(&self, text: I) -> bool {
        if self.tokens.len() < 64 {
            self.matches_small(text)
        } else {
            self.matches_large(text)
        }
    }

    /// The automaton over one 64-bit word: bit `i` of `at` means "about to
    /// match token i" (bit `n` is the accepting state), bit `i` of `inside`
    /// means "in the middle of a directory name of the `**/` at token i".
    /// Requires fewer than 64 tokens.
    fn matches_small<I: IntoIterator<Item = u16>>(&self, text: I) -> bool {
        let n = self.tokens.len();
        let mut at = self.close_word(1);
        let mut inside: u64 = 0;
        for unit in text {
            let mut next_at: u64 = 0;
            let mut next_inside: u64 = 0;
            let mut pending = at & !(1u64 << n);
            while pending != 0 {
                let i = pending.trailing_zeros() as usize;
                pending &= pending - 1;
                if let Some(&token) = self.tokens.get(i) {
                    let step = step(token, unit);
                    if step.stay {
                        next_at |= 1 << i;
                    }
                    if step.advance {
                        next_at |= 1 << (i + 1);
                    }
                    if step.enter {
                        next_inside |= 1 << i;
                    }
                }
            }
            if unit == SLASH {
                next_at |= inside;
            } else {
                next_inside |= inside;
            }
            if next_at == 0 && next_inside == 0 {
                return false;
            }
            at = self.close_word(next_at);
            inside = next_inside;
        }
        at & (1u64 << n) != 0
    }

    /// Skips tokens that may match the empty string (`empty` has bit `i` set
    /// when token `i` may), until nothing changes.
    fn close_word(&self, mut at: u64) -> u64 {
        loop {
            let next = at | ((at & self.empty) << 1);
            if next == at {
                return at;
            }
            at = next;
        }
    }

    /// The same automaton with one flag per state, for long patterns.
    fn matches_large<I: IntoIterator<Item = u16>>(&self, text: I) -> bool {
        let n = self.tokens.len();
        let mut at = vec![false; n + 1];
        let mut inside = vec![false; n];
        let mut next_at = vec![false; n + 1];
        let mut next_inside = vec![false; n];
        at[0] = true;
        self.close_flags(&mut at);
        for unit in text {
            next_at.fill(false);
            next_inside.fill(false);
            let mut alive = false;
            for (i, &token) in self.tokens.iter().enumerate() {
                if at[i] {
                    let step = step(token, unit);
                    next_at[i] |= step.stay;
                    next_at[i + 1] |= step.advance;
                    next_inside[i] |= step.enter;
                    alive |= step.stay || step.advance || step.enter;
                }
                if inside[i] {
                    if unit == SLASH {
                        next_at[i] = true;
                    } else {
                        next_inside[i] = true;
                    }
                    alive = true;
                }
            }
            if !alive {
                return false;
            }
            std::mem::swap(&mut at, &mut next_at);
            std::mem::swap(&mut inside, &mut next_inside);
            self.close_flags(&mut at);
        }
        at[n]
    }

    /// Skips tokens that may match the empty string.
    fn close_flags(&self, at: &mut [bool]) {
        for (i, token) in self.tokens.iter().enumerate() {
            if at[i] && token.can_be_empty() {
                at[i + 1] = true;
            }
        }
    }
}

/// Where one code unit takes the automaton from "about to match a token".
struct Step {
    /// Stay before the same token (a repetition).
    stay: bool,
    /// Move past the token.
    advance: bool,
    /// Enter the directory name of a `**/`.
    enter: bool,
}

fn step(token: Token, unit: u16) -> Step {
    let (stay, advance, enter) = match token {
        Token::Lit(lit) => (false, unit == lit, false),
        Token::One => (false, unit != SLASH, false),
        Token::SegStar => (unit != SLASH, false, false),
        Token::AnyStar => (!is_line_terminator(unit), false, false),
        // An empty directory name followed by `/`, or the first unit of a
        // non-empty one.
        Token::DirStar => (unit == SLASH, false, unit != SLASH),
    };
    Step {
        stay,
        advance,
        enter,
    }
}

/// How `protectedTools` protects a tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolRule {
    /// `protectedTools.includes(name)` over a list: exact names.
    #[default]
    Names,
    /// The reference mode's string `protectedTools`: `raw.includes(String(name))`, JS
    /// `String.prototype.includes`, a substring test on UTF-16 code units (so `""` and every
    /// substring of `raw` are protected).
    Substring(Vec<u16>),
}

/// `isProtected` with the config's lists compiled once.
#[derive(Debug, Clone, Default)]
pub struct ProtectedMatcher {
    /// Every protected tool name, as UTF-16.
    tools_utf16: Vec<Vec<u16>>,
    /// The protected tool names that are valid Unicode (fast `&str` path).
    tools: Vec<String>,
    globs: Vec<Glob>,
    rule: ToolRule,
    /// Names this matcher's rules in a [`VerdictMemo`] (0: never remembered). A clone has
    /// the same rules, hence the same key; the rules never change after construction.
    memo_key: u64,
}

/// A fresh [`ProtectedMatcher::memo_key`]: never 0, and below 2^63 (it is stored shifted).
fn fresh_memo_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    // 2^63 matchers are never built; wrapping to 0 would only turn the memo off.
    key & (u64::MAX >> 1)
}

/// One protection verdict remembered for one compiled rule (a [`ProtectedMatcher`]'s
/// `memo_key`): a record's tool name and path never change once it is indexed, so a render
/// against the same rule asks the matcher once per record instead of once per render.
///
/// Not part of the value it is attached to: equality ignores it and a clone starts empty.
#[derive(Debug, Default)]
pub struct VerdictMemo(AtomicU64);

impl VerdictMemo {
    /// The verdict remembered for rule `key`, if any.
    pub fn get(&self, key: u64) -> Option<bool> {
        let stored = self.0.load(Ordering::Relaxed);
        (key != 0 && stored >> 1 == key).then_some(stored & 1 == 1)
    }

    /// Remembers `verdict` for rule `key` (replacing another rule's).
    pub fn set(&self, key: u64, verdict: bool) {
        if key != 0 && key <= u64::MAX >> 1 {
            self.0
                .store(key << 1 | u64::from(verdict), Ordering::Relaxed);
        }
    }
}

impl Clone for VerdictMemo {
    fn clone(&self) -> Self {
        VerdictMemo::default()
    }
}

impl PartialEq for VerdictMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Whether `needle` occurs in `haystack` (JS `includes` on code units).
fn contains_units(haystack: &[u16], needle: &[u16]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

fn normalize_slash(unit: u16) -> u16 {
    if unit == BACKSLASH { SLASH } else { unit }
}

impl ProtectedMatcher {
    /// From `protectedTools` (exact names) and `protectedPaths` (globs).
    pub fn new<T: AsRef<str>, G: AsRef<str>>(tools: &[T], globs: &[G]) -> Self {
        ProtectedMatcher {
            tools_utf16: tools
                .iter()
                .map(|t| t.as_ref().encode_utf16().collect())
                .collect(),
            tools: tools.iter().map(|t| t.as_ref().to_owned()).collect(),
            globs: globs.iter().map(|g| Glob::new(g.as_ref())).collect(),
            rule: ToolRule::Names,
            memo_key: fresh_memo_key(),
        }
    }

    /// The reference mode's string `protectedTools` (`raw`, UTF-16 code units: it may hold
    /// lone surrogates) with `protectedPaths` globs: see [`ToolRule::Substring`].
    pub fn substring(raw: Vec<u16>, globs: &[Vec<u16>]) -> Self {
        ProtectedMatcher {
            tools_utf16: Vec::new(),
            tools: Vec::new(),
            globs: globs.iter().map(|g| Glob::from_utf16(g)).collect(),
            rule: ToolRule::Substring(raw),
            memo_key: fresh_memo_key(),
        }
    }

    /// The key of this matcher's verdicts in a [`VerdictMemo`] (0: not remembered).
    pub fn memo_key(&self) -> u64 {
        self.memo_key
    }

    /// How tool names are protected.
    pub fn rule(&self) -> &ToolRule {
        &self.rule
    }

    /// As [`ProtectedMatcher::new`], from UTF-16 code units.
    pub fn from_utf16(tools: Vec<Vec<u16>>, globs: &[Vec<u16>]) -> Self {
        ProtectedMatcher {
            tools: tools
                .iter()
                .filter_map(|t| String::from_utf16(t).ok())
                .collect(),
            tools_utf16: tools,
            globs: globs.iter().map(|g| Glob::from_utf16(g)).collect(),
            rule: ToolRule::Names,
            memo_key: fresh_memo_key(),
        }
    }

    /// The compiled globs, in config order.
    pub fn globs(&self) -> &[Glob] {
        &self.globs
    }

    /// True when nothing can be protected: no tool name, no glob, no substring rule.
    pub fn is_empty(&self) -> bool {
        self.rule == ToolRule::Names && self.tools_utf16.is_empty() && self.globs.is_empty()
    }

    /// `protectedTools.includes(name)` (a list: an exact name; a string: a substring).
    pub fn is_protected_tool(&self, name: &str) -> bool {
        match &self.rule {
            ToolRule::Names => self.tools.iter().any(|t| t == name),
            ToolRule::Substring(raw) => {
                contains_units(raw, &name.encode_utf16().collect::<Vec<u16>>())
            }
        }
    }

    /// [`ProtectedMatcher::is_protected_tool`] over UTF-16 code units.
    pub fn is_protected_tool_utf16(&self, name: &[u16]) -> bool {
        match &self.rule {
            ToolRule::Names => self.tools_utf16.iter().any(|t| t.as_slice() == name),
            ToolRule::Substring(raw) => contains_units(raw, name),
        }
    }

    /// Whether `path`, with every `\` replaced by `/`, fully matches any glob.
    pub fn matches_path(&self, path: &str) -> bool {
        self.globs.iter().any(|g| {
            g.may_match_path(path) && g.matches_units(path.encode_utf16().map(normalize_slash))
        })
    }

    /// [`ProtectedMatcher::matches_path`] over UTF-16 code units.
    pub fn matches_path_utf16(&self, path: &[u16]) -> bool {
        self.globs
            .iter()
            .any(|g| g.matches_units(path.iter().copied().map(normalize_slash)))
    }

    /// `isProtected(toolName, args)`, given the tool name and `args.path` when
    /// it is a string (`None` for a missing or non-string path, or no args).
    pub fn is_protected(&self, tool_name: Option<&str>, path: Option<&str>) -> bool {
        tool_name.is_some_and(|n| self.is_protected_tool(n))
            || path.is_some_and(|p| self.matches_path(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring_rule_is_js_includes_on_code_units() {
        let raw: Vec<u16> = "read,bash".encode_utf16().collect();
        let m = ProtectedMatcher::substring(raw, &[]);
        assert!(!m.is_empty());
        for name in ["read", "bash", "", "d,b", "read,bash"] {
            assert!(m.is_protected_tool(name), "{name:?}");
        }
        for name in ["write", "read,bash,", "Read"] {
            assert!(!m.is_protected_tool(name), "{name:?}");
        }
        // A lone surrogate in the raw string matches only itself, not U+FFFD.
        let m = ProtectedMatcher::substring(vec![0x61, 0xD800, 0x62], &[]);
        assert!(m.is_protected_tool_utf16(&[0xD800]));
        assert!(m.is_protected_tool_utf16(&[0x61, 0xD800]));
        assert!(!m.is_protected_tool("\u{FFFD}"));
        assert!(m.is_protected(Some("a"), None));
        assert!(!m.is_protected(None, None));
    }

    fn m(glob: &str, text: &str) -> bool {
        Glob::new(glob).is_match(text)
    }

    fn utf16(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn translation_matches_the_reference_regex() {
        let cases: &[(&str, &str)] = &[
            (
                "**/skills/**/*.md",
                r"^(?:[^/]*/)*skills/(?:[^/]*/)*[^/]*\.md$",
            ),
            ("**/SKILL.md", r"^(?:[^/]*/)*SKILL\.md$"),
            ("a/**", r"^a/.*$"),
            ("**", r"^.*$"),
            ("*", r"^[^/]*$"),
            ("?", r"^[^/]$"),
            ("***", r"^.*[^/]*$"),
            ("***/x", r"^.*[^/]*/x$"),
            ("a+b/(c).md", r"^a\+b/\(c\)\.md$"),
            ("[ab]{1,2}$^|\\", r"^\[ab\]\{1,2\}\$\^\|\\$"),
            ("", "^$"),
        ];
        for (glob, want) in cases {
            assert_eq!(Glob::new(glob).regex_source(), *want, "glob {glob:?}");
        }
    }

    #[test]
    fn double_star_crosses_segments() {
        assert!(m(
            "**/skills/**/*.md",
            "/Users/x/.agents/skills/release/SKILL.md"
        ));
        assert!(m("**/skills/**/*.md", "a/skills/b/c/notes.md"));
        assert!(m("a/**", "a/x/y/z"));
        assert!(m("a/**", "a/"));
        assert!(!m("a/**", "a"));
        assert!(m("**", ""));
        assert!(m("**", "any/thing/at/all"));
    }

    #[test]
    fn double_star_slash_matches_zero_directories() {
        assert!(m("**/SKILL.md", "SKILL.md"));
        assert!(m("**/skills/**/*.md", "skills/foo.md"));
        assert!(m("a/**/b", "a/b"));
        assert!(m("a/**/b", "a/x/y/b"));
        // An empty directory name is a directory name too.
        assert!(m("a/**/b", "a//b"));
        assert!(m("**/x", "/x"));
        assert!(!m("**/x", "ax"));
    }

    #[test]
    fn star_and_question_are_segment_local() {
        assert!(!m("skills/*.md", "skills/a/b.md"));
        assert!(m("skills/*.md", "skills/.md"));
        assert!(m("skills/?.md", "skills/a.md"));
        assert!(!m("skills/?.md", "skills//x.md"));
        assert!(!m("skills/?.md", "skills/ab.md"));
        assert!(!m("skills/?.md", "skills/.md"));
    }

    #[test]
    fn three_stars_are_a_double_star_then_a_star() {
        assert!(m("a***b", "a/x/yb"));
        assert!(!m("***/x", "x"));
        assert!(m("***/x", "d/x"));
    }

    #[test]
    fn regex_metacharacters_are_literals() {
        assert!(m("a+b/(c).md", "a+b/(c).md"));
        assert!(!m("a.md", "aXmd"));
        assert!(m("[ab].md", "[ab].md"));
        assert!(!m("[ab].md", "a.md"));
        assert!(m("{a,b}.md", "{a,b}.md"));
        assert!(!m("{a,b}.md", "a.md"));
        assert!(m("^$|", "^$|"));
        assert!(m("a\\b", "a\\b"));
    }

    #[test]
    fn full_path_anchored_and_case_sensitive() {
        assert!(!m("skills/a.md", "xskills/a.md"));
        assert!(!m("skills/a.md", "skills/a.md.bak"));
        assert!(!m("skills/a.md", "skills/a.md\n"));
        assert!(!m("**/SKILL.md", "a/skill.md"));
        assert!(m("", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn js_dot_excludes_line_terminators_but_classes_do_not() {
        assert!(!m("a/**", "a/x\ny"));
        assert!(!m("a/**", "a/x\ry"));
        assert!(!m("a/**", "a/x\u{2028}y"));
        assert!(!m("a/**", "a/x\u{2029}y"));
        assert!(m("a/**", "a/x\u{85}y"));
        assert!(m("a/*", "a/x\ny"));
        assert!(m("a/?", "a/\n"));
        assert!(m("**/b", "x\ny/b"));
    }

    #[test]
    fn question_mark_is_one_utf16_unit() {
        assert!(!m("?", "😀"));
        assert!(m("??", "😀"));
        assert!(m("?", "ż"));
        assert!(m("*.md", "😀.md"));
        let lone = [0xD800u16];
        assert!(Glob::new("?").is_match_utf16(&lone));
        assert!(Glob::from_utf16(&lone).is_match_utf16(&lone));
        assert!(!Glob::from_utf16(&lone).is_match("a"));
    }

    #[test]
    fn long_patterns_use_the_general_automaton() {
        let long = format!("{}/**/x?", "a".repeat(70));
        let glob = Glob::new(&long);
        assert!(glob.tokens.len() >= 64);
        assert!(glob.is_match(&format!("{}/b/c/xy", "a".repeat(70))));
        assert!(glob.is_match(&format!("{}/xy", "a".repeat(70))));
        assert!(!glob.is_match(&format!("{}/x/", "a".repeat(70))));
        assert!(!glob.is_match(&format!("{}/xy", "a".repeat(69))));
    }

    #[test]
    fn both_automata_agree() {
        // Every glob and path over a small alphabet, up to a few units long.
        fn all(alphabet: &[u16], max_len: usize) -> Vec<Vec<u16>> {
            let mut out = vec![Vec::new()];
            let mut layer = vec![Vec::new()];
            for _ in 0..max_len {
                let mut next = Vec::new();
                for prefix in &layer {
                    for &u in alphabet {
                        let mut s: Vec<u16> = prefix.clone();
                        s.push(u);
                        next.push(s);
                    }
                }
                out.extend(next.iter().cloned());
                layer = next;
            }
            out
        }
        let globs = all(&utf16("a*?/"), 5);
        let paths = all(&utf16("a/\n"), 5);
        let mut matched = 0;
        for g in &globs {
            let glob = Glob::from_utf16(g);
            for p in &paths {
                let small = glob.matches_small(p.iter().copied());
                assert_eq!(small, glob.matches_large(p.iter().copied()), "{g:?} {p:?}");
                matched += usize::from(small);
            }
        }
        assert!(matched > 1000);
    }

    fn cfg() -> ProtectedMatcher {
        ProtectedMatcher::new(&["todowrite"], &["**/skills/**/*.md"])
    }

    #[test]
    fn protected_by_tool_name_regardless_of_args() {
        assert!(cfg().is_protected(Some("todowrite"), None));
        assert!(cfg().is_protected(Some("todowrite"), Some("src/app.ts")));
        assert!(!cfg().is_protected(Some("TodoWrite"), None));
        assert!(!cfg().is_protected(Some("todo"), None));
        assert!(!cfg().is_protected(None, None));
    }

    #[test]
    fn protected_by_path_glob() {
        assert!(cfg().is_protected(Some("read"), Some("/h/skills/x/SKILL.md")));
        assert!(!cfg().is_protected(Some("read"), Some("/h/src/app.ts")));
        assert!(cfg().is_protected(None, Some("skills/a.md")));
    }

    #[test]
    fn backslashes_are_normalized() {
        assert!(cfg().is_protected(Some("read"), Some("h\\skills\\x\\SKILL.md")));
        assert!(cfg().matches_path("C:\\Users\\me\\skills\\a.md"));
        // A backslash in a pattern can never match a normalized path.
        let m = ProtectedMatcher::new::<&str, &str>(&[], &["a\\b"]);
        assert!(!m.matches_path("a\\b"));
        assert!(!m.matches_path("a/b"));
    }

    #[test]
    fn empty_config_protects_nothing() {
        let empty = ProtectedMatcher::new::<&str, &str>(&[], &[]);
        assert!(empty.is_empty());
        assert!(!empty.is_protected(Some("read"), Some("skills/a/SKILL.md")));
        assert!(!ProtectedMatcher::default().is_protected(Some(""), Some("")));
    }

    #[test]
    fn any_glob_may_match() {
        let m = ProtectedMatcher::new(&[""; 0], &["*.txt", "docs/**"]);
        assert!(m.matches_path("a.txt"));
        assert!(m.matches_path("docs/x/y.md"));
        assert!(!m.matches_path("src/a.md"));
        assert_eq!(m.globs().len(), 2);
    }

    #[test]
    fn utf16_forms_agree() {
        let m = ProtectedMatcher::from_utf16(
            vec![utf16("todowrite"), vec![0xD800]],
            &[utf16("**/skills/**/*.md")],
        );
        assert!(m.is_protected_tool("todowrite"));
        assert!(m.is_protected_tool_utf16(&utf16("todowrite")));
        assert!(m.is_protected_tool_utf16(&[0xD800]));
        assert!(!m.is_protected_tool("\u{FFFD}"));
        let mut path = utf16("h\\skills\\");
        path.push(0xDC00);
        path.extend(utf16(".md"));
        assert!(m.matches_path_utf16(&path));
        assert!(!m.matches_path_utf16(&utf16("h/src/a.md")));
    }
    #[test]
    fn the_ending_check_never_rules_out_a_match() {
        let pattern_parts = [
            "**/",
            "**",
            "*",
            "?",
            "/",
            "\\",
            "a",
            ".md",
            "skills",
            "\u{e9}",
            "\u{1F600}",
            "*.md",
        ];
        let path_parts = [
            "a",
            "b",
            "/",
            "\\",
            ".md",
            "skills",
            "\u{e9}",
            "x.md",
            "\u{1F600}",
            "md",
            "",
        ];
        let mut seed = 12345u64;
        let mut pick = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut matched = 0;
        for _ in 0..400 {
            let pattern: String = (0..1 + pick(5)).map(|_| pattern_parts[pick(12)]).collect();
            let glob = Glob::new(&pattern);
            let matcher = ProtectedMatcher::new::<&str, &str>(&[], &[pattern.as_str()]);
            for _ in 0..40 {
                let path: String = (0..pick(6)).map(|_| path_parts[pick(11)]).collect();
                let full = glob.matches_units(path.encode_utf16().map(normalize_slash));
                assert_eq!(matcher.matches_path(&path), full, "{pattern:?} {path:?}");
                assert!(glob.may_match_path(&path) || !full, "{pattern:?} {path:?}");
                matched += usize::from(full);
            }
        }
        assert!(
            matched > 100,
            "the random cases match too rarely: {matched}"
        );
        let md = Glob::new("**/*.md");
        assert!(!md.may_match_path("a/b.txt"));
        assert!(md.may_match_path("a\\b.md"));
        assert!(Glob::new("a/**/").may_match_path("zzz"));
        assert!(!Glob::new("x/").may_match_path("a\\x"));
        assert!(Glob::new("x/").may_match_path("a\\x\\"));
        // A non-ASCII ending is not checked.
        assert!(Glob::new("*\u{e9}").may_match_path("abc"));
        let skills = ProtectedMatcher::new::<&str, &str>(&[], &["**/skills/**/*.md"]);
        assert!(skills.matches_path("C:\\w\\skills\\x\\SKILL.md"));
        assert!(!skills.matches_path("/w/skills/x/SKILL.txt"));
    }
}
