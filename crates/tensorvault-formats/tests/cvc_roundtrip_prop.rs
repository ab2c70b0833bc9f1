//! Property tests of CVC round trips: random shapes, chunk sizes, compressions (fp16,
//! int8, bf16, int4 (v1.0 only), and per-chunk mixes), both framings and `mmap_optimized`, with values from
//! a finite range. Decoded values stay within each codec's rounding bound, partial and
//! streaming reads agree with the full load, and the streaming writer produces the same
//! bytes as `pack_to_vec`.

use proptest::prelude::*;
use tensorvault_formats::cvc::{
    pack_to_vec, ChunkCodec, Compression, CvcReader, CvcWriter, Framing, PackOptions,
};

#[derive(Debug, Clone)]
struct Case {
    rows: usize,
    dim: usize,
    values: Vec<f32>,
    opts_chunk_size: u64,
    compression: Compression,
    framing: Framing,
    mmap_optimized: bool,
    per_chunk: Option<Vec<Compression>>,
    /// A sub-range of rows to load (`lo <= hi <= rows`).
    sub: (u64, u64),
    /// Batch sizes (in rows) for the streaming writer, used cyclically.
    batches: Vec<usize>,
}

impl Case {
    fn opts(&self) -> PackOptions {
        PackOptions {
            compression: self.compression,
            chunk_size: self.opts_chunk_size,
            framing: self.framing,
            mmap_optimized: self.mmap_optimized,
            chunk_compression: self.per_chunk.clone(),
            ..Default::default()
        }
    }
}

fn compression() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::Fp16),
        Just(Compression::Int8),
        Just(Compression::Bf16),
        Just(Compression::Int4)
    ]
}

