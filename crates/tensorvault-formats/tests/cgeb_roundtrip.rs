//! CGEB round trips: single records (both byte orders, every aux compression, the
//! seed's sizes), batch files (mmap reader, iterator, O_DIRECT reader, atomic writes)
//! and bounded property tests.

mod cgeb_util;
use cgeb_util::*;

use proptest::prelude::*;
use tensorvault_formats::cgeb::{
    batch_paths, layout, BatchBinaryEncoder, BatchReader, CgebError, CompressionType, DirectReader,
    EmbeddingBinaryCodec, FusedEmbedding, DIRECT_OPEN_OP,
};
use tensorvault_formats::FormatError;

const ALL_COMP: [Option<CompressionType>; 4] = [
    None,
    Some(CompressionType::None),
    Some(CompressionType::Lz4),
    Some(CompressionType::Zstd),
];

#[test]
fn seed_sizes_and_offsets() {
    assert_eq!(EmbeddingBinaryCodec::MIN_BUFFER_SIZE, 6242);
    let e = seed_embedding(1);
    let codec = EmbeddingBinaryCodec::new();
    let bytes = codec.encode(&e).unwrap();
    assert_eq!(bytes.len(), 6242);
    assert_eq!(codec.serialized_size(&e), 6242);
    assert_eq!(&bytes[..4], b"CGEB");
    assert_eq!(&bytes[4..6], &[0, 2], "version (2) is big-endian");
    assert_eq!(
        &bytes[8..12],
        &1536u32.to_be_bytes(),
        "dimension is big-endian"
    );
    assert_eq!((bytes[12], bytes[13]), (8, 2));
    assert_eq!(&bytes[64..68], &e.vector[0].to_be_bytes());
    assert_eq!(&bytes[6208..6212], &e.expert_weights[0].to_be_bytes());
    assert_eq!(&bytes[6240..6242], &e.selected_experts[..]);
    // Version 2: XXH3-64 of the header (hash field zeroed) and the body.
    let mut zeroed = bytes.clone();
    zeroed[16..24].fill(0);
    let hash = tensorvault_core::checksum::xxh3_64(&zeroed);
    assert_eq!(&bytes[16..24], &hash.to_be_bytes());
    let h = codec.decode_header(&bytes[..64]).unwrap();
    assert_eq!(h.dimension.get(), 1536);
    assert_eq!(h.content_hash.get(), hash);
}

#[test]
fn round_trip_every_compression_and_byte_order() {
    for le in [false, true] {
        for comp in ALL_COMP {
            let codec = match comp {
                None => EmbeddingBinaryCodec::new(),
                Some(c) => EmbeddingBinaryCodec::with_aux_data(Some(c)),
            }
            .with_le_payload(le);
            let mut e = seed_embedding(7);
            e.aux_data = Some(colbert_aux(7));
            let bytes = codec.encode(&e).unwrap();
            assert_eq!(bytes.len(), codec.serialized_size(&e));
            let back = codec.decode(&bytes).unwrap();
            let mut want = e.clone();
            if comp.is_none() {
                want.aux_data = None;
                assert_eq!(bytes.len(), 6242);
            }
            assert!(back.same_content(&want), "le={le} comp={comp:?}");
            let view = codec.decode_zero_copy(&bytes).unwrap();
            assert_eq!(view.has_aux_data(), comp.is_some());
            assert_eq!(view.content_hash(), back.content_hash);
            assert!(view.to_owned().unwrap().same_content(&want));
            assert_eq!(view.header().le_payload(), le);
            if le && cfg!(target_endian = "little") {
                assert_eq!(view.vector().as_native().unwrap(), &e.vector[..]);
            } else {
                assert!(view.vector().as_native().is_none());
            }
            if let Some(c) = comp {
                let stored = view.aux_data_stored().unwrap().len();
                if c != CompressionType::None {
                    assert!(
                        stored < 100 * 128 * 4,
                        "{c:?} compresses ColBERT aux: {stored}"
                    );
                }
            }
        }
    }
}

