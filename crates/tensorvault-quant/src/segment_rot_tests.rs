use super::*;
use crate::metrics::ErrorMetrics;
use proptest::prelude::*;

fn rel_rmse(x: &[f32], y: &[f32]) -> Result<f64, QuantError> {
    Ok(ErrorMetrics::compare(x, y)?.rel_rmse)
}

fn params(bits: u8, levels: LevelSet, rotate: bool, raw_rows: u16) -> V3Params {
    V3Params {
        bits,
        levels,
        block_log2: 6,
        rotate,
        seed: 0x5456_5133,
        width: 64,
        raw_rows,
        scale: ScaleRule::Rms,
        wide_scales: false,
    }
}

/// Heavy-tailed rows with per-channel offsets and a few outlier channels, like KV values.
fn kv_like(tokens: usize) -> Vec<f32> {
    let mut s = 0x9E37_79B9u32;
    let mut out = Vec::with_capacity(tokens * 64);
    for _ in 0..tokens {
        for c in 0..64 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let u = (s as f32 / u32::MAX as f32) - 0.5;
            let outlier = if c % 16 == 3 { 6.0 } else { 1.0 };
            out.push(u * outlier + 0.1 * c as f32 / 64.0);
        }
    }
    out
}

fn round_trip(p: &V3Params, x: &[f32]) -> Vec<f32> {
    let bytes = encode(p, x).unwrap();
    assert_eq!(bytes.len(), p.encoded_len(x.len()).unwrap());
    let seg = SegmentV3::parse(&bytes).unwrap();
    assert_eq!(seg.values(), x.len());
    let mut y = vec![0f32; x.len()];
    seg.decode(&mut y).unwrap();
    y
}

#[test]
fn rotation_and_lloyd_max_beat_plain_uniform_on_outlier_channels() {
    let x = kv_like(256);
    let e = |levels, rotate| rel_rmse(&x, &round_trip(&params(3, levels, rotate, 0), &x)).unwrap();
    let rot_lm = e(LevelSet::LloydMax, true);
    let rot_un = e(LevelSet::Uniform, true);
    let plain_un = e(LevelSet::Uniform, false);
    // Lloyd-Max 3-bit on a Gaussian is 18.6% relative RMSE; uniform 19.3%.
    assert!(rot_lm < 0.21, "{rot_lm}");
    assert!(rot_lm < rot_un, "{rot_lm} vs {rot_un}");
    assert!(rot_lm < plain_un, "{rot_lm} vs {plain_un}");
}

#[test]
fn error_falls_with_bits_and_raw_rows_are_f16() {
    let x = kv_like(64);
    let mut last = f64::INFINITY;
    for bits in 2..=8 {
        for scale in [ScaleRule::Rms, ScaleRule::Max] {
            let p = V3Params {
                scale,
                ..params(bits, LevelSet::LloydMax, true, 1)
            };
            let y = round_trip(&p, &x);
            for (a, b) in y[..64].iter().zip(&x[..64]) {
                assert_eq!(*a, half::f16::from_f32(*b).to_f32());
            }
            let e = rel_rmse(&x, &y).unwrap();
            if scale == ScaleRule::Rms {
                assert!(e < last, "{bits}: {e} >= {last}");
                last = e;
            }
        }
    }
    assert!(last < 0.01, "{last}");
}

#[test]
fn norm_matched_wide_scales_keep_block_norms() {
    let x = kv_like(128);
    let p = V3Params {
        scale: ScaleRule::NormMatched,
        wide_scales: true,
        ..params(3, LevelSet::LloydMax, true, 0)
    };
    let bytes = encode(&p, &x).unwrap();
    // One f16 per block instead of one byte.
    let narrow = V3Params {
        wide_scales: false,
        ..p
    };
    assert_eq!(
        bytes.len(),
        narrow.encoded_len(x.len()).unwrap() + x.len() / 64
    );
    let seg = SegmentV3::parse(&bytes).unwrap();
    assert!(seg.params().wide_scales);
    let mut y = vec![0f32; x.len()];
    seg.decode(&mut y).unwrap();
    for (a, b) in x.chunks_exact(64).zip(y.chunks_exact(64)) {
        let na: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        let nb: f32 = b.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((na - nb).abs() <= 2e-3 * na, "{na} vs {nb}");
    }
    // RMS scales shrink the norm (the levels pull towards zero).
    let rms = round_trip(&params(3, LevelSet::LloydMax, true, 0), &x);
    let n = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>().sqrt();
    assert!(n(&rms) < n(&x), "{} vs {}", n(&rms), n(&x));
    assert!((n(&y) - n(&x)).abs() < (n(&rms) - n(&x)).abs());
    assert!(rel_rmse(&x, &y).unwrap() < 0.21);
}

