//! `sizeMessages(list)` = `JSON.stringify(list).length`, composed from the
//! lengths of the elements so an untouched message is measured once.

/// Length of `JSON.stringify([e0, e1, ...])` given each element's length:
/// the brackets plus one comma between consecutive elements.
pub fn list_len<I: IntoIterator<Item = usize>>(element_lens: I) -> usize {
    let mut total = 2usize;
    let mut count = 0usize;
    for len in element_lens {
        total += len;
        count += 1;
    }
    total + count.saturating_sub(1)
}

/// The length of an assistant copy that only lost some of its `blocks` content blocks:
/// the original's length minus the removed blocks' lengths and their commas (every other
/// member is the very same value). `None` when that does not fit (the copy is measured).
pub fn assistant_copy_len(original: usize, removed: &[usize], blocks: usize) -> Option<usize> {
    let k = removed.len();
    // Removing every block leaves `[]`: one comma fewer than blocks; else one per block.
    let commas = if k == blocks { k.saturating_sub(1) } else { k };
    original.checked_sub(removed.iter().sum::<usize>() + commas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assistant_copy_loses_its_blocks_and_their_commas() {
        let original = r#"{"role":"assistant","content":[{"a":1},"bb",{"c":[]}]}"#;
        let lens = [r#"{"a":1}"#.len(), r#""bb""#.len(), r#"{"c":[]}"#.len()];
        let without_first = r#"{"role":"assistant","content":["bb",{"c":[]}]}"#;
        let without_last_two = r#"{"role":"assistant","content":[{"a":1}]}"#;
        let without_all = r#"{"role":"assistant","content":[]}"#;
        assert_eq!(
            assistant_copy_len(original.len(), &lens[..1], 3),
            Some(without_first.len())
        );
        assert_eq!(
            assistant_copy_len(original.len(), &lens[1..], 3),
            Some(without_last_two.len())
        );
        assert_eq!(
            assistant_copy_len(original.len(), &lens, 3),
            Some(without_all.len())
        );
        assert_eq!(
            assistant_copy_len(original.len(), &[], 3),
            Some(original.len())
        );
        assert_eq!(assistant_copy_len(3, &lens, 3), None);
    }

    #[test]
    fn brackets_and_commas() {
        assert_eq!(list_len([]), "[]".len());
        assert_eq!(list_len([2]), "[{}]".len());
        assert_eq!(list_len([2, 7]), "[{},\"abcde\"]".len());
    }
}
