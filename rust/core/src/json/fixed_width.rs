//! `JSON.stringify(s).length` of strings held as fixed-width code points: one byte per code
//! point (Latin-1), two (the Basic Multilingual Plane) or four (any code point).
//!
//! The result is [`units_len`] of the string's UTF-16 code units, without converting it: a
//! code point adds its UTF-16 units (two above U+FFFF), and escaping adds 1 for `"`, `\` and
//! the short escapes (`\b \t \n \f \r`) and 5 for the other controls (`\u00xx`). Surrogate
//! code points (U+D800-U+DFFF) are rare and depend on their neighbours (a high one followed by
//! a low one is a pair, printed as is; any other is a lone surrogate, `\udxxx`): a string
//! holding one is converted and measured by [`units_len`].
//!
//! The counting loops work on chunks whose sums fit the code unit's own width, so that the
//! compiler can count many code points per instruction.

use super::escape::units_len;

/// Code points per chunk: at most 5 extra units each, so a chunk's sum fits 16 bits.
const CHUNK: usize = 64;

/// Extra units escaping adds to a code point (a 16-bit lane).
#[inline(always)]
fn extra16(c: u16) -> u16 {
    let control = u16::from(c < 0x20);
    let short = u16::from(c.wrapping_sub(8) < 6) & u16::from(c != 11);
    let quoted = u16::from(c == 0x22) | u16::from(c == 0x5c);
    control * 5 - short * 4 + quoted
}

/// Extra units escaping adds to a code point (a 32-bit lane).
#[inline(always)]
fn extra32(c: u32) -> u32 {
    let control = u32::from(c < 0x20);
    let short = u32::from(c.wrapping_sub(8) < 6) & u32::from(c != 11);
    let quoted = u32::from(c == 0x22) | u32::from(c == 0x5c);
    control * 5 - short * 4 + quoted
}

#[inline(always)]
fn is_surrogate16(c: u16) -> u16 {
    u16::from(c & 0xF800 == 0xD800)
}

/// Quoted, escaped UTF-16 length of a Latin-1 string (one byte per code point).
pub fn latin1_len(chars: &[u8]) -> usize {
    chars.len() + wide::latin1_extra(chars) + 2
}

/// Quoted, escaped UTF-16 length of a string of Basic Multilingual Plane code points (two
/// bytes each; surrogate code points allowed).
pub fn bmp_len(chars: &[u16]) -> usize {
    match wide::bmp_extra(chars) {
        Some(extra) => chars.len() + extra + 2,
        None => units_len(chars),
    }
}

/// Quoted, escaped UTF-16 length of a string of code points (four bytes each; surrogate
/// code points allowed, none above U+10FFFF).
pub fn code_points_len(chars: &[u32]) -> usize {
    match wide::code_points_extra(chars) {
        Some(extra) => chars.len() + extra + 2,
        None => units_len(&utf16_of(chars)),
    }
}

/// Strings at least this long are counted with AVX2 when the CPU has it.
const WIDE_MIN: usize = 4 * CHUNK;