#[test]
fn parser_rejects_bad_wide_scales() {
    let p = V3Params {
        wide_scales: true,
        ..params(3, LevelSet::LloydMax, true, 0)
    };
    let good = encode(&p, &kv_like(4)).unwrap();
    let first = V3_HEADER_LEN;
    for (i, bits) in [(0usize, 0x7C00u16), (2, 0xFE00), (3, 0xBC00)] {
        let mut b = good.clone();
        let off = first + 2 * i;
        b[off..off + 2].copy_from_slice(&bits.to_le_bytes());
        match SegmentV3::parse(&b) {
            Err(QuantError::CorruptScale {
                index,
                offset,
                bits: got,
                ..
            }) => assert_eq!((index, offset, got), (i, off, bits)),
            other => panic!("{bits:#x}: {other:?}"),
        }
    }
}

#[test]
fn zero_and_constant_blocks() {
    let mut x = vec![0f32; 256];
    x[128..192].fill(3.5);
    let y = round_trip(&params(4, LevelSet::LloydMax, true, 0), &x);
    assert!(y[..128].iter().all(|&v| v == 0.0));
    assert!(rel_rmse(&x, &y).unwrap() < 0.15);
    let z = vec![0f32; 128];
    let bytes = encode(&params(3, LevelSet::Uniform, true, 0), &z).unwrap();
    let seg = SegmentV3::parse(&bytes).unwrap();
    assert_eq!(seg.max_scale(), 0.0);
    let mut out = vec![1f32; 128];
    seg.decode(&mut out).unwrap();
    assert!(out.iter().all(|&v| v == 0.0));
}

#[test]
fn encoder_refuses_bad_input() {
    let p = params(3, LevelSet::LloydMax, true, 0);
    let mut x = kv_like(2);
    x[70] = f32::NAN;
    assert!(matches!(
        encode(&p, &x),
        Err(QuantError::NonFinite { index: 70, .. })
    ));
    // Rotation of values near f32::MAX overflows: a typed error, not inf in the file.
    let big = vec![f32::MAX; 64];
    assert!(matches!(
        encode(&p, &big),
        Err(QuantError::ScaleOverflow { .. })
    ));
    // Not a whole number of blocks.
    assert!(matches!(
        encode(&p, &[1.0; 100]),
        Err(QuantError::CorruptField {
            field: "values",
            ..
        })
    ));
    let raw = V3Params { raw_rows: 3, ..p };
    assert!(matches!(
        encode(&raw, &[1.0; 128]),
        Err(QuantError::CorruptField {
            field: "raw_rows",
            ..
        })
    ));
    let mut x = kv_like(2);
    x[0] = 1e6;
    let raw = V3Params { raw_rows: 1, ..p };
    assert!(matches!(
        encode(&raw, &x),
        Err(QuantError::OutOfRange { index: 0, .. })
    ));
    assert!(matches!(
        encode(&V3Params { bits: 9, ..p }, &[0.0; 64]),
        Err(QuantError::InvalidBits { bits: 9 })
    ));
    assert!(matches!(
        encode(
            &V3Params {
                block_log2: 11,
                ..p
            },
            &[0.0; 2048]
        ),
        Err(QuantError::CorruptField {
            field: "block_log2",
            ..
        })
    ));
}

fn valid() -> Vec<u8> {
    encode(&params(3, LevelSet::LloydMax, true, 1), &kv_like(4)).unwrap()
}

fn field_of(e: QuantError) -> (&'static str, usize) {
    match e {
        QuantError::CorruptField { field, offset, .. } => (field, offset),
        other => panic!("not a CorruptField: {other:?}"),
    }
}

#[test]
fn parser_names_each_corrupt_field() {
    let cases: [(usize, u8, &str); 7] = [
        (BITS_OFFSET, 9, "bits"),
        (V3_LEVELS_OFFSET, 2, "levels"),
        (V3_BLOCK_LOG2_OFFSET, 1, "block_log2"),
        (V3_BLOCK_LOG2_OFFSET, 11, "block_log2"),
        (V3_FLAGS_OFFSET, 0x82, "flags"),
        (V3_RESERVED_OFFSET + 1, 1, "reserved"),
        (V3_WIDTH_OFFSET, 0, "width"),
    ];
    for (off, v, want) in cases {
        let mut b = valid();
        b[off] = v;
        if want == "width" {
            b[off + 1] = 0;
        }
        let (field, at) = field_of(SegmentV3::parse(&b).unwrap_err());
        assert_eq!(field, want, "byte {off} = {v}");
        assert!(at >= off.min(V3_VALUES_OFFSET), "{want} at {at}");
    }
    // Raw rows beyond the values; values not a whole number of blocks.
    let mut b = valid();
    b[V3_RAW_ROWS_OFFSET] = 200;
    assert_eq!(field_of(SegmentV3::parse(&b).unwrap_err()).0, "raw_rows");
    let mut b = valid();
    b[V3_VALUES_OFFSET] = 0xFF;
    assert_eq!(field_of(SegmentV3::parse(&b).unwrap_err()).0, "width");
    let mut b = valid();
    b[V3_VALUES_OFFSET..V3_VALUES_OFFSET + 4].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(field_of(SegmentV3::parse(&b).unwrap_err()).0, "values");
    // Scale bases that are negative, NaN, or decode to infinity.
    for base in [-1.0f32, f32::NAN, f32::INFINITY, 1e34] {
        let mut b = valid();
        b[V3_SCALE_BASE_OFFSET..V3_SCALE_BASE_OFFSET + 4]
            .copy_from_slice(&base.to_bits().to_le_bytes());
        let (field, at) = field_of(SegmentV3::parse(&b).unwrap_err());
        assert_eq!((field, at), ("scale_base", V3_SCALE_BASE_OFFSET), "{base}");
    }
}

