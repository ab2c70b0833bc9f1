//! The reference's own files (made by `decompressed` 2.1.1 and 0.1.0, see
//! `tests/fixtures/cvc/README.md`): every one decodes bit-exactly to its `*_decoded.npy`,
//! and re-encoding the inputs with the same options reproduces the files byte for byte.

use std::path::PathBuf;

use serde_json::json;
use tensorvault_formats::cvc::{
    pack, pack_to_vec, Compression, CvcReader, Framing, PackOptions, SectionSpec,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc")
        .join(name)
}

fn npy(name: &str) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(fixture(name)).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    (shape, f.into_vec::<f32>().unwrap())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

const DECODE_CASES: &[(&str, &str)] = &[
    ("a_fp16_cs300.cvc", "a_fp16_cs300_decoded.npy"),
    ("b_int8_cs300.cvc", "b_int8_cs300_decoded.npy"),
    ("c_tiny_fp16.cvc", "c_tiny_fp16_decoded.npy"),
    ("d_mixed_fp16_int8.cvc", "d_mixed_fp16_int8_decoded.npy"),
    (
        "e_legacy_v010_fp16_cs4.cvc",
        "e_legacy_v010_fp16_cs4_decoded.npy",
    ),
    (
        "e_legacy_v010_int8_cs4.cvc",
        "e_legacy_v010_int8_cs4_decoded.npy",
    ),
    ("f_int8_edge_cs4.cvc", "f_int8_edge_cs4_decoded.npy"),
    ("g_fp16_special.cvc", "g_fp16_special_decoded.npy"),
    ("h_chunk_metadata.cvc", "h_chunk_metadata_decoded.npy"),
    ("i_sections_int8.cvc", "i_sections_int8_decoded.npy"),
    (
        "j_mmap_optimized_fp16.cvc",
        "j_mmap_optimized_fp16_decoded.npy",
    ),
    // Same rows and codec as `e_legacy_v010_int8_cs4` (sections change only the header).
    (
        "k_legacy_v010_sections_int8.cvc",
        "e_legacy_v010_int8_cs4_decoded.npy",
    ),
];

#[test]
fn every_fixture_decodes_bit_exactly_through_every_source() {
    for (cvc, decoded) in DECODE_CASES {
        let (shape, want) = npy(decoded);
        let file = CvcReader::open(fixture(cvc)).unwrap_or_else(|e| panic!("{cvc}: {e}"));
        let mapped = CvcReader::open_mmap(fixture(cvc)).unwrap();
        let mem = CvcReader::from_source(std::fs::read(fixture(cvc)).unwrap(), *cvc).unwrap();
        for got in [file.load_all(), mapped.load_all(), mem.load_all()] {
            let got = got.unwrap();
            let dims: Vec<u64> = got.shape().dims().iter().map(|&d| d as u64).collect();
            assert_eq!(dims, shape, "{cvc}");
            assert_eq!(bits(got.as_slice::<f32>().unwrap()), bits(&want), "{cvc}");
        }
        // The streaming iterator yields the same values, chunk by chunk.
        let streamed: Vec<f32> = file.iter_chunks().flat_map(|c| c.unwrap().values).collect();
        assert_eq!(bits(&streamed), bits(&want), "{cvc} (streamed)");
        assert!(file.verify().unwrap().is_ok(), "{cvc}");
    }
}

#[test]
fn framings_are_detected() {
    let v1 = CvcReader::open(fixture("a_fp16_cs300.cvc")).unwrap();
    assert_eq!(v1.header().framing, Framing::V1);
    assert_eq!(v1.header().version, (1, 0));
    let v0 = CvcReader::open(fixture("e_legacy_v010_int8_cs4.cvc")).unwrap();
    assert_eq!(v0.header().framing, Framing::V0);
    assert!(v0.chunks().iter().all(|c| c.crc.is_none()));
    // The legacy file stores an unrounded f64 scale; decoding uses it rounded to f32.
    assert_eq!(
        v0.header().chunks[0].int8.unwrap().scale,
        0.018260685135336484
    );
}

#[test]
fn section_and_metadata_filters_match_the_reference() {
    let r = CvcReader::open(fixture("i_sections_int8.cvc")).unwrap();
    let (_, want) = npy("i_sections_int8_arxiv_decoded.npy");
    let got = r.load_section("source", &json!("arxiv")).unwrap();
    assert_eq!(got.shape().dims(), &[7, 3]);
    assert_eq!(bits(got.as_slice::<f32>().unwrap()), bits(&want));

    let h = CvcReader::open(fixture("h_chunk_metadata.cvc")).unwrap();
    assert_eq!(
        h.chunks_where_metadata("source", &json!("wiki")),
        vec![0, 2]
    );
    let wiki = h.load_where_metadata("source", &json!("wiki")).unwrap();
    let (_, all) = npy("h_chunk_metadata_decoded.npy");
    let mut want = all[..12].to_vec();
    want.extend_from_slice(&all[24..30]);
    assert_eq!(bits(wiki.as_slice::<f32>().unwrap()), bits(&want));
    assert_eq!(
        h.header().chunks[0].metadata,
        Some(json!({"source": "wiki", "lang": "fr\u{e9}"}))
    );
}

