//! JavaScript own-property key order: array-index keys (canonical decimal integers
//! 0..=4294967294) first in ascending numeric order, then the other keys in insertion order.

/// The largest array index (2^32 - 2).
const MAX_ARRAY_INDEX: u64 = 4_294_967_294;

fn index_from_digits(len: usize, mut digits: impl Iterator<Item = u32>) -> Option<u32> {
    if len == 0 || len > 10 {
        return None;
    }
    let first = digits.next()?;
    if first > 9 || (first == 0 && len > 1) {
        return None;
    }
    let mut value = u64::from(first);
    for digit in digits {
        if digit > 9 {
            return None;
        }
        value = value * 10 + u64::from(digit);
    }
    if value > MAX_ARRAY_INDEX {
        return None;
    }
    u32::try_from(value).ok()
}

/// The index when `key` is an array index in the JS sense (`"2"`, not `"01"`, `"-1"`,
/// `"4294967295"`), else `None`.
pub fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    index_from_digits(
        bytes.len(),
        bytes.iter().map(|&b| u32::from(b.wrapping_sub(b'0'))),
    )
}

/// [`array_index`] for a key given as UTF-16 code units.
pub fn array_index_units(key: &[u16]) -> Option<u32> {
    index_from_digits(
        key.len(),
        key.iter().map(|&u| u32::from(u.wrapping_sub(0x30))),
    )
}

/// True when keys with these array indices (`None` for other keys), in insertion order,
/// are already in JS order: all index keys first and ascending.
pub fn is_js_ordered(indices: &[Option<u32>]) -> bool {
    let mut last: Option<u32> = None;
    let mut seen_other = false;
    for index in indices {
        match *index {
            Some(i) => {
                if seen_other || last.is_some_and(|l| i <= l) {
                    return false;
                }
                last = Some(i);
            }
            None => seen_other = true,
        }
    }
    true
}

/// The positions of keys (given by their array index or `None`, in insertion order) in
/// JS own-property order.
pub fn js_key_order(indices: &[Option<u32>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..indices.len())
        .filter(|&i| indices[i].is_some())
        .collect();
    order.sort_by_key(|&i| indices[i]);
    order.extend((0..indices.len()).filter(|&i| indices[i].is_none()));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_array_indices() {
        let cases: &[(&str, Option<u32>)] = &[
            ("0", Some(0)),
            ("2", Some(2)),
            ("10", Some(10)),
            ("4294967294", Some(4_294_967_294)),
            ("4294967295", None),
            ("4294967296", None),
            ("99999999999", None),
            ("01", None),
            ("00", None),
            ("-1", None),
            ("1.5", None),
            ("", None),
            (" 1", None),
            ("1e3", None),
            ("١", None),
        ];
        for (key, want) in cases {
            assert_eq!(array_index(key), *want, "key {key:?}");
            let units: Vec<u16> = key.encode_utf16().collect();
            assert_eq!(array_index_units(&units), *want, "units key {key:?}");
        }
    }

    #[test]
    fn orders_index_keys_first() {
        // {"b":1,"2":0,"a":3,"01":4} -> {"2":0,"b":1,"a":3,"01":4}
        let keys = ["b", "2", "a", "01"];
        let indices: Vec<Option<u32>> = keys.iter().map(|k| array_index(k)).collect();
        assert!(!is_js_ordered(&indices));
        let ordered: Vec<&str> = js_key_order(&indices).iter().map(|&i| keys[i]).collect();
        assert_eq!(ordered, ["2", "b", "a", "01"]);

        let keys = ["10", "z", "4294967296", "2", "1.5", "0"];
        let indices: Vec<Option<u32>> = keys.iter().map(|k| array_index(k)).collect();
        let ordered: Vec<&str> = js_key_order(&indices).iter().map(|&i| keys[i]).collect();
        assert_eq!(ordered, ["0", "2", "10", "z", "4294967296", "1.5"]);

        assert!(is_js_ordered(&[Some(0), Some(3), None, None]));
        assert!(!is_js_ordered(&[Some(3), Some(0)]));
        assert!(is_js_ordered(&[]));
    }
}