#[test]
fn encode_to_buffer_and_file() {
    let e = seed_embedding(3);
    let codec = EmbeddingBinaryCodec::new();
    let mut small = vec![0u8; 6241];
    match codec.encode_to_buffer(&e, &mut small) {
        Err(FormatError::Cgeb(CgebError::BufferTooSmall {
            needed: 6242,
            available: 6241,
        })) => {}
        other => panic!("{other:?}"),
    }
    let mut buf = vec![0u8; 7000];
    assert_eq!(codec.encode_to_buffer(&e, &mut buf).unwrap(), 6242);
    assert_eq!(&buf[..6242], &codec.encode(&e).unwrap()[..]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("one.cgeb");
    let mut f = std::fs::File::create(&p).unwrap();
    assert_eq!(codec.encode_to_file(&e, &mut f).unwrap(), 6242);
    drop(f);
    assert!(codec
        .decode(&std::fs::read(&p).unwrap())
        .unwrap()
        .same_content(&e));
}

#[test]
fn encode_rejects_bad_embeddings() {
    let codec = EmbeddingBinaryCodec::new();
    let zero = FusedEmbedding::new(vec![], vec![1.0], vec![0]);
    assert!(matches!(
        codec.encode(&zero),
        Err(FormatError::Cgeb(CgebError::InvalidDimension {
            dimension: 0,
            ..
        }))
    ));
    let bad_sel = FusedEmbedding::new(vec![1.0; 4], vec![0.5; 2], vec![2]);
    assert!(matches!(
        codec.encode(&bad_sel),
        Err(FormatError::Cgeb(CgebError::InvalidField {
            field: "selected_experts",
            ..
        }))
    ));
    let too_many = FusedEmbedding::new(vec![1.0; 4], vec![0.5; 2], vec![0, 1, 1]);
    assert!(matches!(
        codec.encode(&too_many),
        Err(FormatError::Cgeb(CgebError::InvalidField {
            field: "top_k",
            ..
        }))
    ));
}

fn write_batch(dir: &std::path::Path, n: usize, align: u32, le: bool) -> Vec<FusedEmbedding> {
    let codec = EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Lz4)).with_le_payload(le);
    let mut enc = BatchBinaryEncoder::new(codec, align).unwrap();
    let mut all = Vec::new();
    for i in 0..n {
        let mut e = embedding(i as u64, 96 + i % 5, 8, 2);
        if i % 3 == 0 {
            e.aux_data = Some(colbert_aux(i as u64)[..2000].to_vec());
        }
        enc.push(&e).unwrap();
        all.push(e);
    }
    enc.write_gds_file(&dir.join("b")).unwrap();
    all
}

#[test]
fn batch_round_trip_mmap_iter_and_alignment() {
    for (align, le) in [(4096, false), (64, true)] {
        let dir = tempfile::tempdir().unwrap();
        let want = write_batch(dir.path(), 23, align, le);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names.len(),
            2,
            "only b.cgeb and b.cgei, no temp files: {names:?}"
        );
        let r = BatchReader::open(&dir.path().join("b.cgeb")).unwrap();
        assert_eq!(r.len(), 23);
        assert_eq!(r.index().record_alignment, align);
        for (i, off) in r.index().offsets.iter().enumerate() {
            assert_eq!(off % u64::from(align), 0);
            assert!(want[i].same_content(&r.get(i).unwrap().to_owned().unwrap()));
        }
        for (got, w) in r.iter().zip(&want) {
            assert!(got.unwrap().to_owned().unwrap().same_content(w));
        }
        assert!(r.verify().is_ok());
        assert!(matches!(
            r.get(23),
            Err(FormatError::Cgeb(CgebError::IndexOutOfRange {
                index: 23,
                count: 23
            }))
        ));
    }
}

#[test]
fn finalize_matches_the_written_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = BatchBinaryEncoder::with_capacity(2);
    enc.push(&seed_embedding(1)).unwrap();
    enc.push(&seed_embedding(2)).unwrap();
    let (data_p, index_p) = enc.write_gds_file(&dir.path().join("x.anything")).unwrap();
    assert_eq!(
        (data_p.clone(), index_p),
        batch_paths(&dir.path().join("x"))
    );
    let (data, offsets) = enc.finalize();
    assert_eq!(offsets, vec![0, 8192]);
    assert_eq!(std::fs::read(data_p).unwrap(), data);
}

