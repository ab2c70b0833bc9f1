//! A record's place in a batch data file (spec §2): the bytes between a record's end and
//! the next record's offset are zero, and the file ends at the last record's end. A
//! decoder ignores bytes after a record, so without these rules anything could sit there
//! unchecked, e.g. the records an index rewritten with entries removed no longer lists.

use super::error::CgebError;

/// Checks record `record` of a batch: `range` holds the bytes of its index range (from its
/// offset `start` to the next record's offset, or to the end of the file for the last
/// one), `record_len` is its decoded length (header to the end of its aux data).
///
/// # Errors
/// [`CgebError::TrailingData`] when the last record ends before the file does,
/// [`CgebError::GapNotZero`] when another record's gap holds a non-zero byte.
pub(crate) fn check_extent(
    record: u64,
    start: u64,
    range: &[u8],
    record_len: usize,
    last: bool,
) -> Result<(), CgebError> {
    let record_end = start + record_len as u64;
    let range_end = start + range.len() as u64;
    if last {
        if record_len != range.len() {
            return Err(CgebError::TrailingData {
                record,
                offset: record_end,
                file_len: range_end,
            });
        }
        return Ok(());
    }
    let gap = range.get(record_len..).unwrap_or_default();
    match gap.iter().position(|&b| b != 0) {
        Some(p) => Err(CgebError::GapNotZero {
            record,
            record_end,
            next: range_end,
            offset: record_end + p as u64,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_must_be_zero_and_the_last_record_ends_the_file() {
        let mut range = vec![1u8; 10];
        range[6..].fill(0);
        assert_eq!(check_extent(0, 64, &range, 6, false), Ok(()));
        range[8] = 7;
        assert_eq!(
            check_extent(3, 64, &range, 6, false),
            Err(CgebError::GapNotZero {
                record: 3,
                record_end: 70,
                next: 74,
                offset: 72
            })
        );
        assert_eq!(
            check_extent(4, 64, &range, 6, true),
            Err(CgebError::TrailingData {
                record: 4,
                offset: 70,
                file_len: 74
            })
        );
        assert_eq!(check_extent(4, 64, &range, 10, true), Ok(()));
    }
}
