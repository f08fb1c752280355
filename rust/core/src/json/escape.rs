//! String quoting as `JSON.stringify` does it (ECMA-262 `QuoteJSONString`) and the
//! UTF-16 / UTF-8 lengths the reference measures.
//!
//! Escaped: `"` and `\`, the short escapes `\b \f \n \r \t`, every other code unit below
//! 0x20 as `\u00xx`, lone surrogates as `\udxxx` (lowercase hex). Everything else is copied
//! raw, including non-ASCII text, U+2028/U+2029, DEL and `/`.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Per byte: true when it must be escaped (< 0x20, `"`, `\`).
static NEEDS_ESCAPE: [bool; 256] = build_needs_escape();

const fn build_needs_escape() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
}

/// Per UTF-8 byte: how many UTF-16 code units it contributes to the escaped output.
/// Continuation bytes count 0, lead bytes of 2/3-byte sequences 1, of 4-byte sequences 2.
static ESCAPED_UNITS: [u8; 256] = build_escaped_units();

const fn build_escaped_units() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 0x20 {
            6
        } else if i < 0x80 {
            1
        } else if i < 0xC0 {
            0
        } else if i < 0xF0 {
            1
        } else {
            2
        };
        i += 1;
    }
    t[0x08] = 2;
    t[0x09] = 2;
    t[0x0a] = 2;
    t[0x0c] = 2;
    t[0x0d] = 2;
    t[b'"' as usize] = 2;
    t[b'\\' as usize] = 2;
    t
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

#[inline(always)]
fn load_word(chunk: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(chunk);
    u64::from_le_bytes(bytes)
}

/// The escape sequence of each byte below 0x60 that needs one, padded to 8 bytes, and
/// its length (0 when the byte is copied raw).
static ESCAPE_TEXT: [([u8; 8], u8); 0x60] = build_escape_text();

const fn build_escape_text() -> [([u8; 8], u8); 0x60] {
    let mut t = [([0u8; 8], 0u8); 0x60];
    let mut i = 0;
    while i < 0x20 {
        t[i] = (
            [b'\\', b'u', b'0', b'0', HEX[i >> 4], HEX[i & 0xF], 0, 0],
            6,
        );
        i += 1;
    }
    t[0x08] = ([b'\\', b'b', 0, 0, 0, 0, 0, 0], 2);
    t[0x09] = ([b'\\', b't', 0, 0, 0, 0, 0, 0], 2);
    t[0x0a] = ([b'\\', b'n', 0, 0, 0, 0, 0, 0], 2);
    t[0x0c] = ([b'\\', b'f', 0, 0, 0, 0, 0, 0], 2);
    t[0x0d] = ([b'\\', b'r', 0, 0, 0, 0, 0, 0], 2);
    t[b'"' as usize] = ([b'\\', b'"', 0, 0, 0, 0, 0, 0], 2);
    t[b'\\' as usize] = ([b'\\', b'\\', 0, 0, 0, 0, 0, 0], 2);
    t
}

/// Bit 7 of byte k is set for the first byte of `word` that needs escaping (< 0x20,
/// `"` or `\`); higher bits may be spurious, the lowest set bit is exact.
#[inline(always)]
fn escape_mask(word: u64) -> u64 {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let q = word ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let b = word ^ (ONES * u64::from(b'\\'));
    let backslash = b.wrapping_sub(ONES) & !b;
    (below_space | quote | backslash) & HIGHS
}

/// Appends the escape of an ASCII byte that needs one.
#[inline(always)]
fn push_escape(out: &mut Vec<u8>, byte: u8) {
    if let Some((text, len)) = ESCAPE_TEXT.get(usize::from(byte)) {
        // A fixed-size copy, then drop the padding: cheaper than a sized copy.
        let keep = out.len() + usize::from(*len);
        out.extend_from_slice(text);
        out.truncate(keep);
    }
}

fn push_unicode_escape(out: &mut Vec<u8>, unit: u16) {
    out.extend_from_slice(b"\\u");
    for shift in [12u16, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xF)]);
    }
}