#[test]
fn parser_rejects_truncation_magic_version_and_trailing_bytes() {
    let b = valid();
    for cut in [0, 8, V3_HEADER_LEN - 1, V3_HEADER_LEN + 10, b.len() - 1] {
        assert!(
            matches!(
                SegmentV3::parse(&b[..cut]),
                Err(QuantError::Truncated { .. })
            ),
            "{cut}"
        );
    }
    let mut long = b.clone();
    long.push(0);
    assert!(matches!(
        SegmentV3::parse(&long),
        Err(QuantError::TrailingBytes { .. })
    ));
    let mut m = b.clone();
    m[0] = b'X';
    assert!(matches!(SegmentV3::parse(&m), Err(QuantError::BadMagic)));
    let mut v = b.clone();
    v[VERSION_OFFSET] = 2;
    assert!(matches!(
        SegmentV3::parse(&v),
        Err(QuantError::UnsupportedVersion { version: 2, .. })
    ));
    // A header claiming 2^32-1 values in a 40-byte file: an error, not an allocation.
    let mut huge = b[..V3_HEADER_LEN].to_vec();
    huge[V3_VALUES_OFFSET..V3_VALUES_OFFSET + 4].copy_from_slice(&0xFFFF_FFC0u32.to_le_bytes());
    huge[V3_RAW_ROWS_OFFSET..V3_RAW_ROWS_OFFSET + 2].copy_from_slice(&0u16.to_le_bytes());
    huge.extend_from_slice(&[0; 8]);
    assert!(matches!(
        SegmentV3::parse(&huge),
        Err(QuantError::Truncated { .. })
    ));
    let seg = SegmentV3::parse(&b).unwrap();
    assert!(matches!(
        seg.decode(&mut [0f32; 3]),
        Err(QuantError::LengthMismatch { .. })
    ));
}

