//! Crafted bad CGEB records and batch indexes: each rejection asserts the exact
//! [`CgebError`] variant and the field offset it names.

mod cgeb_util;
use cgeb_util::*;

use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchIndex, BatchReader, BatchReaderOptions, CgebError, CompressionType,
    EmbeddingBinaryCodec,
};
use tensorvault_formats::FormatError;

fn record() -> Vec<u8> {
    let mut e = embedding(5, 32, 8, 2);
    e.aux_data = Some(colbert_aux(5)[..300].to_vec());
    EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::None))
        .encode(&e)
        .unwrap()
}

/// Decode with hash verification off, so structural checks are seen on their own.
fn decode(bytes: &[u8]) -> CgebError {
    let codec = EmbeddingBinaryCodec::new().with_verify_hash(false);
    match codec.decode_zero_copy(bytes) {
        Err(FormatError::Cgeb(e)) => {
            // The owned decode must agree.
            match codec.decode(bytes) {
                Err(FormatError::Cgeb(e2)) => assert_eq!(e, e2),
                other => panic!("owned decode disagrees: {other:?}"),
            }
            e
        }
        other => panic!("expected a CGEB error, got {other:?}"),
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

#[test]
fn invalid_magic() {
    let mut b = record();
    b[0] = b'X';
    assert!(matches!(
        decode(&b),
        CgebError::InvalidMagic { offset: 0, found, .. } if &found == b"XGEB"
    ));
}

#[test]
fn unsupported_version_above_and_zero() {
    for v in [3u16, 0, 0xffff] {
        let mut b = record();
        b[4..6].copy_from_slice(&v.to_be_bytes());
        assert!(matches!(
            decode(&b),
            CgebError::UnsupportedVersion { version, offset: 4, supported: 2, .. } if version == v
        ));
    }
}

/// Version 2 (what the codec writes) hashes the header too: every single-bit flip of a
/// record's header is refused, including the ones v1 let through (the `LE_PAYLOAD` flag,
/// `pipeline_latency_us`, the aux compression bits: 65 of 512 header bits in v1).
#[test]
fn v2_content_hash_covers_the_whole_header() {
    let good = record();
    assert_eq!(&good[4..6], &2u16.to_be_bytes());
    let codec = EmbeddingBinaryCodec::new();
    assert!(codec.decode(&good).is_ok());
    for bit in 0..64 * 8 {
        let mut b = good.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        assert!(
            codec.decode(&b).is_err(),
            "flip of header bit {bit} accepted"
        );
    }
}

#[test]
fn unknown_flag_bits() {
    for bit in 3..16 {
        let mut b = record();
        b[6..8].copy_from_slice(&(1u16 << bit).to_be_bytes());
        assert!(matches!(
            decode(&b),
            CgebError::UnknownFlags { unknown, offset: 6, .. } if unknown == 1 << bit
        ));
    }
    let mut b = record();
    b[6..8].copy_from_slice(&0b110u16.to_be_bytes());
    assert!(matches!(
        decode(&b),
        CgebError::UnsupportedCompression { code: 3, offset: 6 }
    ));
}

#[test]
fn buffer_shorter_than_header() {
    let b = record();
    for n in [0, 1, 63] {
        assert!(matches!(
            decode(&b[..n]),
            CgebError::BufferTooShort { what: "header", needed: 64, available, .. } if available == n as u64
        ));
    }
}

#[test]
fn buffer_shorter_than_the_header_implies() {
    let b = record();
    let fixed = 64 + 32 * 4 + 8 * 4 + 2;
    assert!(matches!(
        decode(&b[..fixed - 1]),
        CgebError::BufferTooShort { needed, offset: 64, .. } if needed == fixed as u64
    ));
    // Cut inside the aux data.
    assert!(matches!(
        decode(&b[..b.len() - 1]),
        CgebError::AuxOutOfBounds { offset: 32, .. }
    ));
    // A dimension that claims more than is there.
    let mut b2 = EmbeddingBinaryCodec::new()
        .encode(&embedding(5, 32, 8, 2))
        .unwrap();
    b2[8..12].copy_from_slice(&1000u32.to_be_bytes());
    assert!(matches!(
        decode(&b2),
        CgebError::BufferTooShort { offset: 64, .. }
    ));
}

#[test]
fn aux_past_the_end_or_overlapping() {
    let len = record().len() as u64;
    let fixed = 64 + 32 * 4 + 8 * 4 + 2u64;
    let cases = [
        (fixed, len),                 // length runs past the end
        (len, 1),                     // starts at the end
        (u64::MAX - 2, 10),           // offset + length overflows
        (fixed - 1, len - fixed + 1), // overlaps the selected experts
        (64, 10),                     // overlaps the vector
    ];
    for (off, n) in cases {
        let mut b = record();
        put_u64(&mut b, 32, off);
        put_u64(&mut b, 40, n);
        let e = decode(&b);
        assert!(
            matches!(e, CgebError::AuxOutOfBounds { aux_offset, aux_length, offset: 32, .. } if aux_offset == off && aux_length == n),
            "{off},{n}: {e:?}"
        );
    }
    let mut b = record();
    put_u64(&mut b, 40, 0); // offset set, length zero
    assert!(matches!(decode(&b), CgebError::AuxOutOfBounds { .. }));
}

#[test]
fn dimension_zero_or_absurd() {
    for d in [0u32, (1 << 20) + 1, u32::MAX] {
        let mut b = record();
        b[8..12].copy_from_slice(&d.to_be_bytes());
        assert!(matches!(
            decode(&b),
            CgebError::InvalidDimension { dimension, offset: 8, .. } if dimension == u64::from(d)
        ));
    }
}

#[test]
fn bad_expert_fields_and_reserved_bytes() {
    let mut b = record();
    b[13] = 9; // top_k > num_experts
    assert!(matches!(
        decode(&b),
        CgebError::InvalidField {
            field: "top_k",
            offset: 13,
            ..
        }
    ));
    let mut b = record();
    let sel = 64 + 32 * 4 + 8 * 4;
    b[sel + 1] = 8;
    assert!(matches!(
        decode(&b),
        CgebError::InvalidField { field: "selected_experts", offset, .. } if offset == (sel + 1) as u64
    ));
    let mut b = record();
    b[15] = 1;
    assert!(matches!(
        decode(&b),
        CgebError::InvalidField {
            field: "reserved",
            offset: 14,
            ..
        }
    ));
    let mut b = record();
    b[63] = 1;
    assert!(matches!(
        decode(&b),
        CgebError::InvalidField {
            field: "padding",
            offset: 48,
            ..
        }
    ));
    let mut b = EmbeddingBinaryCodec::new()
        .encode(&embedding(1, 8, 2, 1))
        .unwrap();
    b[6..8].copy_from_slice(&0b010u16.to_be_bytes()); // LZ4 flag but no aux
    assert!(matches!(
        decode(&b),
        CgebError::InvalidField {
            field: "flags",
            offset: 6,
            ..
        }
    ));
}

/// The content hash covers every byte after the header (ARCHITECTURE.md section 3), so
/// two header fields are not covered in a lone record: the flag bits (0 `LE_PAYLOAD`,
/// 1-2 aux compression: reinterpreting stored aux bytes may even decompress) and
/// `pipeline_latency_us`. Every other
/// single-bit flip anywhere in a record is rejected (payload flips by `HashMismatch`);
/// in a batch file the data-file hash catches every flip (next test).
fn uncovered(byte: usize, bit: u32) -> bool {
    (byte == 7 && bit < 3) || (24..32).contains(&byte)
}

#[test]
fn every_single_bit_flip_is_detected() {
    let good = record();
    let codec = EmbeddingBinaryCodec::new();
    assert!(codec.decode_zero_copy(&good).is_ok());
    let sel = 64 + 32 * 4 + 8 * 4;
    for byte in 0..good.len() {
        for bit in 0..8 {
            if uncovered(byte, bit) {
                continue;
            }
            let mut b = good.clone();
            b[byte] ^= 1 << bit;
            let r = codec.decode_zero_copy(&b);
            assert!(
                r.is_err(),
                "flip of bit {bit} in byte {byte} went unnoticed"
            );
            if byte >= 64 && !(sel..sel + 2).contains(&byte) {
                // Payload bytes (except the selected-expert indices, which are range
                // checked first): the hash catches it.
                assert!(
                    matches!(
                        r,
                        Err(FormatError::Cgeb(CgebError::HashMismatch { offset: 0, .. }))
                    ),
                    "byte {byte}: {r:?}"
                );
            }
        }
    }
}

#[test]
fn every_single_bit_flip_in_a_batch_file_is_detected() {
    let (data, index) = batch();
    // Every header bit, and a sample of payload bits, of the second record.
    let start = 64 * ((64 + 40 * 4 + 16 + 2) / 64 + 1);
    for byte in (start..start + 64).chain((start + 64..data.len()).step_by(61)) {
        for bit in 0..8 {
            let mut d = data.clone();
            d[byte] ^= 1 << bit;
            assert!(matches!(
                open_err(d, &index),
                CgebError::DataFileHashMismatch { offset: 16, .. }
            ));
        }
    }
}

#[test]
fn corrupt_compressed_aux() {
    for c in [CompressionType::Lz4, CompressionType::Zstd] {
        let mut e = embedding(2, 16, 4, 1);
        e.aux_data = Some(colbert_aux(2));
        let codec = EmbeddingBinaryCodec::with_aux_data(Some(c)).with_verify_hash(false);
        let mut b = codec.encode(&e).unwrap();
        let fixed = 64 + 16 * 4 + 4 * 4 + 1;
        put_u64(&mut b, fixed, 1 << 40); // declared size above the limit
        assert!(matches!(
            codec.decode(&b),
            Err(FormatError::Cgeb(CgebError::AuxCorrupt { offset, .. })) if offset == fixed as u64
        ));
        // The zero-copy view does not decompress, so it still opens.
        assert!(codec.decode_zero_copy(&b).is_ok());
    }
}

// ---------------------------------------------------------------------------------------
// Batch indexes

fn batch() -> (Vec<u8>, Vec<u8>) {
    let mut enc = BatchBinaryEncoder::new(EmbeddingBinaryCodec::new(), 64).unwrap();
    for i in 0..4 {
        enc.push(&embedding(i, 40, 4, 2)).unwrap();
    }
    // A version-1 index (no checksum): these tests craft bad entries and headers and
    // check the field rules, which a version-2 checksum would otherwise catch first
    // (`index_v2_checksum_catches_every_edit` covers that).
    let mut idx = enc.index();
    idx.version = 1;
    let index = idx.to_bytes();
    (enc.finalize().0, index)
}

fn open_err(data: Vec<u8>, index: &[u8]) -> CgebError {
    match BatchReader::from_bytes(data, index, BatchReaderOptions::default()) {
        Err(FormatError::Cgeb(e)) => e,
        other => panic!("expected a CGEB error, got {other:?}"),
    }
}

#[test]
fn index_entries_unsorted_out_of_range_misaligned() {
    let (data, index) = batch();
    let entry = |i: usize| 32 + 8 * i;
    let mut unsorted = index.clone();
    unsorted.copy_within(entry(2)..entry(3), entry(1)); // entry 1 = entry 2
    let mut swapped = index.clone();
    let (a, b) = (
        index[entry(1)..entry(2)].to_vec(),
        index[entry(2)..entry(3)].to_vec(),
    );
    swapped[entry(1)..entry(2)].copy_from_slice(&b);
    swapped[entry(2)..entry(3)].copy_from_slice(&a);
    for bad in [unsorted, swapped] {
        assert!(matches!(
            open_err(data.clone(), &bad),
            CgebError::BadIndexEntry {
                entry: 2,
                offset: 48,
                ..
            }
        ));
    }
    let mut oob = index.clone();
    put_u64(&mut oob, entry(3), data.len() as u64 / 64 * 64 + 64);
    assert!(matches!(
        open_err(data.clone(), &oob),
        CgebError::BadIndexEntry {
            entry: 3,
            offset: 56,
            ..
        }
    ));
    let mut mis = index.clone();
    put_u64(&mut mis, entry(1), 64 * 6 + 8);
    assert!(matches!(
        open_err(data.clone(), &mis),
        CgebError::BadIndexEntry {
            entry: 1,
            offset: 40,
            ..
        }
    ));
}

#[test]
fn index_data_file_hash_mismatch() {
    let (mut data, index) = batch();
    let last = data.len() - 1;
    data[last] ^= 1;
    assert!(matches!(
        open_err(data.clone(), &index),
        CgebError::DataFileHashMismatch { offset: 16, .. }
    ));
    // With the file hash off, the record hash still catches it on get().
    let r = BatchReader::from_bytes(
        data,
        &index,
        BatchReaderOptions {
            verify_data_hash: false,
            verify_records: true,
        },
    )
    .unwrap();
    assert!(matches!(
        r.get(3),
        Err(FormatError::Cgeb(CgebError::HashMismatch { .. }))
    ));
    let report = r.verify();
    assert!(!report.is_ok());
    assert_eq!(report.bad_records.len(), 1);
    assert_eq!(report.bad_records[0].0, 3);
}

#[test]
fn index_header_rejections() {
    let (data, index) = batch();
    let len = data.len() as u64;
    let e = |b: &[u8]| BatchIndex::parse(b, len).unwrap_err();
    assert!(matches!(
        e(&index[..31]),
        CgebError::BufferTooShort { needed: 32, .. }
    ));
    let mut b = index.clone();
    b[3] = b'B';
    assert!(matches!(
        e(&b),
        CgebError::InvalidMagic { format: "cgei", .. }
    ));
    let mut b = index.clone();
    b[5] = 3;
    assert!(matches!(
        e(&b),
        CgebError::UnsupportedVersion {
            version: 3,
            offset: 4,
            ..
        }
    ));
    let mut b = index.clone();
    b[7] = 1;
    assert!(matches!(e(&b), CgebError::UnknownFlags { offset: 6, .. }));
    let mut b = index.clone();
    b[24..28].copy_from_slice(&100u32.to_be_bytes());
    assert!(matches!(
        e(&b),
        CgebError::InvalidField {
            field: "record_alignment",
            offset: 24,
            ..
        }
    ));
    let mut b = index.clone();
    b[31] = 1;
    assert!(matches!(
        e(&b),
        CgebError::InvalidField {
            field: "reserved",
            offset: 28,
            ..
        }
    ));
    // Count mismatch: claims more entries than present, an absurd count, trailing bytes.
    for (count, extra) in [(5u64, 0usize), (u64::MAX, 0), (4, 3)] {
        let mut b = index.clone();
        put_u64(&mut b, 8, count);
        b.extend(std::iter::repeat_n(0, extra));
        assert!(matches!(
            e(&b),
            CgebError::IndexLengthMismatch { offset: 8, .. }
        ));
    }
}

#[test]
fn record_overrunning_the_next_offset() {
    // Two records 64 bytes apart although each needs more: the first is cut short.
    let (data, index) = batch();
    let mut b = index.clone();
    put_u64(&mut b, 40, 64 * 2);
    let r = BatchReader::from_bytes(
        data,
        &b,
        BatchReaderOptions {
            verify_data_hash: false,
            verify_records: true,
        },
    )
    .unwrap();
    assert!(matches!(
        r.get(0),
        Err(FormatError::Cgeb(CgebError::BufferTooShort {
            offset: 64,
            ..
        }))
    ));
}

/// A version-2 index (what the encoder writes) carries a CRC-32C of its header and
/// offsets: deleting an entry (with the count fixed up), swapping two, truncating, or
/// flipping any bit is an `IndexChecksumMismatch`, never a wrong record. (Version 1
/// let `get --index 1` return record 2 after one offset was deleted.)
#[test]
fn index_v2_checksum_catches_every_edit() {
    let mut enc = BatchBinaryEncoder::new(EmbeddingBinaryCodec::new(), 64).unwrap();
    for i in 0..4 {
        enc.push(&embedding(i, 40, 4, 2)).unwrap();
    }
    let idx = enc.index();
    assert_eq!(idx.version, 2);
    let index = idx.to_bytes();
    let data = enc.finalize().0;
    let len = data.len() as u64;
    assert_eq!(BatchIndex::parse(&index, len).unwrap().version, 2);
    let crc_err = |b: &[u8]| {
        matches!(
            BatchIndex::parse(b, len),
            Err(CgebError::IndexChecksumMismatch { offset: 28, .. })
        )
    };
    // Delete entry 1 and fix the count.
    let mut del = index.clone();
    del.drain(40..48);
    put_u64(&mut del, 8, 3);
    assert!(crc_err(&del));
    // Truncate to 2 entries with a consistent count.
    let mut cut = index[..48].to_vec();
    put_u64(&mut cut, 8, 2);
    assert!(crc_err(&cut));
    // Every single-bit flip is refused (by the checksum or an earlier field check).
    for bit in 0..index.len() * 8 {
        let mut b = index.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        assert!(
            BatchIndex::parse(&b, len).is_err(),
            "flip of bit {bit} accepted"
        );
    }
}