/// Appends `s` as a quoted, escaped JSON string (`JSON.stringify(s)`), as UTF-8.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut i = 0;
    // Eight bytes at a time: copy the word whole, then cut it at the first byte that
    // needs escaping (fixed-size copies only).
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = load_word(chunk);
        let mask = escape_mask(word);
        let keep = if mask == 0 {
            8
        } else {
            (mask.trailing_zeros() / 8) as usize
        };
        let end = out.len() + keep;
        out.extend_from_slice(&word.to_le_bytes());
        out.truncate(end);
        i += keep;
        if keep < 8 {
            push_escape(out, bytes[i]);
            i += 1;
        }
    }
    for &byte in bytes.get(i..).unwrap_or_default() {
        if NEEDS_ESCAPE[usize::from(byte)] {
            push_escape(out, byte);
        } else {
            out.push(byte);
        }
    }
    out.push(b'"');
}

/// Appends a string given as UTF-16 code units (possibly holding lone surrogates) as a
/// quoted, escaped JSON string, as UTF-8.
pub fn write_units(out: &mut Vec<u8>, units: &[u16]) {
    out.reserve(units.len() + 2);
    out.push(b'"');
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok(c) if c.is_ascii() => {
                let byte = c as u8;
                if NEEDS_ESCAPE[usize::from(byte)] {
                    push_escape(out, byte);
                } else {
                    out.push(byte);
                }
            }
            Ok(c) => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
            Err(lone) => push_unicode_escape(out, lone.unpaired_surrogate()),
        }
    }
    out.push(b'"');
}

/// UTF-16 length of `JSON.stringify(s)` (quotes included), without building it.
///
/// Per UTF-8 byte: a continuation byte adds nothing, any other byte one unit, a 4-byte
/// lead one more (its code point is a surrogate pair); `"` and `\\` and the short escapes
/// (`\b \t \n \f \r`) take two units, other bytes below 0x20 six (`\u00xx`).
#[inline(always)]
pub fn str_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    if bytes.len() < PLAIN_CHECK_MAX && is_plain_ascii(bytes) {
        return bytes.len() + 2;
    }
    escaped_len(bytes)
}

/// [`str_len`] of a string that is long or needs escapes (out of line: the plain short
/// string is the common case, and is measured without a call).
#[inline(never)]
fn escaped_len(bytes: &[u8]) -> usize {
    let (mut total, done) = wide::units(bytes);
    for &b in bytes.get(done..).unwrap_or_default() {
        total += usize::from(ESCAPED_UNITS[usize::from(b)]);
    }
    total + 2
}

/// Strings shorter than this (most member values: ids, names, types) are first checked
/// for needing nothing but their quotes, eight bytes at a time.
const PLAIN_CHECK_MAX: usize = 64;

/// Whether every byte is ASCII that is copied raw (none below 0x20, `"` or `\\`): each is
/// then one UTF-16 unit.
#[inline(always)]
fn is_plain_ascii(bytes: &[u8]) -> bool {
    let flags = |word: u64| escape_mask(word) | (word & HIGHS);
    let mut chunks = bytes.chunks_exact(8);
    let mut found = chunks
        .by_ref()
        .fold(0, |found, chunk| found | flags(load_word(chunk)));
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // The last eight bytes again (overlapping), or the few bytes padded with spaces.
        let word = match bytes.len().checked_sub(8).and_then(|at| bytes.get(at..)) {
            Some(last) => load_word(last),
            None => {
                let mut padded = [b' '; 8];
                padded
                    .iter_mut()
                    .zip(rest)
                    .for_each(|(to, &from)| *to = from);
                u64::from_le_bytes(padded)
            }
        };
        found |= flags(word);
    }
    found == 0
}

