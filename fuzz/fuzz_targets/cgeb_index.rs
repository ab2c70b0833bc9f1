//! Fuzz the CGEB batch reader: the first two bytes split the input into an index and a
//! data file; opening and reading every record must never panic.

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
            for rec in r.iter() {
                if let Ok(rec) = rec {
                    assert!(rec.record_len() <= file.len());
                }
            }
            let _ = r.verify();
            let _ = r.get(r.len());
        }
    }
});