/// The counting loops, compiled twice on x86_64: for the baseline CPU and with AVX2 (picked
/// at run time for long strings).
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::{WIDE_MIN, count};

    pub(super) fn latin1_extra(chars: &[u8]) -> usize {
        if chars.len() >= WIDE_MIN && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            return unsafe { avx2::latin1_extra(chars) };
        }
        count::latin1_extra(chars)
    }

    pub(super) fn bmp_extra(chars: &[u16]) -> Option<usize> {
        if chars.len() >= WIDE_MIN && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            return unsafe { avx2::bmp_extra(chars) };
        }
        count::bmp_extra(chars)
    }

    pub(super) fn code_points_extra(chars: &[u32]) -> Option<usize> {
        if chars.len() >= WIDE_MIN && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            return unsafe { avx2::code_points_extra(chars) };
        }
        count::code_points_extra(chars)
    }

    mod avx2 {
        use super::super::count;

        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn latin1_extra(chars: &[u8]) -> usize {
            count::latin1_extra(chars)
        }

        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn bmp_extra(chars: &[u16]) -> Option<usize> {
            count::bmp_extra(chars)
        }

        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn code_points_extra(chars: &[u32]) -> Option<usize> {
            count::code_points_extra(chars)
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod wide {
    pub(super) use super::count::{bmp_extra, code_points_extra, latin1_extra};
}

/// Extra units of escaping (and of astral code points), `None` when a surrogate code point
/// is met. Inlined into each caller, so that each compiles them for its own CPU features.
mod count {
    use super::{extra16, extra32, is_surrogate16, split_chunks};

    #[inline(always)]
    pub(super) fn latin1_extra(chars: &[u8]) -> usize {
        let (chunks, rest) = split_chunks(chars);
        let mut extra = 0usize;
        for chunk in chunks {
            let mut sum = 0u16;
            for &c in chunk {
                sum = sum.wrapping_add(extra16(u16::from(c)));
            }
            extra += usize::from(sum);
        }
        for &c in rest {
            extra += usize::from(extra16(u16::from(c)));
        }
        extra
    }

    #[inline(always)]
    pub(super) fn bmp_extra(chars: &[u16]) -> Option<usize> {
        let (chunks, rest) = split_chunks(chars);
        let mut extra = 0usize;
        let mut surrogates = 0u16;
        for chunk in chunks {
            let mut sum = 0u16;
            let mut surr = 0u16;
            for &c in chunk {
                sum = sum.wrapping_add(extra16(c));
                surr |= is_surrogate16(c);
            }
            extra += usize::from(sum);
            surrogates |= surr;
        }
        for &c in rest {
            extra += usize::from(extra16(c));
            surrogates |= is_surrogate16(c);
        }
        (surrogates == 0).then_some(extra)
    }

    #[inline(always)]
    pub(super) fn code_points_extra(chars: &[u32]) -> Option<usize> {
        let (chunks, rest) = split_chunks(chars);
        let mut extra = 0usize;
        let mut surrogates = 0u32;
        for chunk in chunks {
            let mut sum = 0u32;
            let mut surr = 0u32;
            for &c in chunk {
                sum += extra32(c) + u32::from(c > 0xFFFF);
                surr |= u32::from(c & 0xFFFF_F800 == 0xD800);
            }
            extra += sum as usize;
            surrogates |= surr;
        }
        for &c in rest {
            extra += (extra32(c) + u32::from(c > 0xFFFF)) as usize;
            surrogates |= u32::from(c & 0xFFFF_F800 == 0xD800);
        }
        (surrogates == 0).then_some(extra)
    }
}

/// The whole chunks of `chars` (fixed-size: the loops over them unroll and vectorize) and
/// what is left.
#[inline(always)]
fn split_chunks<T>(chars: &[T]) -> (impl Iterator<Item = &[T; CHUNK]>, &[T]) {
    let iter = chars.chunks_exact(CHUNK);
    let rest = iter.remainder();
    (
        iter.filter_map(|chunk| <&[T; CHUNK]>::try_from(chunk).ok()),
        rest,
    )
}

/// The UTF-16 code units of code points (surrogate code points kept as single units, as a
/// JS string holds them).
pub fn utf16_of(chars: &[u32]) -> Vec<u16> {
    let mut units = Vec::with_capacity(chars.len());
    for &c in chars {
        match u16::try_from(c) {
            Ok(unit) => units.push(unit),
            Err(_) => {
                let v = c.saturating_sub(0x10000);
                units.push(0xD800 | ((v >> 10) & 0x3FF) as u16);
                units.push(0xDC00 | (v & 0x3FF) as u16);
            }
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference measure: the code points as UTF-16 units, measured by `units_len`.
    fn expected(chars: &[u32]) -> usize {
        units_len(&utf16_of(chars))
    }

    fn check(chars: &[u32]) {
        let want = expected(chars);
        assert_eq!(code_points_len(chars), want, "code points {chars:x?}");
        if chars.iter().all(|&c| c <= 0xFFFF) {
            let bmp: Vec<u16> = chars.iter().map(|&c| c as u16).collect();
            assert_eq!(bmp_len(&bmp), want, "bmp {chars:x?}");
        }
        if chars.iter().all(|&c| c <= 0xFF) {
            let latin1: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
            assert_eq!(latin1_len(&latin1), want, "latin-1 {chars:x?}");
        }
    }

    #[test]
    fn every_code_point_below_0x100_alone_and_in_a_long_run() {
        // Long runs take the wide path where the CPU has one (and stay correct without).
        for c in 0u32..0x100 {
            check(&[c]);
            let mut run = vec![u32::from(b'a'); WIDE_MIN + 3 * CHUNK + 5];
            run[CHUNK + 7] = c;
            run[WIDE_MIN + 2 * CHUNK] = c;
            check(&run);
        }
    }

    #[test]
    fn escapes_count_as_json_stringify_prints_them() {
        // "a\"\\\n\u0001é" -> "a\"\\\n\u0001é" quoted: 1 + 2 + 2 + 2 + 6 + 1 + 2 quotes.
        let s: Vec<u32> = "a\"\\\n\u{1}\u{e9}".chars().map(u32::from).collect();
        assert_eq!(code_points_len(&s), 16);
        let latin1: Vec<u8> = s.iter().map(|&c| c as u8).collect();
        assert_eq!(latin1_len(&latin1), 16);
    }

    #[test]
    fn astral_code_points_count_two_units() {
        let s: Vec<u32> = "x\u{1f600}y\u{10ffff}".chars().map(u32::from).collect();
        assert_eq!(code_points_len(&s), 2 + 1 + 2 + 1 + 2);
    }

    #[test]
    fn surrogate_code_points_pair_up_or_print_escaped() {
        // A high then a low surrogate code point: a pair, printed as is.
        check(&[0xD83D, 0xDE00]);
        assert_eq!(bmp_len(&[0xD83D, 0xDE00]), 4);
        // Lone ones (each order, at the ends, next to an astral code point): \udxxx.
        assert_eq!(bmp_len(&[0xDE00, 0xD83D]), 2 + 12);
        assert_eq!(code_points_len(&[0xD800, 0x1F600]), 2 + 6 + 2);
        assert_eq!(code_points_len(&[0x1F600, 0xDC00]), 2 + 2 + 6);
        for &s in &[0xD800u32, 0xDBFF, 0xDC00, 0xDFFF] {
            let mut run = vec![0x100u32; WIDE_MIN + 2 * CHUNK];
            run[CHUNK - 1] = s;
            check(&run);
            check(&[s]);
        }
    }

    #[test]
    fn mixed_strings_of_every_length_match_the_utf16_measure() {
        // A fixed pseudo-random sequence of code points drawn from the interesting classes.
        let pool: [u32; 16] = [
            b'a'.into(),
            b'"'.into(),
            b'\\'.into(),
            0x0A,
            0x0B,
            0x1F,
            0x7F,
            0xE9,
            0x2028,
            0x20AC,
            0xFFFF,
            0xD83D,
            0xDE00,
            0x1F600,
            0x10000,
            b' '.into(),
        ];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for len in (0..(3 * CHUNK + 3)).chain(WIDE_MIN - 2..WIDE_MIN + 2 * CHUNK + 3) {
            for class_limit in [8usize, 11, 16] {
                let chars: Vec<u32> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        pool[(seed % class_limit as u64) as usize]
                    })
                    .collect();
                check(&chars);
            }
        }
    }
}
