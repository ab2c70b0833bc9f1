//! Crafted bad inputs, part 2: chunk frames, payloads and CRCs, plus the writers' own
//! input checks (bad values and options are refused with typed errors, and a failed write
//! leaves nothing behind). Part 1 (`cvc_bad_header.rs`) covers the prefix and JSON header.

#[macro_use]
mod common;
use common::*;

#[test]
fn more_frames_than_listed_chunks_is_trailing_bytes() {
    let good = fixture_bytes(MIXED);
    let b = with_json(&good, |v| {
        v["chunks"].as_array_mut().unwrap().pop();
        v["num_vectors"] = json!(8);
    });
    let f = frames(&b);
    assert_eq!(f.len(), 3);
    assert_err!(
        reject(&b),
        FormatError::TrailingBytes { offset, count, .. } if *offset == f[2].offset && *count == 8 + 2 * 8 * 2
    );
    // Header with no chunks at all, frames still there.
    let b = with_json(&good, |v| {
        v["chunks"] = json!([]);
        v["num_vectors"] = json!(0);
    });
    let f = frames(&b);
    assert_err!(
        reject(&b),
        FormatError::TrailingBytes { offset, count, .. }
            if *offset == f[0].offset && *count == b.len() as u64 - f[0].offset
    );
}

#[test]
fn fewer_frames_than_listed_chunks_is_truncated() {
    let good = fixture_bytes(MIXED);
    // The header lists a fourth chunk (1 fp16 row) that is not there.
    let b = with_json(&good, |v| {
        v["chunks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"compression": "fp16", "rows": 1}));
        v["num_vectors"] = json!(11);
    });
    let len = b.len() as u64;
    assert_err!(
        reject(&b),
        FormatError::Truncated { what, offset, end, file_len, .. }
            if what.contains("chunk 3") && *offset == len && *end == len + 8 + 16 && *file_len == len
    );
    // A zero-row chunk still needs its frame prefix.
    let b = with_json(&good, |v| {
        v["chunks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"compression": "fp16", "rows": 0}));
    });
    let len = b.len() as u64;
    assert_err!(
        reject(&b),
        FormatError::Truncated { what, offset, end, .. }
            if what.contains("chunk 3") && *offset == len && *end == len + 8
    );
}

#[test]
fn truncation_exactly_at_a_chunk_boundary() {
    for name in [MIXED, LEGACY_INT8] {
        let good = fixture_bytes(name);
        let prefix = if split(&good).framing == Framing::V1 {
            8
        } else {
            4
        };
        for (i, f) in frames(&good).iter().enumerate() {
            let cut = f.offset as usize;
            assert_err!(
                reject(&good[..cut]),
                FormatError::Truncated { what, offset, end, file_len, .. }
                    if what.contains(&format!("chunk {i} ")) && *offset == f.offset
                        && *end == f.offset + prefix + f.len && *file_len == f.offset
            );
        }
    }
}

#[test]
fn every_proper_prefix_of_a_file_is_truncated() {
    for name in [
        TINY,
        MIXED,
        LEGACY_INT8,
        LEGACY_FP16,
        "f_int8_edge_cs4.cvc",
        "i_sections_int8.cvc",
    ] {
        let good = fixture_bytes(name);
        accept(&good);
        for n in 0..good.len() {
            let e = CvcReader::from_source(good[..n].to_vec(), name).unwrap_err();
            if n < 4 {
                assert_err!(e, FormatError::BadMagic { .. });
            } else {
                assert_err!(e, FormatError::Truncated { file_len, .. } if *file_len == n as u64);
            }
        }
    }
    // Inside a frame prefix and inside a payload, through a real file.
    let good = fixture_bytes(MIXED);
    let f = frames(&good)[1];
    for cut in [f.offset + 3, f.offset + 7, f.payload + 5] {
        assert_err!(
            reject(&good[..cut as usize]),
            FormatError::Truncated { what, offset, file_len, .. }
                if what.contains("chunk 1 ") && *offset == f.offset && *file_len == cut
        );
    }
}

#[test]
fn chunk_rows_past_end_of_file_is_truncated() {
    let good = fixture_bytes(MIXED);
    // The last chunk claims one more row than its frame holds.
    let b = with_json(&good, |v| {
        v["chunks"][2]["rows"] = json!(3);
        v["num_vectors"] = json!(11);
    });
    let f = frames(&b)[2];
    assert_err!(
        reject(&b),
        FormatError::Truncated { what, offset, end, file_len, .. }
            if what.contains("chunk 2") && *offset == f.offset && *end == f.payload + 3 * 8 * 2
                && *file_len == b.len() as u64
    );
    // The last frame's stored length points past the end of the file.
    let mut b = good.clone();
    let f = frames(&good)[2];
    put_u32(&mut b, f.offset as usize, 1000);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { what, offset, expected: 32, found: 1000, .. }
            if what.contains("chunk 2") && *offset == f.offset
    );
}

#[test]
fn stored_payload_length_different_from_rows_x_dim_x_width() {
    let good = fixture_bytes(MIXED);
    let f = frames(&good);
    // The stored u32 length is one byte short.
    let mut b = good.clone();
    put_u32(&mut b, f[0].offset as usize, 63);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { offset, expected: 64, found: 63, .. } if *offset == f[0].offset
    );
    // The header's dimension is wrong: chunk 0 should hold 4 x 4 x 2 bytes.
    let b = with_json(&good, |v| v["dimension"] = json!(4));
    let f = frames(&b);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { what, offset, expected: 32, found: 64, .. }
            if what.contains("chunk 0") && *offset == f[0].offset
    );
    // The header's compression for chunk 1 has the wrong width (fp16 instead of int8).
    let b = with_json(&good, |v| v["chunks"][1]["compression"] = json!("fp16"));
    let f = frames(&b);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { what, offset, expected: 64, found: 32, .. }
            if what.contains("chunk 1") && *offset == f[1].offset
    );
    // Legacy v0: a length field that is off by one.
    let good = fixture_bytes(LEGACY_FP16);
    let f = frames(&good);
    let mut b = good.clone();
    put_u32(&mut b, f[1].offset as usize, 25);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { offset, expected: 24, found: 25, .. } if *offset == f[1].offset
    );
}