#[test]
fn row_ranges_match_the_full_load() {
    let r = CvcReader::open(fixture("b_int8_cs300.cvc")).unwrap();
    let all = r.load_all().unwrap();
    let all = all.as_slice::<f32>().unwrap();
    for (a, b) in [
        (0u64, 0u64),
        (0, 1),
        (299, 301),
        (250, 950),
        (900, 1000),
        (0, 1000),
    ] {
        let got = r.load_rows(a..b).unwrap();
        assert_eq!(
            got.as_slice::<f32>().unwrap(),
            &all[(a * 768) as usize..(b * 768) as usize],
            "{a}..{b}"
        );
    }
    assert!(r.load_rows(10..1001).is_err());
}

fn reencode(input: &str, opts: &PackOptions) -> Vec<u8> {
    let (shape, x) = npy(input);
    pack_to_vec(&x, shape[1] as usize, opts).unwrap()
}

/// The reference's exact bytes: these tests reproduce its files, so no header checksum.
fn exact() -> PackOptions {
    PackOptions {
        reference_exact: true,
        ..PackOptions::default()
    }
}

fn assert_same_bytes(got: &[u8], fixture_name: &str) {
    let want = std::fs::read(fixture(fixture_name)).unwrap();
    if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!("{fixture_name}: first differing byte at offset {i}");
    }
    assert_eq!(got.len(), want.len(), "{fixture_name}: length");
}

#[test]
fn reencoding_reproduces_the_reference_bytes() {
    let fp16 = |cs| PackOptions {
        chunk_size: cs,
        ..exact()
    };
    let int8 = |cs| PackOptions {
        compression: Compression::Int8,
        chunk_size: cs,
        ..exact()
    };
    assert_same_bytes(
        &reencode("vectors_1000x768_f32.npy", &fp16(300)),
        "a_fp16_cs300.cvc",
    );
    assert_same_bytes(
        &reencode("vectors_1000x768_f32.npy", &int8(300)),
        "b_int8_cs300.cvc",
    );
    assert_same_bytes(
        &reencode("c_tiny_10x3_f32.npy", &exact()),
        "c_tiny_fp16.cvc",
    );
    assert_same_bytes(
        &reencode("f_int8_edge_9x3_f32.npy", &int8(4)),
        "f_int8_edge_cs4.cvc",
    );
    assert_same_bytes(
        &reencode("g_fp16_special_1x16_f32.npy", &exact()),
        "g_fp16_special.cvc",
    );
}

#[test]
fn reencoding_reproduces_the_extended_reference_files() {
    // Mixed chunks (d), chunk metadata (h), sections (i), mmap_optimized (j), legacy v0 (e).
    let mixed = PackOptions {
        chunk_size: 4,
        chunk_compression: Some(vec![
            Compression::Fp16,
            Compression::Int8,
            Compression::Fp16,
        ]),
        ..exact()
    };
    assert_same_bytes(
        &reencode("d_mixed_10x8_f32.npy", &mixed),
        "d_mixed_fp16_int8.cvc",
    );
    let meta = PackOptions {
        chunk_size: 4,
        chunk_metadata: Some(vec![
            json!({"source": "wiki", "lang": "fr\u{e9}"}),
            json!({"source": "arxiv"}),
            json!({"source": "wiki", "n": 3}),
        ]),
        ..exact()
    };
    assert_same_bytes(
        &reencode("c_tiny_10x3_f32.npy", &meta),
        "h_chunk_metadata.cvc",
    );
    let sections = PackOptions {
        compression: Compression::Int8,
        chunk_size: 4,
        sections: Some(vec![
            SectionSpec {
                rows: 3,
                metadata: json!({"source": "wikipedia"}),
            },
            SectionSpec {
                rows: 7,
                metadata: json!({"source": "arxiv"}),
            },
        ]),
        ..exact()
    };
    assert_same_bytes(
        &reencode("c_tiny_10x3_f32.npy", &sections),
        "i_sections_int8.cvc",
    );
    let mmap = PackOptions {
        chunk_size: 4,
        mmap_optimized: true,
        ..exact()
    };
    assert_same_bytes(
        &reencode("c_tiny_10x3_f32.npy", &mmap),
        "j_mmap_optimized_fp16.cvc",
    );
    let v0_sections = PackOptions {
        framing: Framing::V0,
        ..sections
    };
    assert_same_bytes(
        &reencode("c_tiny_10x3_f32.npy", &v0_sections),
        "k_legacy_v010_sections_int8.cvc",
    );
    for (comp, name) in [
        (Compression::Fp16, "e_legacy_v010_fp16_cs4.cvc"),
        (Compression::Int8, "e_legacy_v010_int8_cs4.cvc"),
    ] {
        let v0 = PackOptions {
            compression: comp,
            chunk_size: 4,
            framing: Framing::V0,
            ..exact()
        };
        assert_same_bytes(&reencode("c_tiny_10x3_f32.npy", &v0), name);
    }
}