/// The byte layout is a format: this segment must decode to these values forever. Both
/// the bytes and the decoded f32 bits were computed independently (a Python transcription
/// of docs/formats/quant.md §6, f32 rounding after every operation).
#[test]
fn golden_segment_bytes() {
    let x: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
    let p = V3Params {
        bits: 2,
        levels: LevelSet::LloydMax,
        block_log2: 2,
        rotate: true,
        seed: 1,
        width: 4,
        raw_rows: 0,
        scale: ScaleRule::Rms,
        wide_scales: false,
    };
    let b = encode(&p, &x).unwrap();
    let hex: String = b.iter().map(|v| format!("{v:02x}")).collect();
    assert_eq!(
        hex,
        "545154430d0a1a0a030200020800000004000000010000008522193801000000ffffed47"
    );
    let mut y = [0f32; 8];
    SegmentV3::parse(&b).unwrap().decode(&mut y).unwrap();
    let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
    assert_eq!(
        bits,
        [
            0xc05d_7dc6,
            0xc05d_7dc6,
            0xbf84_cb24,
            0xbf84_cb24,
            0x3f84_cb24,
            0x3f84_cb24,
            0x405d_7dc6,
            0x405d_7dc6
        ]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip_error_is_bounded(
        vals in proptest::collection::vec(-1000f32..1000.0, 1..8usize),
        bits in 2u8..=8,
        uniform in any::<bool>(),
        rotate in any::<bool>(),
        seed in any::<u32>(),
        wide_scales in any::<bool>(),
        rule in 0u8..3,
    ) {
        // Blocks of 16: repeat the values to a whole number of blocks.
        let x: Vec<f32> = vals.iter().cycle().take(16 * vals.len()).copied().collect();
        let levels = if uniform { LevelSet::Uniform } else { LevelSet::LloydMax };
        let scale = [ScaleRule::Max, ScaleRule::Rms, ScaleRule::NormMatched][usize::from(rule)];
        let p = V3Params { bits, levels, block_log2: 4, rotate, seed, width: 16, raw_rows: 0, scale, wide_scales };
        let bytes = encode(&p, &x).unwrap();
        let seg = SegmentV3::parse(&bytes).unwrap();
        prop_assert_eq!(seg.params().bits, bits);
        prop_assert_eq!(seg.params().rotate, rotate);
        prop_assert_eq!(seg.params().wide_scales, wide_scales);
        let mut y = vec![0f32; x.len()];
        seg.decode(&mut y).unwrap();
        // Whatever the rule, a block's decoded norm is within a few times its own: the
        // total error is bounded by the input's norm.
        let norm: f32 = x.iter().map(|v| v * v).sum::<f32>().sqrt();
        let err: f32 = x.iter().zip(&y).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
        prop_assert!(err <= 2.5 * norm + 1e-3, "err {} norm {}", err, norm);
        // Decoding is deterministic and parse(encode) is stable.
        let again = encode(&p, &x).unwrap();
        prop_assert_eq!(again, bytes);
    }
}

#[test]
fn widened_uniform_levels_entropy_code_below_lloyd_max_at_lower_error() {
    // 1024 tokens of 64: after the rotation each block is close to Gaussian.
    let x = kv_like(1024);
    let lm = params(3, LevelSet::LloydMax, true, 1);
    // RmsTimes(16) is the RMS rule, byte for byte.
    let uni = params(4, LevelSet::Uniform, true, 1);
    assert_eq!(
        encode(&uni, &x).unwrap(),
        encode(
            &V3Params {
                scale: ScaleRule::RmsTimes(16),
                ..uni
            },
            &x
        )
        .unwrap()
    );
    let wide = V3Params {
        scale: ScaleRule::RmsTimes(26),
        ..uni
    };
    let size = |p: &V3Params| {
        crate::segment_v5::encode_smallest(encode(p, &x).unwrap())
            .unwrap()
            .len()
    };
    let (e_lm, e_wide) = (
        rel_rmse(&x, &round_trip(&lm, &x)).unwrap(),
        rel_rmse(&x, &round_trip(&wide, &x)).unwrap(),
    );
    // Entropy-coded, 4-bit codes 1.625 RMS apart take at most 4% more bytes than 3-bit
    // Lloyd-Max codes and lose at least 10% less (numpy on SmolLM2's values: 3.06 vs
    // 2.98 bits/value, 15.5% vs 18.3% relative RMSE).
    let (s_lm, s_wide) = (size(&lm), size(&wide));
    assert!(s_wide * 100 <= s_lm * 104, "{s_wide} vs {s_lm}");
    assert!(e_wide < 0.9 * e_lm, "{e_wide} vs {e_lm}");
    // Unwrapped, the wider codes cost a whole bit more per value.
    assert!(size(&uni) > s_wide);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The fused AVX2 decode (where the CPU has it) gives the scalar decoder's bits for
    /// every width, block size, level set, scale field and rotation, including codes the
    /// encoder never writes (the packed codes are overwritten with random bytes).
    #[test]
    fn fused_decode_matches_the_scalar_decoder_bit_for_bit(
        blocks in 1usize..6,
        bits in 2u8..=8,
        block_log2 in 2u8..=10,
        uniform in any::<bool>(),
        rotate in any::<bool>(),
        wide_scales in any::<bool>(),
        raw_rows in 0u16..3,
        seed in any::<u32>(),
        noise in any::<u64>(),
    ) {
        let width = 1usize << block_log2;
        let x: Vec<f32> = kv_like(blocks * width / 64 + 1)[..blocks * width].to_vec();
        let levels = if uniform { LevelSet::Uniform } else { LevelSet::LloydMax };
        let p = V3Params { bits, levels, block_log2, rotate, seed, width: width as u16,
                           raw_rows: raw_rows.min(blocks as u16 - 1), scale: ScaleRule::Rms, wide_scales };
        let mut bytes = encode(&p, &x).unwrap();
        let codes = packed_len((blocks - usize::from(p.raw_rows)) * width, bits);
        let len = bytes.len();
        for (i, b) in bytes[len - codes..].iter_mut().enumerate() {
            if noise & 1 == 1 {
                *b = crate::rotation::splitmix64(seed, noise ^ i as u64) as u8;
            }
        }
        let seg = SegmentV3::parse(&bytes).unwrap();
        let (mut fused, mut scalar) = (vec![0f32; x.len()], vec![1f32; x.len()]);
        seg.decode_with(&mut fused, true).unwrap();
        seg.decode_with(&mut scalar, false).unwrap();
        let bits_of = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits_of(&fused), bits_of(&scalar));
    }
}
