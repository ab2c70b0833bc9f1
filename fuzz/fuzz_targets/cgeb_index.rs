//! Fuzz the CGEB batch reader: the first two bytes split the input into an index and a
//! data file; opening and reading every record must never panic, and every record read
//! obeys the layout rules (first at 0, zero gaps, the last one ends the file).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::cgeb::{BatchIndex, BatchReader, BatchReaderOptions};

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let split = usize::from(u16::from_le_bytes(*head)).min(rest.len());
    let (index, file) = rest.split_at(split);
    if let Ok(ix) = BatchIndex::parse(index, file.len() as u64) {
        assert!(ix.offsets.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            BatchIndex::parse(&ix.to_bytes(), file.len() as u64).as_ref(),
            Ok(&ix)
        );
    }
    for verify_data_hash in [true, false] {
        let opts = BatchReaderOptions {
            verify_data_hash,
            verify_records: !verify_data_hash,
        };
        if let Ok(r) = BatchReader::from_bytes(file.to_vec(), index, opts) {
            let offsets = &r.index().offsets;
            // Spec §2: no bytes before the first record, none after the last.
            assert!(offsets.first().map_or(file.is_empty(), |&o| o == 0));
            for (i, rec) in r.iter().enumerate() {
                if let Ok(rec) = rec {
                    assert!(rec.record_len() <= file.len());
                    // A record `get` accepts is followed by zeros up to the next offset,
                    // or ends the file.
                    let start = offsets[i] as usize;
                    let end = offsets.get(i + 1).map_or(file.len(), |&o| o as usize);
                    let gap = &file[start + rec.record_len()..end];
                    if i + 1 == offsets.len() {
                        assert!(gap.is_empty());
                    } else {
                        assert!(gap.iter().all(|&b| b == 0));
                    }
                }
            }
            let rep = r.verify();
            if rep.is_ok() {
                assert!(r.iter().all(|rec| rec.is_ok()));
            }
            let _ = r.get(r.len());
        }
    }
});
