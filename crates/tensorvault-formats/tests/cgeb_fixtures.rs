//! Golden v1 files under `tests/fixtures/cgeb/`, committed once and decoded forever
//! after ("version 1 files are readable by version 2 code"):
//!
//! * `v1_single_1536.cgeb`: one seed-sized record (1536/8/2, big-endian, raw aux).
//! * `v1_batch.cgeb` + `v1_batch.cgei`: four records at 64-byte alignment: big-endian
//!   without aux, little-endian without aux, big-endian with Zstd aux, little-endian
//!   with LZ4 aux.
//!
//! Regenerate (only for a deliberate format change, which needs a new version):
//! `UPDATE_FIXTURES=1 cargo test -p tensorvault-formats --test cgeb_fixtures -- --ignored`.

mod cgeb_util;
use cgeb_util::*;

use std::path::PathBuf;

use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchReader, CompressionType, EmbeddingBinaryCodec, FusedEmbedding,
};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/cgeb")
}

/// What the golden batch holds: (embedding, codec).
fn batch_cases() -> Vec<(FusedEmbedding, EmbeddingBinaryCodec)> {
    let with_aux = |seed: u64, n: usize| {
        let mut e = embedding(seed, 24, 8, 2);
        e.aux_data = Some(colbert_aux(seed)[..n].to_vec());
        e
    };
    vec![
        (embedding(1, 24, 8, 2), EmbeddingBinaryCodec::new()),
        (
            embedding(2, 16, 4, 1),
            EmbeddingBinaryCodec::new().with_le_payload(true),
        ),
        (
            with_aux(3, 512),
            EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Zstd)),
        ),
        (
            with_aux(4, 384),
            EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Lz4)).with_le_payload(true),
        ),
    ]
}

fn single_case() -> FusedEmbedding {
    let mut e = seed_embedding(42);
    e.aux_data = Some(b"golden aux bytes".to_vec());
    e
}

#[test]
#[ignore = "writes the golden files; run with UPDATE_FIXTURES=1"]
fn generate_fixtures() {
    if std::env::var_os("UPDATE_FIXTURES").is_none() {
        eprintln!("set UPDATE_FIXTURES=1 to rewrite the golden files");
        return;
    }
    std::fs::create_dir_all(dir()).unwrap();
    let single = EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::None))
        .encode(&single_case())
        .unwrap();
    std::fs::write(dir().join("v1_single_1536.cgeb"), single).unwrap();
    // One encoder per record codec: build the data by hand at 64-byte alignment.
    let mut data = Vec::new();
    let mut offsets = Vec::new();
    for (e, codec) in batch_cases() {
        let mut one = BatchBinaryEncoder::new(codec, 64).unwrap();
        one.push(&e).unwrap();
        data.resize(data.len().next_multiple_of(64), 0);
        offsets.push(data.len() as u64);
        data.extend_from_slice(&one.finalize().0);
    }
    let index = tensorvault_formats::cgeb::BatchIndex {
        data_file_hash: tensorvault_core::checksum::xxh3_64(&data),
        record_alignment: 64,
        offsets,
        version: 1, // the committed fixture is a version-1 index (no checksum)
    };
    std::fs::write(dir().join("v1_batch.cgeb"), &data).unwrap();
    std::fs::write(dir().join("v1_batch.cgei"), index.to_bytes()).unwrap();
}

#[test]
fn golden_single_record_decodes() {
    let bytes = std::fs::read(dir().join("v1_single_1536.cgeb")).unwrap();
    assert_eq!(bytes.len(), 6242 + 16);
    // The header, byte by byte (big-endian).
    assert_eq!(
        &bytes[..16],
        b"CGEB\x00\x01\x00\x00\x00\x00\x06\x00\x08\x02\x00\x00"
    );
    assert_eq!(
        &bytes[32..48],
        &[0, 0, 0, 0, 0, 0, 0x18, 0x62, 0, 0, 0, 0, 0, 0, 0, 16]
    );
    let codec = EmbeddingBinaryCodec::new();
    let e = codec.decode(&bytes).unwrap();
    assert!(e.same_content(&single_case()));
    assert_eq!(
        e.content_hash,
        tensorvault_core::checksum::xxh3_64(&bytes[64..])
    );
    // The writer produces the same record as version 2: only the version and the
    // content hash (now over the header too) differ.
    let again = EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::None))
        .encode(&single_case())
        .unwrap();
    assert_v2_of_v1(&again, &bytes);
}

/// `v2` is the version-2 writing of the version-1 record `v1`: identical but for the
/// version (bytes 4..6) and the content hash (16..24), which v2 computes over the header
/// (hash field zeroed) and the body.
fn assert_v2_of_v1(v2: &[u8], v1: &[u8]) {
    assert_eq!(v2.len(), v1.len());
    assert_eq!(&v2[4..6], &2u16.to_be_bytes());
    assert_eq!(
        (&v2[..4], &v2[6..16], &v2[24..]),
        (&v1[..4], &v1[6..16], &v1[24..])
    );
    let mut h = tensorvault_core::checksum::Xxh3Hasher::new();
    let mut head = v2[..64].to_vec();
    head[16..24].fill(0);
    h.update(&head);
    h.update(&v2[64..]);
    assert_eq!(&v2[16..24], &h.digest().to_be_bytes());
}

#[test]
fn golden_batch_decodes() {
    let r = BatchReader::open(&dir().join("v1_batch")).unwrap();
    let cases = batch_cases();
    assert_eq!(r.len(), cases.len());
    assert_eq!(r.index().record_alignment, 64);
    assert!(r.verify().is_ok());
    let flags: Vec<u16> = (0..r.len())
        .map(|i| r.get(i).unwrap().header().flags.get())
        .collect();
    assert_eq!(flags, [0b000, 0b001, 0b100, 0b011]);
    for (i, (want, codec)) in cases.iter().enumerate() {
        let got = r.get(i).unwrap().to_owned().unwrap();
        assert!(got.same_content(want), "record {i}");
        // Records without Zstd are byte-stable across library versions.
        if i != 2 {
            let (start, _) = r.index().range(i, r.data().len() as u64).unwrap();
            let enc = codec.encode(want).unwrap();
            assert_v2_of_v1(&enc, &r.data()[start as usize..start as usize + enc.len()]);
        }
    }
}