#[test]
fn rows_sum_different_from_num_vectors() {
    let good = fixture_bytes(MIXED);
    for (nv, found) in [(9u64, 10u64), (11, 10), (0, 10)] {
        let b = with_json(&good, |v| v["num_vectors"] = json!(nv));
        assert_err!(
            reject(&b),
            FormatError::CountMismatch { what, expected, found: f, .. }
                if what.contains("num_vectors") && *expected == nv && *f == found
        );
    }
    // A chunk with fewer rows, num_vectors unchanged.
    let b = with_json(&good, |v| v["chunks"][0]["rows"] = json!(3));
    assert_err!(
        reject(&b),
        FormatError::CountMismatch {
            expected: 10,
            found: 9,
            ..
        }
    );
}

#[test]
fn file_offset_outside_the_file() {
    let good = fixture_bytes(TINY);
    let set = |off: u64| with_json(&good, move |v| v["chunks"][0]["file_offset"] = json!(off));
    // File offsets of three digits keep the file length fixed: find it first.
    let len = set(100).len() as u64;
    assert!((100..1000).contains(&len));
    let json_end = 12 + u64::from(u32_at(&set(100), 8));
    for off in [len, len + 1, 999] {
        assert_err!(
            reject(&set(off)),
            FormatError::InvalidField { field, offset: 12, reason, .. }
                if field == "chunks[0].file_offset" && reason.contains("outside")
        );
    }
    // Much larger (the file grows by the extra digits, still far outside).
    assert_err!(
        reject(&set(u64::MAX)),
        FormatError::InvalidField { field, .. } if field == "chunks[0].file_offset"
    );
    // Inside the file, but the frame does not fit.
    assert_err!(
        reject(&set(len - 1)),
        FormatError::Truncated { what, offset, .. } if what.contains("chunk 0") && *offset == len - 1
    );
    // Control: the offset where the frame really is.
    let (r, _dir) = accept(&set(json_end));
    assert_eq!(r.chunks()[0].frame_offset, json_end);
    assert_eq!(load_bits(&r), load_bits(&accept(&good).0));
}

#[test]
fn file_offset_overlapping_the_header() {
    let good = fixture_bytes(TINY);
    let set = |off: u64| with_json(&good, move |v| v["chunks"][0]["file_offset"] = json!(off));
    let json_end = 12 + u64::from(u32_at(&set(100), 8));
    for off in [0, 4, 12, 100, json_end - 1] {
        assert_err!(
            reject(&set(off)),
            FormatError::InvalidField { field, offset: 12, reason, .. }
                if field == "chunks[0].file_offset" && reason.contains("overlaps")
        );
    }
    // A chunk whose frame overlaps the previous chunk's.
    let mixed = fixture_bytes(MIXED);
    let set1 = |off: u64| with_json(&mixed, move |v| v["chunks"][1]["file_offset"] = json!(off));
    let f = frames(&set1(100));
    assert_err!(
        reject(&set1(f[1].offset - 1)),
        FormatError::InvalidField { field, reason, .. }
            if field == "chunks[1].file_offset" && reason.contains("overlaps")
    );
    accept(&set1(f[1].offset));
}