#[test]
fn o_direct_reads_decode_identically() {
    // Runs on the repository's filesystem (target dir), not /tmp, which may be tmpfs.
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    for (align, le) in [(4096, false), (64, true)] {
        let want = write_batch(dir.path(), 9, align, le);
        let mmap = BatchReader::open(&dir.path().join("b")).unwrap();
        let mut direct = match DirectReader::open(&dir.path().join("b"), true) {
            Ok(d) => d,
            Err(FormatError::Io { op, source, .. })
                if op == DIRECT_OPEN_OP && source.raw_os_error() == Some(22) =>
            {
                eprintln!("SKIPPED: this filesystem refuses O_DIRECT ({source})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(direct.len(), want.len());
        for (i, w) in want.iter().enumerate() {
            let a = mmap.get(i).unwrap();
            let b = direct.read(i).unwrap();
            assert_eq!(a.vector().as_bytes(), b.vector().as_bytes());
            assert_eq!(a.content_hash(), b.content_hash());
            assert!(b.to_owned().unwrap().same_content(w));
        }
    }
}

fn arb_embedding() -> impl Strategy<Value = (FusedEmbedding, u8, bool)> {
    (
        1usize..300,
        0usize..12,
        any::<u64>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 1..600)),
        0u8..4,
        any::<bool>(),
    )
        .prop_flat_map(|(dim, experts, lat, aux, comp, le)| {
            (
                proptest::collection::vec(any::<f32>(), dim),
                proptest::collection::vec(any::<f32>(), experts),
                proptest::collection::vec(0..experts.max(1) as u8, 0..=experts),
                Just((lat, aux, comp, le, experts)),
            )
        })
        .prop_map(
            |(vector, weights, mut sel, (lat, aux, comp, le, experts))| {
                if experts == 0 {
                    sel.clear();
                }
                let mut e = FusedEmbedding::new(vector, weights, sel);
                e.pipeline_latency_us = lat;
                e.aux_data = aux;
                (e, comp, le)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn prop_record_round_trip((e, comp, le) in arb_embedding()) {
        let codec = match comp {
            0 => EmbeddingBinaryCodec::new(),
            1 => EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::None)),
            2 => EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Lz4)),
            _ => EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Zstd)),
        }.with_le_payload(le);
        let bytes = codec.encode(&e).unwrap();
        prop_assert_eq!(bytes.len(), codec.serialized_size(&e));
        let back = codec.decode(&bytes).unwrap();
        let mut want = e.clone();
        if comp == 0 { want.aux_data = None; }
        prop_assert!(back.same_content(&want));
        // Trailing bytes after a record are ignored.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0xAB; 13]);
        prop_assert!(codec.decode(&longer).unwrap().same_content(&want));
    }

    #[test]
    fn prop_batch_offsets_aligned(n in 0usize..12, align_pow in 6u32..13) {
        let align = 1u32 << align_pow;
        let mut enc = BatchBinaryEncoder::new(EmbeddingBinaryCodec::new(), align).unwrap();
        let want: Vec<_> = (0..n).map(|i| embedding(i as u64, 10 + 37 * i, 4, 1)).collect();
        for e in &want { enc.push(e).unwrap(); }
        let index = enc.index().to_bytes();
        let (data, offsets) = enc.finalize();
        prop_assert!(offsets.iter().all(|o| o % u64::from(align) == 0));
        let r = BatchReader::from_bytes(data, &index, Default::default()).unwrap();
        prop_assert_eq!(r.len(), n);
        for (i, w) in want.iter().enumerate() {
            prop_assert!(r.get(i).unwrap().to_owned().unwrap().same_content(w));
        }
    }
}

#[test]
fn alignment_is_validated() {
    for bad in [0, 32, 100, 1 << 21] {
        assert!(BatchBinaryEncoder::new(EmbeddingBinaryCodec::new(), bad).is_err());
    }
    assert_eq!(layout::GDS_ALIGNMENT, 4096);
}