/// Escaped UTF-16 units of the leading 16-byte chunks of a byte string, many bytes at a
/// time: `(units, bytes counted)`.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_add_epi8, _mm_add_epi64, _mm_and_si128, _mm_andnot_si128,
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_max_epu8,
        _mm_min_epu8, _mm_or_si128, _mm_sad_epu8, _mm_set1_epi8, _mm_setzero_si128, _mm_srli_si128,
        _mm_sub_epi8, _mm256_add_epi8, _mm256_add_epi64, _mm256_and_si256, _mm256_andnot_si256,
        _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_extracti128_si256, _mm256_loadu_si256,
        _mm256_max_epu8, _mm256_min_epu8, _mm256_or_si256, _mm256_sad_epu8, _mm256_set1_epi8,
        _mm256_setzero_si256, _mm256_sub_epi8,
    };

    /// Chunks per round: a byte adds at most 6 to its 8-bit lane (42 * 6 = 252).
    const ROUND: usize = 42;

    /// Strings at least this long are counted 32 bytes at a time when the CPU can.
    const WIDE_MIN: usize = 64;

    pub fn units(bytes: &[u8]) -> (usize, usize) {
        if bytes.len() >= WIDE_MIN && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            let (total, done) = unsafe { units_avx2(bytes) };
            let (rest, rest_done) = units_sse2(bytes.get(done..).unwrap_or_default());
            return (total + rest, done + rest_done);
        }
        units_sse2(bytes)
    }

    /// 32-byte chunks.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn units_avx2(bytes: &[u8]) -> (usize, usize) {
        let chunks = bytes.len() / 32;
        let ptr = bytes.as_ptr();
        let zero = _mm256_setzero_si256();
        let one = _mm256_set1_epi8(1);
        let x1f = _mm256_set1_epi8(0x1f);
        let eight = _mm256_set1_epi8(8);
        let five = _mm256_set1_epi8(5);
        let four = _mm256_set1_epi8(4);
        let eleven = _mm256_set1_epi8(11);
        let quote = _mm256_set1_epi8(b'"' as i8);
        let backslash = _mm256_set1_epi8(b'\\' as i8);
        let below_lead = _mm256_set1_epi8(-64); // 0xC0: continuation bytes are below
        let xf0 = _mm256_set1_epi8(-16); // 0xF0
        let mut sums = zero;
        let mut k = 0;
        while k < chunks {
            let end = (k + ROUND).min(chunks);
            let mut acc = zero;
            while k < end {
                // SAFETY: chunk k covers bytes 32k..32k+32, inside `bytes` (k < len / 32);
                // the load is unaligned.
                let v = unsafe { _mm256_loadu_si256(ptr.add(32 * k).cast::<__m256i>()) };
                let ctrl = _mm256_cmpeq_epi8(_mm256_min_epu8(v, x1f), v);
                let d = _mm256_sub_epi8(v, eight);
                let short = _mm256_andnot_si256(
                    _mm256_cmpeq_epi8(v, eleven),
                    _mm256_cmpeq_epi8(_mm256_min_epu8(d, five), d),
                );
                let quoted =
                    _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, backslash));
                let cont = _mm256_cmpgt_epi8(below_lead, v);
                let lead4 = _mm256_cmpeq_epi8(_mm256_max_epu8(v, xf0), v);
                acc = _mm256_add_epi8(acc, one);
                acc = _mm256_add_epi8(acc, cont);
                acc = _mm256_sub_epi8(acc, lead4);
                acc = _mm256_sub_epi8(acc, quoted);
                acc = _mm256_add_epi8(acc, _mm256_and_si256(ctrl, five));
                acc = _mm256_sub_epi8(acc, _mm256_and_si256(short, four));
                k += 1;
            }
            sums = _mm256_add_epi64(sums, _mm256_sad_epu8(acc, zero));
        }
        let halves = _mm_add_epi64(
            _mm256_extracti128_si256::<0>(sums),
            _mm256_extracti128_si256::<1>(sums),
        );
        let total = _mm_cvtsi128_si64(halves) + _mm_cvtsi128_si64(_mm_srli_si128::<8>(halves));
        (usize::try_from(total).unwrap_or(0), chunks * 32)
    }

    /// 16-byte chunks (SSE2 is part of the x86_64 baseline).
    fn units_sse2(bytes: &[u8]) -> (usize, usize) {
        let chunks = bytes.len() / 16;
        if chunks == 0 {
            return (0, 0);
        }
        // SAFETY: SSE2 is part of the x86_64 baseline; every load reads 16 bytes inside
        // `bytes` (chunk k covers bytes 16k..16k+16 with k < len / 16).
        unsafe {
            let ptr = bytes.as_ptr();
            let zero = _mm_setzero_si128();
            let one = _mm_set1_epi8(1);
            let x1f = _mm_set1_epi8(0x1f);
            let eight = _mm_set1_epi8(8);
            let five = _mm_set1_epi8(5);
            let four = _mm_set1_epi8(4);
            let eleven = _mm_set1_epi8(11);
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let below_lead = _mm_set1_epi8(-64); // 0xC0: continuation bytes are below
            let xf0 = _mm_set1_epi8(-16); // 0xF0
            let mut sums = zero;
            let mut k = 0;
            while k < chunks {
                let end = (k + ROUND).min(chunks);
                let mut acc = zero;
                while k < end {
                    let v = _mm_loadu_si128(ptr.add(16 * k).cast::<__m128i>());
                    // v <= 0x1f
                    let ctrl = _mm_cmpeq_epi8(_mm_min_epu8(v, x1f), v);
                    // 8 <= v <= 13, v != 11: the short escapes
                    let d = _mm_sub_epi8(v, eight);
                    let short = _mm_andnot_si128(
                        _mm_cmpeq_epi8(v, eleven),
                        _mm_cmpeq_epi8(_mm_min_epu8(d, five), d),
                    );
                    let quoted =
                        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
                    // 0x80 <= v <= 0xbf (signed: below 0xc0)
                    let cont = _mm_cmplt_epi8(v, below_lead);
                    // v >= 0xf0
                    let lead4 = _mm_cmpeq_epi8(_mm_max_epu8(v, xf0), v);
                    // Masks are 0 or -1: subtracting one adds 1.
                    acc = _mm_add_epi8(acc, one);
                    acc = _mm_add_epi8(acc, cont);
                    acc = _mm_sub_epi8(acc, lead4);
                    acc = _mm_sub_epi8(acc, quoted);
                    acc = _mm_add_epi8(acc, _mm_and_si128(ctrl, five));
                    acc = _mm_sub_epi8(acc, _mm_and_si128(short, four));
                    k += 1;
                }
                sums = _mm_add_epi64(sums, _mm_sad_epu8(acc, zero));
            }
            let total = _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_srli_si128::<8>(sums));
            (usize::try_from(total).unwrap_or(0), chunks * 16)
        }
    }
}