#[test]
fn trailing_garbage_is_refused() {
    for (name, extra) in [
        (TINY, &b"garbage"[..]),
        (LEGACY_INT8, &b"\0"[..]),
        ("j_mmap_optimized_fp16.cvc", &[0u8; 4096][..]),
        (MIXED, &b"CVCF"[..]),
    ] {
        let mut b = fixture_bytes(name);
        let len = b.len() as u64;
        b.extend_from_slice(extra);
        assert_err!(
            reject(&b),
            FormatError::TrailingBytes { offset, count, .. } if *offset == len && *count == extra.len() as u64
        );
    }
}

// ---------------------------------------------------------------------------------------
// Checksums.

#[test]
fn crc_mismatch_names_the_chunk_and_other_chunks_still_load() {
    let values: Vec<f32> = (0..80).map(|i| (i as f32 - 40.0) * 0.37).collect();
    let opts = PackOptions {
        chunk_size: 4,
        ..Default::default()
    };
    let good = pack_to_vec(&values, 8, &opts).unwrap();
    let f = frames(&good);
    assert_eq!(f.len(), 3);
    let stored = u32_at(&good, f[1].offset as usize + 4);
    let (ok, _dir0) = accept(&good);
    let want = load_bits(&ok);

    // One flipped bit in chunk 1's payload.
    let mut bad = good.clone();
    bad[f[1].payload as usize + 10] ^= 0x04;
    let computed = crc32fast::hash(&bad[f[1].payload as usize..(f[1].payload + f[1].len) as usize]);
    assert_ne!(stored, computed);
    let (r, _dir) = accept(&bad);
    let mem = CvcReader::from_source(bad.clone(), "mem").unwrap();
    let is_chunk1 = |e: &FormatError| {
        matches!(e, FormatError::ChecksumMismatch { what, offset, stored: s, computed: c, .. }
            if what == "chunk 1 payload" && *offset == f[1].payload
                && *s == u64::from(stored) && *c == u64::from(computed))
    };
    for e in [r.load_all().unwrap_err(), mem.load_all().unwrap_err()] {
        assert!(is_chunk1(&e), "{e:?}");
    }
    // verify() reports exactly that chunk.
    let report = r.verify().unwrap();
    assert_eq!((report.chunks, report.checksummed), (3, 3));
    assert_eq!(
        report.corrupt,
        vec![CorruptChunk {
            index: 1,
            rows: 4..8,
            payload_offset: f[1].payload,
            stored,
            computed
        }]
    );
    assert_eq!(mem.verify().unwrap(), report);
    // Rows in the other chunks still load, bit-exactly.
    let row = 8; // values per row
    for range in [0..4u64, 8..10, 0..2, 9..10] {
        let got = r.load_rows(range.clone()).unwrap();
        let (a, b) = (range.start as usize * row, range.end as usize * row);
        assert_eq!(
            bits(got.as_slice::<f32>().unwrap()),
            want[a..b],
            "{range:?}"
        );
    }
    assert_eq!(r.load_chunks(&[2, 0]).unwrap().shape().dims(), &[6, 8]);
    // Any row of chunk 1, even a partial range, is refused.
    for range in [4..5u64, 3..5, 7..9, 0..10] {
        let e = r.load_rows(range.clone()).unwrap_err();
        assert!(is_chunk1(&e), "{range:?}: {e:?}");
    }
    let items: Vec<_> = r.iter_chunks().collect();
    assert!(items[0].is_ok() && items[2].is_ok());
    assert!(is_chunk1(items[1].as_ref().unwrap_err()));
    // With checksums off, the flipped bit decodes: exactly one value differs.
    let unchecked = load_bits(&r.with_checksums(false));
    let diffs: Vec<usize> = (0..want.len())
        .filter(|&i| want[i] != unchecked[i])
        .collect();
    assert_eq!(diffs, vec![4 * row + 5]);

    // A flipped bit in the stored CRC itself.
    let mut bad = good.clone();
    bad[f[2].offset as usize + 4] ^= 0x80;
    let (r, _dir2) = accept(&bad);
    assert_err!(
        r.load_all().unwrap_err(),
        FormatError::ChecksumMismatch { what, offset, stored: s, .. }
            if what == "chunk 2 payload" && *offset == f[2].payload
                && *s == u64::from(u32_at(&bad, f[2].offset as usize + 4))
    );
    assert_eq!(
        r.verify()
            .unwrap()
            .corrupt
            .iter()
            .map(|c| c.index)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert!(r.load_rows(0..8).is_ok());
}

#[test]
fn legacy_v0_files_have_no_checksum_to_fail() {
    // Documents the limitation: the legacy framing has no CRC, so a flipped payload bit
    // is not detected.
    let good = fixture_bytes(LEGACY_FP16);
    let f = frames(&good);
    let mut b = good.clone();
    b[f[1].payload as usize] ^= 0x01;
    let (r, _dir) = accept(&b);
    assert_ne!(load_bits(&r), load_bits(&accept(&good).0));
    let report = r.verify().unwrap();
    assert!(report.is_ok());
    assert_eq!((report.chunks, report.checksummed), (3, 0));
}

// ---------------------------------------------------------------------------------------
// Writer-side bad input.

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32).sin() * 3.0).collect()
}