#[test]
fn streaming_writer_matches_one_shot_pack() {
    let (shape, x) = npy("vectors_1000x768_f32.npy");
    let dim = shape[1] as usize;
    let dir = tempfile::tempdir().unwrap();
    for (k, opts) in [
        PackOptions {
            compression: Compression::Int8,
            chunk_size: 300,
            ..exact()
        },
        PackOptions {
            chunk_size: 128,
            mmap_optimized: true,
            ..exact()
        },
    ]
    .into_iter()
    .enumerate()
    {
        let one = dir.path().join("one.cvc");
        let streamed = dir.path().join("streamed.cvc");
        pack(&one, &x, dim, &opts).unwrap();
        let mut w =
            tensorvault_formats::cvc::CvcWriter::create(&streamed, dim, opts.clone()).unwrap();
        // Batches of 77 rows: never aligned with the chunk size.
        for batch in x.chunks(77 * dim) {
            w.write_rows(batch).unwrap();
        }
        let summary = w.finish().unwrap();
        let a = std::fs::read(&one).unwrap();
        assert_eq!(a, std::fs::read(&streamed).unwrap());
        assert_eq!(summary.bytes, a.len() as u64);
        // Nothing but the two outputs is left in the directory (no temp or spill files).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        if k == 0 {
            assert_same_bytes(&a, "b_int8_cs300.cvc");
        } else {
            let r = CvcReader::open(&streamed).unwrap();
            assert!(r.chunks().iter().all(|c| c.frame_offset % 4096 == 0));
            assert_eq!(
                r.load_all().unwrap().as_slice::<f32>().unwrap().len(),
                x.len()
            );
        }
    }
}

/// By default our v1.0 files carry the header checksum as one extra last member: the
/// header is the reference's plus that member, the payloads are identical, both read back
/// the same, and any bit flip in the sealed header is an error, never silent.
#[test]
fn default_files_add_a_header_checksum_to_the_reference_bytes() {
    use tensorvault_formats::cvc::header_crc;
    let (shape, x) = npy("d_mixed_10x8_f32.npy");
    let dim = shape[1] as usize;
    let opts = PackOptions {
        compression: Compression::Int8,
        chunk_size: 5,
        ..PackOptions::default()
    };
    let sealed = pack_to_vec(&x, dim, &opts).unwrap();
    let plain = pack_to_vec(
        &x,
        dim,
        &PackOptions {
            reference_exact: true,
            ..opts.clone()
        },
    )
    .unwrap();
    assert_eq!(sealed.len(), plain.len() + header_crc::SEAL_LEN);
    let dir = tempfile::tempdir().unwrap();
    let read = |bytes: &[u8]| {
        let p = dir.path().join("f.cvc");
        std::fs::write(&p, bytes).unwrap();
        CvcReader::open(&p).and_then(|r| Ok((r.header().header_crc, r.load_all()?)))
    };
    let (crc, a) = read(&sealed).unwrap();
    let (no_crc, b) = read(&plain).unwrap();
    assert!(crc && !no_crc);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let json_len = u32::from_le_bytes(sealed[8..12].try_into().unwrap()) as usize;
    let mut silent = 0;
    for bit in 0..json_len * 8 {
        let mut b = sealed.clone();
        b[12 + bit / 8] ^= 1 << (bit % 8);
        if read(&b).is_ok() {
            silent += 1;
        }
    }
    assert_eq!(silent, 0, "header bit flips that loaded without an error");
}

/// A header of millions of tiny values (here 3M empty chunk objects in 9 MB) is refused
/// by its value count before a JSON tree is built (it used to cost ~100 bytes a value).
#[test]
fn headers_with_too_many_values_are_refused_before_parsing() {
    let n = 3_000_000usize;
    let mut json = b"{\"chunks\":[".to_vec();
    for i in 0..n {
        json.extend_from_slice(if i + 1 < n { b"{}," } else { b"{}" });
    }
    json.extend_from_slice(b"],\"compression\":\"fp16\",\"dimension\":1,\"num_vectors\":0}");
    let mut file = b"CVCF".to_vec();
    file.extend_from_slice(&1u16.to_le_bytes());
    file.extend_from_slice(&0u16.to_le_bytes());
    file.extend_from_slice(&(json.len() as u32).to_le_bytes());
    file.extend_from_slice(&json);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("many.cvc");
    std::fs::write(&p, &file).unwrap();
    let t = std::time::Instant::now();
    match CvcReader::open(&p) {
        Err(tensorvault_formats::FormatError::InvalidField { field, reason, .. }) => {
            assert_eq!(field, "header");
            assert!(reason.contains("JSON values"), "{reason}");
        }
        other => panic!("expected InvalidField header, got {:?}", other.map(|_| ())),
    }
    assert!(t.elapsed().as_secs() < 5);
}
