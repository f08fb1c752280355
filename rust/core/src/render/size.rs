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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_and_commas() {
        assert_eq!(list_len([]), "[]".len());
        assert_eq!(list_len([2]), "[{}]".len());
        assert_eq!(list_len([2, 7]), "[{},\"abcde\"]".len());
    }
}
