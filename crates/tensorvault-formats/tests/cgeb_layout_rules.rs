//! Issue 25 class 3: the batch layout rules of docs/formats/cgeb.md §2 and §3 are
//! enforced by `get`, `verify` and the O_DIRECT reader, so an index rewritten with entries
//! removed (and re-sealed: a valid checksum proves no damage, not sense) no longer
//! verifies: the first record starts at 0, the bytes between a record's end and the next
//! offset are zero, and the data file ends at the last record's end. Also class 5: a
//! version-2 record's reserved bytes are refused naming version 2.

mod cgeb_util;
use cgeb_util::*;

use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchIndex, BatchReader, BatchReaderOptions, CgebError, DirectReader,
    EmbeddingBinaryCodec, DIRECT_OPEN_OP,
};
use tensorvault_formats::FormatError;

/// Four records at alignment 64 (each 64 + 160 + 16 + 2 = 242 bytes, so 14 zero bytes
/// follow each but the last).
fn batch() -> (Vec<u8>, BatchIndex) {
    let mut enc = BatchBinaryEncoder::new(EmbeddingBinaryCodec::new(), 64).unwrap();
    for i in 0..4 {
        enc.push(&embedding(i, 40, 4, 2)).unwrap();
    }
    let idx = enc.index();
    (enc.finalize().0, idx)
}

/// `idx` without entry `drop`, sealed with a valid version-2 checksum.
fn without(idx: &BatchIndex, drop: usize) -> Vec<u8> {
    let mut forged = idx.clone();
    forged.offsets.remove(drop);
    forged.to_bytes()
}

fn open(data: Vec<u8>, index: &[u8]) -> Result<BatchReader, FormatError> {
    BatchReader::from_bytes(data, index, BatchReaderOptions::default())
}

fn cgeb(r: Result<impl std::fmt::Debug, FormatError>) -> CgebError {
    match r {
        Err(FormatError::Cgeb(e)) => e,
        other => panic!("expected a CGEB error, got {other:?}"),
    }
}

#[test]
fn the_untouched_batch_passes_every_rule() {
    let (data, idx) = batch();
    let r = open(data, &idx.to_bytes()).unwrap();
    assert!(r.verify().is_ok());
    for i in 0..4 {
        r.get(i).unwrap();
    }
}

#[test]
fn a_removed_middle_entry_leaves_a_record_in_a_gap() {
    let (data, idx) = batch();
    let o = idx.offsets.clone();
    let r = open(data, &without(&idx, 2)).unwrap();
    assert_eq!(r.len(), 3);
    r.get(0).unwrap();
    let e = cgeb(r.get(1));
    assert_eq!(
        e,
        CgebError::GapNotZero {
            record: 1,
            record_end: o[1] + 242,
            next: o[3],
            offset: o[2],
        }
    );
    assert!(e.to_string().contains("record 1 ends at offset"), "{e}");
    let rep = r.verify();
    assert!(!rep.is_ok());
    assert_eq!(rep.bad_records.len(), 1);
    assert_eq!(rep.bad_records[0].0, 1);
    assert!(rep.bad_records[0]
        .1
        .contains(&format!("first non-zero byte at offset {}", o[2])));
}

#[test]
fn a_removed_last_entry_leaves_trailing_data() {
    let (data, idx) = batch();
    let (len, o) = (data.len() as u64, idx.offsets.clone());
    let r = open(data, &without(&idx, 3)).unwrap();
    assert_eq!(
        cgeb(r.get(2)),
        CgebError::TrailingData {
            record: 2,
            offset: o[2] + 242,
            file_len: len,
        }
    );
    let rep = r.verify();
    assert_eq!(rep.bad_records.iter().map(|b| b.0).collect::<Vec<_>>(), [2]);
    // Zero bytes appended after the last record break the rule as well.
    let (mut data, idx) = batch();
    data.extend_from_slice(&[0u8; 64]);
    let mut resealed = idx.clone();
    resealed.data_file_hash = tensorvault_core::checksum::xxh3_64(&data);
    let r = open(data, &resealed.to_bytes()).unwrap();
    assert!(matches!(
        cgeb(r.get(3)),
        CgebError::TrailingData { record: 3, .. }
    ));
}

#[test]
fn a_removed_first_entry_or_an_empty_index_is_refused_at_open() {
    let (data, idx) = batch();
    assert!(matches!(
        cgeb(open(data.clone(), &without(&idx, 0))),
        CgebError::BadIndexEntry {
            entry: 0,
            offset: 32,
            value: 256,
            ..
        }
    ));
    let mut empty = idx.clone();
    empty.offsets.clear();
    assert!(matches!(
        cgeb(open(data, &empty.to_bytes())),
        CgebError::InvalidField {
            field: "entry_count",
            offset: 8,
            ..
        }
    ));
    // An empty batch (empty data file) is still fine.
    empty.data_file_hash = tensorvault_core::checksum::xxh3_64(&[]);
    assert!(open(Vec::new(), &empty.to_bytes()).unwrap().is_empty());
}

#[test]
fn gap_bytes_are_checked_even_without_record_verification() {
    let (mut data, idx) = batch();
    data[242 + 3] = 0xAB; // in record 0's gap
    let mut sealed = idx.clone();
    sealed.data_file_hash = tensorvault_core::checksum::xxh3_64(&data);
    let opts = BatchReaderOptions {
        verify_data_hash: false,
        verify_records: false,
    };
    let r = BatchReader::from_bytes(data, &sealed.to_bytes(), opts).unwrap();
    assert_eq!(
        cgeb(r.get(0)),
        CgebError::GapNotZero {
            record: 0,
            record_end: 242,
            next: 256,
            offset: 245,
        }
    );
}

#[test]
fn the_direct_reader_enforces_the_same_rules() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (data, idx) = batch();
    std::fs::write(dir.path().join("b.cgeb"), &data).unwrap();
    std::fs::write(dir.path().join("b.cgei"), without(&idx, 2)).unwrap();
    let mut d = match DirectReader::open(&dir.path().join("b"), true) {
        Ok(d) => d,
        Err(FormatError::Io { op, source, .. })
            if op == DIRECT_OPEN_OP && source.raw_os_error() == Some(22) =>
        {
            eprintln!("SKIPPED: this filesystem refuses O_DIRECT ({source})");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    d.read(0).unwrap();
    assert!(matches!(
        cgeb(d.read(1).map(|_| ())),
        CgebError::GapNotZero { record: 1, .. }
    ));
}

#[test]
fn reserved_bytes_name_the_records_own_version() {
    let codec = EmbeddingBinaryCodec::new().with_verify_hash(false);
    for version in [2u16, 1] {
        let mut b = codec.encode(&embedding(1, 8, 2, 1)).unwrap();
        b[4..6].copy_from_slice(&version.to_be_bytes());
        b[15] = 1;
        let e = cgeb(codec.decode_zero_copy(&b).map(|_| ()));
        assert!(
            matches!(
                e,
                CgebError::InvalidField {
                    field: "reserved",
                    offset: 14,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .ends_with(&format!("must be zero in version {version}")),
            "{e}"
        );
    }
}