fn int8_cs4(framing: Framing) -> PackOptions {
    PackOptions {
        compression: Compression::Int8,
        chunk_size: 4,
        framing,
        ..Default::default()
    }
}

#[test]
fn nan_in_an_int8_chunk_is_a_codec_error_naming_the_index() {
    for framing in [Framing::V1, Framing::V0] {
        let opts = int8_cs4(framing);
        // Row 5, column 2 is in chunk 1 (rows 4..8) at index (5 - 4) * 3 + 2 = 5.
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut v = ramp(30);
            v[5 * 3 + 2] = bad;
            assert_err!(
                pack_to_vec(&v, 3, &opts).unwrap_err(),
                FormatError::Codec { context, source: QuantError::NonFinite { index: 5, .. } }
                    if context == "chunk 1 (rows 4..8)"
            );
        }
        // In the last, partial chunk (rows 8..10).
        let mut v = ramp(30);
        v[9 * 3] = f32::NAN;
        assert_err!(
            pack_to_vec(&v, 3, &opts).unwrap_err(),
            FormatError::Codec { context, source: QuantError::NonFinite { index: 3, .. } }
                if context == "chunk 2 (rows 8..10)"
        );
        // The streaming writer reports the same error when the chunk is encoded.
        let dir = tempfile::tempdir().unwrap();
        let mut w = CvcWriter::create(dir.path().join("s.cvc"), 3, opts.clone()).unwrap();
        w.write_rows(&v[..12]).unwrap();
        w.write_rows(&v[12..27]).unwrap();
        w.write_rows(&v[27..]).unwrap();
        assert_err!(
            w.finish().unwrap_err(),
            FormatError::Codec { context, source: QuantError::NonFinite { index: 3, .. } }
                if context == "chunk 2 (rows 8..10)"
        );
    }
    // Control: NaN is representable in fp16, so an fp16 chunk takes it.
    let mut v = ramp(30);
    v[7] = f32::NAN;
    assert!(pack_to_vec(
        &v,
        3,
        &PackOptions {
            chunk_size: 4,
            ..Default::default()
        }
    )
    .is_ok());
}

#[test]
fn chunk_metadata_and_compression_lists_must_match_the_chunk_count() {
    let v = ramp(30); // 10 rows of 3 -> 3 chunks of 4, 4, 2
    for n in [0usize, 2, 4] {
        let opts = PackOptions {
            chunk_size: 4,
            chunk_metadata: Some(vec![json!({"k": 1}); n]),
            ..Default::default()
        };
        assert_err!(
            pack_to_vec(&v, 3, &opts).unwrap_err(),
            FormatError::InvalidArgument {
                name: "chunk_metadata",
                ..
            }
        );
        let opts = PackOptions {
            chunk_size: 4,
            chunk_compression: Some(vec![Compression::Int8; n]),
            ..Default::default()
        };
        assert_err!(
            pack_to_vec(&v, 3, &opts).unwrap_err(),
            FormatError::InvalidArgument {
                name: "chunk_compression",
                ..
            }
        );
    }
    // Control: exactly three entries.
    let opts = PackOptions {
        chunk_size: 4,
        chunk_metadata: Some(vec![json!(1), json!(2), json!(3)]),
        ..Default::default()
    };
    assert!(pack_to_vec(&v, 3, &opts).is_ok());
    // Sections that do not add up to the rows.
    let opts = PackOptions {
        sections: Some(vec![SectionSpec {
            rows: 4,
            metadata: json!({}),
        }]),
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&v, 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "sections",
            ..
        }
    );
}