/// Escaped UTF-16 units of the leading 8-byte words (no SIMD): pure-ASCII words without
/// escapes count 8, others are counted byte by byte.
#[cfg(not(target_arch = "x86_64"))]
mod wide {
    use super::{ESCAPED_UNITS, HIGHS, escape_mask, load_word};

    pub fn units(bytes: &[u8]) -> (usize, usize) {
        let mut total = 0;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = load_word(chunk);
            if word & HIGHS == 0 && escape_mask(word) == 0 {
                total += 8;
            } else {
                total += chunk
                    .iter()
                    .map(|&b| usize::from(ESCAPED_UNITS[usize::from(b)]))
                    .sum::<usize>();
            }
        }
        (total, bytes.len() - chunks.remainder().len())
    }
}

/// UTF-16 length of the escaped, quoted form of a code-unit string.
pub fn units_len(units: &[u16]) -> usize {
    2 + char::decode_utf16(units.iter().copied())
        .map(|decoded| match decoded {
            Ok(c) if c.is_ascii() => usize::from(ESCAPED_UNITS[c as usize]),
            Ok(c) => c.len_utf16(),
            Err(_) => 6,
        })
        .sum::<usize>()
}

/// JS `s.length`: the number of UTF-16 code units of `s`.
pub fn utf16_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    // Every non-continuation byte starts a code point (1 unit); 4-byte leads add a second.
    let starts = bytes.iter().filter(|&&b| (b as i8) >= -0x40).count();
    let astral = bytes.iter().filter(|&&b| b >= 0xF0).count();
    starts + astral
}