/// Finite values over many magnitudes: f16's normal range, its subnormals (below
/// 6.1e-5), zeros, and a repeated constant (constant int8 chunks).
fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => -1000.0f32..1000.0,
        2 => -1e-3f32..1e-3,
        1 => -1e-6f32..1e-6,
        1 => Just(0.0f32),
        1 => Just(0.25f32),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        0usize..300,
        1usize..40,
        prop_oneof![1u64..8, 8u64..400],
        compression(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(rows, dim, cs, comp, v0, mmap, mixed)| {
            let n_chunks = rows.div_ceil(cs as usize);
            let per_chunk = if mixed {
                proptest::option::of(proptest::collection::vec(compression(), n_chunks)).boxed()
            } else {
                Just(None).boxed()
            };
            (
                proptest::collection::vec(value(), rows * dim),
                per_chunk,
                0..=rows as u64,
                0..=rows as u64,
                proptest::collection::vec(0usize..=(2 * cs as usize + 1), 1..6),
            )
                .prop_map(move |(values, per_chunk, a, b, batches)| {
                    // int4 is a v1.0 extension: the legacy layout cannot hold it.
                    let legacy = |c: Compression| {
                        if v0 && c == Compression::Int4 {
                            Compression::Int8
                        } else {
                            c
                        }
                    };
                    Case {
                        rows,
                        dim,
                        values,
                        opts_chunk_size: cs,
                        compression: legacy(comp),
                        framing: if v0 { Framing::V0 } else { Framing::V1 },
                        mmap_optimized: mmap && !v0,
                        per_chunk: per_chunk.map(|v| v.into_iter().map(legacy).collect()),
                        sub: (a.min(b), a.max(b)),
                        batches,
                    }
                })
        })
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The largest error allowed for value `j` of `row` decoded through `codec`.
fn tolerance(codec: &ChunkCodec, row: &[f32], j: usize) -> f64 {
    let x = f64::from(row[j]).abs();
    match codec {
        // Round to nearest f16: half an ulp, 2^-11 relative in the normal range, and half
        // the subnormal spacing 2^-24 below it.
        ChunkCodec::Fp16 => x * 2f64.powi(-11) + 2f64.powi(-24),
        // bf16 keeps 8 significant bits: half an ulp is at most 2^-8 relative.
        ChunkCodec::Bf16 => x * 2f64.powi(-8) + 1e-38,
        // Half a step, plus a few f32 roundings (x - min, the division, q * scale, + min).
        ChunkCodec::Int8(p) => {
            let (min, scale) = (f64::from(p.min).abs(), f64::from(p.scale));
            0.5 * scale + 8.0 * f64::from(f32::EPSILON) * (min + 256.0 * scale)
        }
        // Half the row's step in normalised units, times the column's scale, plus the f32
        // roundings of normalising and decoding.
        ChunkCodec::Int4(cols) => {
            let z: Vec<f64> = row
                .iter()
                .zip(cols.offset().iter().zip(cols.scale()))
                .map(|(&v, (&o, &s))| (f64::from(v) - f64::from(o)) / f64::from(s))
                .collect();
            let lo = z.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let s = f64::from(cols.scale()[j]);
            let o = f64::from(cols.offset()[j]).abs();
            let eps = 8.0 * f64::from(f32::EPSILON);
            (0.5 * (hi - lo) / 15.0 + eps * (hi.abs() + lo.abs() + 1.0)) * s + eps * (x + o)
        }
    }
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let opts = case.opts();
    let dim = case.dim as u64;
    let bytes = pack_to_vec(&case.values, case.dim, &opts)
        .map_err(|e| TestCaseError::fail(format!("pack: {e}")))?;
    let r = CvcReader::from_source(bytes.clone(), "prop")
        .map_err(|e| TestCaseError::fail(format!("open: {e}")))?;
    prop_assert_eq!(r.num_vectors(), case.rows as u64);
    prop_assert_eq!(r.dimension(), dim);
    prop_assert_eq!(r.header().framing, case.framing);
    prop_assert_eq!(
        r.chunks().len(),
        case.rows.div_ceil(case.opts_chunk_size as usize)
    );
    if case.mmap_optimized {
        prop_assert!(r.chunks().iter().all(|c| c.frame_offset % 4096 == 0));
    }

    // Whole load: every value within its chunk codec's bound.
    let all = r.load_all().unwrap();
    prop_assert_eq!(all.shape().dims(), &[case.rows, case.dim]);
    let all = all.as_slice::<f32>().unwrap();
    for c in r.chunks() {
        let want = match &case.per_chunk {
            Some(v) => v[c.index],
            None => case.compression,
        };
        prop_assert_eq!(c.codec.compression(), want);
        let lo = (c.row_start * dim) as usize;
        let hi = ((c.row_start + c.rows) * dim) as usize;
        for (i, (&x, &d)) in (lo..hi).zip(case.values[lo..hi].iter().zip(&all[lo..hi])) {
            let err = (f64::from(d) - f64::from(x)).abs();
            let row = &case.values[i - i % case.dim..][..case.dim];
            let tol = tolerance(&c.codec, row, i % case.dim);
            prop_assert!(
                err <= tol,
                "value {} (chunk {}, {:?}): {} decoded as {}, error {:e} > {:e}",
                i,
                c.index,
                c.codec,
                x,
                d,
                err,
                tol
            );
        }
    }

    // A sub-range equals the slice of the full load.
    let (a, b) = case.sub;
    let part = r.load_rows(a..b).unwrap();
    prop_assert_eq!(part.shape().dims(), &[(b - a) as usize, case.dim]);
    prop_assert_eq!(
        bits(part.as_slice::<f32>().unwrap()),
        bits(&all[(a * dim) as usize..(b * dim) as usize])
    );

    // The chunk iterator, concatenated, equals the full load.
    let mut streamed = Vec::with_capacity(all.len());
    let mut next_row = 0;
    for (i, c) in r.iter_chunks().enumerate() {
        let c = c.unwrap();
        prop_assert_eq!((c.index, c.row_start), (i, next_row));
        next_row += c.rows;
        streamed.extend_from_slice(&c.values);
    }
    prop_assert_eq!(bits(&streamed), bits(all));
    prop_assert!(r.verify().unwrap().is_ok());

    // The streaming writer, fed in batches of random sizes, writes the same bytes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streamed.cvc");
    let mut w = CvcWriter::create(&path, case.dim, opts).unwrap();
    let mut row = 0;
    for &batch in case.batches.iter().cycle() {
        if row >= case.rows {
            break;
        }
        let end = (row + batch).min(case.rows);
        w.write_rows(&case.values[row * case.dim..end * case.dim])
            .unwrap();
        row = end;
        if batch == 0 && case.batches.iter().all(|&b| b == 0) {
            // Only empty batches: feed the rest in one go.
            w.write_rows(&case.values[row * case.dim..]).unwrap();
            row = case.rows;
        }
    }
    let summary = w.finish().unwrap();
    let written = std::fs::read(&path).unwrap();
    prop_assert_eq!(summary.bytes, written.len() as u64);
    prop_assert!(written == bytes, "streamed file differs from pack_to_vec");
    let from_file = CvcReader::open(&path).unwrap().load_all().unwrap();
    prop_assert_eq!(bits(from_file.as_slice::<f32>().unwrap()), bits(all));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_within_codec_bounds_and_streaming_matches(case in case()) {
        check(&case)?;
    }
}