#[test]
fn values_must_be_a_whole_number_of_rows() {
    let opts = PackOptions::default();
    assert_err!(
        pack_to_vec(&ramp(10), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument { name: "vectors", reason } if reason.contains("10 values")
    );
    assert_err!(
        pack_to_vec(&ramp(10), 0, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "dimension",
            ..
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let mut w = CvcWriter::create(dir.path().join("w.cvc"), 3, opts.clone()).unwrap();
    assert_err!(
        w.write_rows(&ramp(4)).unwrap_err(),
        FormatError::InvalidArgument {
            name: "vectors",
            ..
        }
    );
    assert_err!(
        w.write_chunk(&ramp(5), None, None).unwrap_err(),
        FormatError::InvalidArgument {
            name: "vectors",
            ..
        }
    );
    assert_err!(
        CvcWriter::create(dir.path().join("z.cvc"), 0, opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "dimension",
            ..
        }
    );
}

#[test]
fn chunk_size_zero_is_refused() {
    let opts = PackOptions {
        chunk_size: 0,
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&ramp(9), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_size",
            ..
        }
    );
    // Even with no rows at all.
    assert_err!(
        pack_to_vec(&[], 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_size",
            ..
        }
    );
    let dir = tempfile::tempdir().unwrap();
    assert_err!(
        CvcWriter::create(dir.path().join("w.cvc"), 3, opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_size",
            ..
        }
    );
    assert_eq!(listing(dir.path()), Vec::<String>::new());
}

#[test]
fn mmap_optimized_with_v0_framing_is_refused() {
    let opts = PackOptions {
        mmap_optimized: true,
        framing: Framing::V0,
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&ramp(9), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "mmap_optimized",
            ..
        }
    );
    let dir = tempfile::tempdir().unwrap();
    assert_err!(
        CvcWriter::create(dir.path().join("w.cvc"), 3, opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "mmap_optimized",
            ..
        }
    );
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn failed_pack_leaves_no_file_and_keeps_an_existing_destination() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.cvc");
    let mut nan = ramp(30);
    nan[20] = f32::NAN;
    let failing: Vec<(Vec<f32>, PackOptions)> = vec![
        (nan.clone(), int8_cs4(Framing::V1)),
        (
            ramp(30),
            PackOptions {
                chunk_size: 0,
                ..Default::default()
            },
        ),
        (ramp(31), PackOptions::default()),
        (
            ramp(30),
            PackOptions {
                chunk_size: 4,
                chunk_metadata: Some(vec![json!(1)]),
                ..Default::default()
            },
        ),
    ];
    // No destination yet: nothing at all is left behind.
    for (v, opts) in &failing {
        assert!(pack(&dest, v, 3, opts).is_err());
        assert_eq!(listing(dir.path()), Vec::<String>::new(), "{opts:?}");
    }
    // An existing destination is untouched.
    std::fs::write(&dest, b"precious").unwrap();
    for (v, opts) in &failing {
        assert!(pack(&dest, v, 3, opts).is_err());
        assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
        assert_eq!(std::fs::read(&dest).unwrap(), b"precious");
    }
    // Control: a successful pack replaces it and leaves only it.
    pack(&dest, &ramp(30), 3, &int8_cs4(Framing::V1)).unwrap();
    assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
    assert_ne!(std::fs::read(&dest).unwrap(), b"precious");
}

#[test]
fn failed_streaming_write_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.cvc");
    std::fs::write(&dest, b"precious").unwrap();
    let mut nan = ramp(30);
    nan[20] = f32::NAN;

    // Fails in write_rows (chunk 1 fills); the writer is then dropped.
    let mut w = CvcWriter::create(&dest, 3, int8_cs4(Framing::V1)).unwrap();
    assert_eq!(
        listing(dir.path()).len(),
        2,
        "a temporary file exists while writing"
    );
    assert_err!(
        w.write_rows(&nan).unwrap_err(),
        FormatError::Codec { context, source: QuantError::NonFinite { index: 8, .. } }
            if context == "chunk 1 (rows 4..8)"
    );
    drop(w);
    assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
    assert_eq!(std::fs::read(&dest).unwrap(), b"precious");

    // Fails in finish (the metadata list does not match the chunks written).
    let opts = PackOptions {
        chunk_size: 4,
        chunk_metadata: Some(vec![json!(1), json!(2), json!(3), json!(4)]),
        ..Default::default()
    };
    let mut w = CvcWriter::create(&dest, 3, opts).unwrap();
    w.write_rows(&ramp(30)).unwrap();
    assert_err!(
        w.finish().unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_metadata",
            ..
        }
    );
    assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
    assert_eq!(std::fs::read(&dest).unwrap(), b"precious");
}