/// `Buffer.byteLength(s, "utf8")` for a code-unit string: lone surrogates count 3 bytes
/// (they encode as U+FFFD).
pub fn units_utf8_len(units: &[u16]) -> usize {
    char::decode_utf16(units.iter().copied())
        .map(|decoded| decoded.map_or(3, char::len_utf8))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(s: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, s);
        String::from_utf8(out).unwrap_or_default()
    }

    fn quoted_units(units: &[u16]) -> String {
        let mut out = Vec::new();
        write_units(&mut out, units);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn escapes_like_json_stringify() {
        let cases: &[(&str, &str)] = &[
            ("", r#""""#),
            ("plain text", r#""plain text""#),
            ("quote\"q back\\slash", r#""quote\"q back\\slash""#),
            ("\u{8}\u{c}\n\r\t", r#""\b\f\n\r\t""#),
            ("\u{0}\u{1}\u{b}\u{1f}", r#""\u0000\u0001\u000b\u001f""#),
            (
                "slash/ del\u{7f} nbsp\u{a0}",
                "\"slash/ del\u{7f} nbsp\u{a0}\"",
            ),
            (
                "\u{2028}\u{2029}\u{feff}\u{85}",
                "\"\u{2028}\u{2029}\u{feff}\u{85}\"",
            ),
            ("日本😀é", "\"日本😀é\""),
            (
                "0123456789abcdef\"0123456789",
                r#""0123456789abcdef\"0123456789""#,
            ),
            (
                "\u{1b}\u{3}日本😀\u{15}quote\"q",
                "\"\\u001b\\u0003日本😀\\u0015quote\\\"q\"",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(quoted(input), *want, "escaping {input:?}");
            assert_eq!(str_len(input), utf16_len(want), "length of {input:?}");
            let units: Vec<u16> = input.encode_utf16().collect();
            assert_eq!(quoted_units(&units), *want, "escaping units of {input:?}");
            assert_eq!(
                units_len(&units),
                utf16_len(want),
                "units length of {input:?}"
            );
        }
    }

    #[test]
    fn lone_surrogates_are_escaped_lowercase() {
        // "abc\udfff\ud83d\ude00" -> "abc\udfff😀"
        let units = [0x61, 0x62, 0x63, 0xDFFF, 0xD83D, 0xDE00];
        assert_eq!(quoted_units(&units), "\"abc\\udfff😀\"");
        assert_eq!(units_len(&units), 13);
        // "back\\slashback\\slash\ud83d": a trailing high surrogate.
        let mut units: Vec<u16> = "x\\".encode_utf16().collect();
        units.push(0xD83D);
        assert_eq!(quoted_units(&units), "\"x\\\\\\ud83d\"");
        assert_eq!(units_len(&units), 11);
        assert_eq!(units_utf8_len(&units), 5);
    }

    #[test]
    fn counts_utf16_and_utf8() {
        assert_eq!(utf16_len(""), 0);
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é日😀"), 4);
        let units: Vec<u16> = "é日😀".encode_utf16().collect();
        assert_eq!(units_utf8_len(&units), 9);
        assert_eq!(units_utf8_len(&[0xD800, 0x41]), 4);
    }

    #[test]
    fn wide_counting_matches_the_per_byte_table() {
        let alphabet: Vec<char> =
            "ab \"\\\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f}\u{7f}é日😀\u{2028}/"
                .chars()
                .collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..200 {
            for _ in 0..8 {
                let s: String = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        alphabet[(seed % alphabet.len() as u64) as usize]
                    })
                    .collect();
                let want = 2 + s
                    .bytes()
                    .map(|b| usize::from(ESCAPED_UNITS[usize::from(b)]))
                    .sum::<usize>();
                assert_eq!(str_len(&s), want, "length of {s:?}");
                assert_eq!(str_len(&s), utf16_len(&quoted(&s)), "escaped {s:?}");
            }
        }
    }

    #[test]
    fn one_special_anywhere_in_plain_text() {
        // Plain chunks are counted whole; each of these must still be seen in any position
        // (the short-string check's words and padded tail, the 32- and 16-byte chunks, the
        // per-byte tail, the last byte), below and above the short-string bound.
        for special in [
            '"', '\\', '\u{0}', '\u{1f}', '\n', '\u{b}', '\u{7f}', '\u{80}', 'é', '😀', ' ',
        ] {
            for len in 0..PLAIN_CHECK_MAX + 10 {
                for at in 0..=len {
                    let s: String = (0..len)
                        .map(|i| if i == at { special } else { 'x' })
                        .collect();
                    assert_eq!(str_len(&s), utf16_len(&quoted(&s)), "escaped {s:?}");
                }
            }
        }
    }

    #[test]
    fn long_strings_cross_word_boundaries() {
        let s = "abcdefg\"hijklmnop\u{1}qrstuvwxyz\\0123456789😀abcdefgh\n";
        let want = "\"abcdefg\\\"hijklmnop\\u0001qrstuvwxyz\\\\0123456789😀abcdefgh\\n\"";
        assert_eq!(quoted(s), want);
        assert_eq!(str_len(s), utf16_len(want));
    }
}
