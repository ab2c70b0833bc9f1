//! The batched, read-ahead load path (`stream_segments`, and `load_*` on files large
//! enough to start the read-ahead thread) against the per-chunk reference path
//! (`read_chunk_into`), bit for bit, and CRC failures found through it.

use std::ops::Range;

use proptest::prelude::*;
use tensorvault_formats::cvc::{pack, pack_to_vec, Compression, CvcReader, PackOptions, ReadAt};
use tensorvault_formats::FormatError;

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
        })
        .collect()
}

/// Rows `range` decoded chunk by chunk with `read_chunk_into`, the serial reference.
fn reference<S: ReadAt>(r: &CvcReader<S>, range: Range<u64>) -> Vec<f32> {
    let dim = r.dimension() as usize;
    let mut all = Vec::new();
    let mut scratch = Vec::new();
    for c in r.chunks() {
        let mut v = vec![0f32; c.rows as usize * dim];
        r.read_chunk_into(c.index, &mut v, &mut scratch).unwrap();
        all.extend(v);
    }
    all[range.start as usize * dim..range.end as usize * dim].to_vec()
}

fn streamed<S: ReadAt>(r: &CvcReader<S>, range: Range<u64>, batch: usize) -> Vec<f32> {
    let segs = r.segments_for_rows(std::slice::from_ref(&range));
    let mut got = Vec::new();
    r.stream_segments(&segs, batch, |v: &[f32]| {
        assert!(v.len() <= batch.max(r.dimension() as usize));
        got.extend_from_slice(v);
        Ok::<(), FormatError>(())
    })
    .unwrap();
    got
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn large_file_loads_match_the_chunk_path_for_every_source() {
    // 3 chunks of ~3 MiB of fp16 each: enough pieces for the read-ahead thread.
    let (rows, dim) = (6_000usize, 768usize);
    let x = values(rows * dim, 7);
    let dir = tempfile::tempdir().unwrap();
    for comp in [Compression::Fp16, Compression::Int8, Compression::Bf16] {
        let path = dir.path().join(format!("{}.cvc", comp.name()));
        let opts = PackOptions {
            compression: comp,
            chunk_size: 2_000,
            ..PackOptions::default()
        };
        pack(&path, &x, dim, &opts).unwrap();
        let file = CvcReader::open(&path).unwrap();
        let want = reference(&file, 0..rows as u64);
        let mapped = CvcReader::open_mmap(&path).unwrap();
        let bytes = CvcReader::from_source(std::fs::read(&path).unwrap(), "mem").unwrap();
        assert_eq!(
            bits(file.load_all().unwrap().as_slice::<f32>().unwrap()),
            bits(&want)
        );
        assert_eq!(
            bits(mapped.load_all().unwrap().as_slice::<f32>().unwrap()),
            bits(&want)
        );
        assert_eq!(
            bits(bytes.load_all().unwrap().as_slice::<f32>().unwrap()),
            bits(&want)
        );
        assert_eq!(bits(&streamed(&file, 0..rows as u64, 1 << 20)), bits(&want));
        assert_eq!(
            bits(&streamed(&mapped, 0..rows as u64, 777 * dim)),
            bits(&want)
        );
        let part = mapped.load_rows(1_999..4_001).unwrap();
        assert_eq!(
            bits(part.as_slice::<f32>().unwrap()),
            bits(&want[1_999 * dim..4_001 * dim])
        );
    }
}

#[test]
fn corrupt_chunk_is_reported_through_the_streaming_path() {
    let (rows, dim) = (6_000usize, 768usize);
    let x = values(rows * dim, 9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.cvc");
    let opts = PackOptions {
        compression: Compression::Fp16,
        chunk_size: 2_000,
        ..PackOptions::default()
    };
    pack(&path, &x, dim, &opts).unwrap();
    let r = CvcReader::open(&path).unwrap();
    let victim = r.chunks()[1].payload_offset + 12_345;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[victim as usize] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    {
        let reader = CvcReader::open(&path).unwrap();
        let err = reader.load_all().unwrap_err();
        assert!(matches!(err, FormatError::ChecksumMismatch { .. }), "{err}");
        let segs = reader.segments_for_rows(std::slice::from_ref(&(0..rows as u64)));
        let mut seen = 0usize;
        let err = reader
            .stream_segments(&segs, 500 * dim, |v: &[f32]| {
                seen += v.len();
                Ok::<(), FormatError>(())
            })
            .unwrap_err();
        assert!(matches!(err, FormatError::ChecksumMismatch { .. }), "{err}");
        // Chunk 1 ends at row 4000: its last batch never reached the sink.
        assert!(seen < 4_000 * dim, "{seen}");
        // A partial read of chunk 1 still hashes the whole chunk.
        assert!(reader.load_rows(2_100..2_200).is_err());
        assert!(reader.load_rows(0..2_000).is_ok());
    }
    let mapped = CvcReader::open_mmap(&path).unwrap();
    assert!(matches!(
        mapped.load_all().unwrap_err(),
        FormatError::ChecksumMismatch { .. }
    ));
}

#[test]
fn bad_segments_and_sink_errors() {
    let x = values(40 * 8, 3);
    let bytes = pack_to_vec(
        &x,
        8,
        &PackOptions {
            chunk_size: 16,
            ..PackOptions::default()
        },
    )
    .unwrap();
    let r = CvcReader::from_source(bytes, "mem").unwrap();
    let ok = |_: &[f32]| Ok::<(), FormatError>(());
    #[allow(
        clippy::reversed_empty_ranges,
        reason = "a reversed range is the bad input"
    )]
    let bad = [vec![(3usize, 0..1u64)], vec![(0, 0..17)], vec![(1, 5..4)]];
    for segs in bad {
        let err = r.stream_segments(&segs, 64, ok).unwrap_err();
        assert!(matches!(err, FormatError::InvalidArgument { .. }), "{err}");
    }
    let segs = r.segments_for_rows(std::slice::from_ref(&(0..40)));
    let mut calls = 0;
    let err = r
        .stream_segments(&segs, 64, |_: &[f32]| {
            calls += 1;
            Err(FormatError::InvalidArgument {
                name: "sink",
                reason: "stop".into(),
            })
        })
        .unwrap_err();
    assert!(matches!(
        err,
        FormatError::InvalidArgument { name: "sink", .. }
    ));
    assert_eq!(calls, 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any row range, any batch size, any chunking: the streamed values are the chunk
    /// path's, bit for bit, in order.
    #[test]
    fn streamed_rows_equal_the_chunk_path(
        rows in 1usize..300,
        dim in 1usize..40,
        chunk in 1u64..64,
        comp in prop_oneof![Just(Compression::Fp16), Just(Compression::Int8), Just(Compression::Bf16)],
        a in 0.0f64..1.0,
        b in 0.0f64..1.0,
        batch in 1usize..2_000,
        seed in any::<u64>(),
    ) {
        let x = values(rows * dim, seed);
        let opts = PackOptions { compression: comp, chunk_size: chunk, ..PackOptions::default() };
        let r = CvcReader::from_source(pack_to_vec(&x, dim, &opts).unwrap(), "mem").unwrap();
        let (lo, hi) = ((a * rows as f64) as u64, (b * rows as f64) as u64);
        let range = lo.min(hi)..lo.max(hi);
        let want = reference(&r, range.clone());
        prop_assert_eq!(bits(&streamed(&r, range.clone(), batch)), bits(&want));
        let loaded = r.load_rows(range).unwrap();
        prop_assert_eq!(bits(loaded.as_slice::<f32>().unwrap()), bits(&want));
    }
}
