use proptest::prelude::*;

use super::*;
use crate::layout::V4_SUPER_BYTES;

fn params(bits: u8, group_log2: u8, super_log2: u8, rotate: bool) -> V4Params {
    V4Params {
        bits,
        group_log2,
        super_log2,
        scale_bits: 6,
        min_bits: 6,
        rotate,
        seed: 9,
        clip_search: true,
    }
}

/// Deterministic heavy-ish tailed values (a weight-like mix: mostly small, a few large).
fn weights(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u = crate::rotation::splitmix64(seed, i as u64);
            let a = ((u >> 11) as f64 / (1u64 << 53) as f64) as f32 - 0.5;
            let b = ((u & 0x3FF) as f32) / 1024.0;
            if b > 0.99 {
                a * 8.0
            } else {
                a * (1.0 + (i % 7) as f32 * 0.1)
            }
        })
        .collect()
}

fn rel_rmse(x: &[f32], y: &[f32]) -> f64 {
    let e: f64 = x.iter().zip(y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
    let s: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
    (e / s).sqrt()
}

fn round_trip(p: &V4Params, x: &[f32]) -> Vec<f32> {
    let b = encode(p, x).unwrap();
    assert_eq!(b.len(), p.encoded_len(x.len()).unwrap());
    let seg = SegmentV4::parse(&b).unwrap();
    let mut y = vec![0f32; x.len()];
    seg.decode(&mut y).unwrap();
    y
}

#[test]
fn regions_add_up() {
    // 4096 values, groups of 32 in super-blocks of 256, 3-bit codes, 6+6 side bits:
    // 24 + 16*4 + 128*6/8 * 2 + 4096*3/8.
    let p = params(3, 5, 8, false);
    assert_eq!(p.encoded_len(4096).unwrap(), 24 + 64 + 96 + 96 + 1536);
    // A partial super-block and a partial group: 300 values = 2 super-blocks, 10 groups.
    assert_eq!(
        p.encoded_len(300).unwrap(),
        24 + 2 * 4 + 8 + 8 + (300 * 3usize).div_ceil(8)
    );
}

#[test]
fn smaller_groups_cut_the_error_and_more_bits_cut_it_more() {
    let x = weights(4096, 1);
    let e = |p: V4Params| rel_rmse(&x, &round_trip(&p, &x));
    let (g16, g64, g256) = (
        e(params(3, 4, 8, false)),
        e(params(3, 6, 8, false)),
        e(params(3, 8, 8, false)),
    );
    assert!(g16 < g64 && g64 < g256, "{g16} {g64} {g256}");
    let (b3, b5, b8) = (g16, e(params(5, 4, 8, false)), e(params(8, 4, 8, false)));
    assert!(b8 < b5 && b5 < b3 && b8 < 0.01, "{b3} {b5} {b8}");
}

#[test]
fn rotation_round_trips_and_partial_super_blocks_stay_unrotated() {
    // 256 + 100 values: the trailing 100 are not a whole super-block.
    let x = weights(356, 2);
    let p = params(8, 4, 8, true);
    let y = round_trip(&p, &x);
    assert!(rel_rmse(&x, &y) < 0.01, "{}", rel_rmse(&x, &y));
    // A spike is spread by the rotation: the rotated segment codes it with less error
    // than the plain one at 3 bits when the rest of the super-block is small.
    let mut spike = vec![0.01f32; 256];
    for (i, v) in spike.iter_mut().enumerate() {
        *v *= ((i * 13 % 17) as f32) - 8.0;
    }
    spike[7] = 5.0;
    let plain = rel_rmse(&spike, &round_trip(&params(3, 8, 8, false), &spike));
    let rot = rel_rmse(&spike, &round_trip(&params(3, 8, 8, true), &spike));
    assert!(rot < plain, "rotated {rot} vs plain {plain}");
}

#[test]
fn constant_and_positive_data_decode_exactly_or_closely() {
    let zeros = vec![0f32; 512];
    assert_eq!(round_trip(&params(3, 5, 8, false), &zeros), zeros);
    // All-positive groups: a positive min unit.
    let x: Vec<f32> = (0..512).map(|i| 10.0 + (i % 32) as f32 * 0.1).collect();
    let y = round_trip(&params(5, 5, 8, false), &x);
    assert!(rel_rmse(&x, &y) < 2e-3, "{}", rel_rmse(&x, &y));
}

#[test]
fn encoder_rejects_bad_input_and_settings() {
    let x = weights(64, 3);
    let mut nan = x.clone();
    nan[5] = f32::NAN;
    assert!(matches!(
        encode(&params(3, 4, 8, false), &nan),
        Err(QuantError::NonFinite { index: 5, .. })
    ));
    assert!(matches!(
        encode(&params(9, 4, 8, false), &x),
        Err(QuantError::InvalidBits { bits: 9 })
    ));
    for (p, field) in [
        (params(3, 1, 8, false), "group_log2"),
        (params(3, 9, 10, false), "group_log2"),
        (params(3, 5, 4, false), "super_log2"),
        (params(3, 5, 11, false), "super_log2"),
        (
            V4Params {
                scale_bits: 1,
                ..params(3, 5, 8, false)
            },
            "scale_bits",
        ),
        (
            V4Params {
                min_bits: 9,
                ..params(3, 5, 8, false)
            },
            "min_bits",
        ),
    ] {
        assert!(
            matches!(encode(&p, &x), Err(QuantError::CorruptField { field: f, .. }) if f == field),
            "{field}"
        );
    }
    assert!(matches!(
        encode(&params(3, 4, 8, false), &[]),
        Err(QuantError::CorruptField {
            field: "values",
            ..
        })
    ));
    // Units beyond f16: a scale unit over 65504.
    let big = [-1e30f32, 1e30];
    assert!(matches!(
        encode(&params(3, 2, 2, false), &[big[0], big[1], 0.0, 0.0]),
        Err(QuantError::ScaleOverflow { .. })
    ));
}

/// One crafted segment per kind of bad header or region.
#[test]
fn parser_rejects_crafted_bytes() {
    let x = weights(300, 4);
    let b = encode(&params(4, 5, 8, true), &x).unwrap();
    let set = |off: usize, v: u8| {
        let mut m = b.clone();
        m[off] = v;
        SegmentV4::parse(&m).map(|_| ())
    };
    let field = |r: Result<(), QuantError>| match r {
        Err(QuantError::CorruptField { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert!(matches!(set(0, b'X'), Err(QuantError::BadMagic)));
    assert!(matches!(
        set(VERSION_OFFSET, 3),
        Err(QuantError::UnsupportedVersion { version: 3, .. })
    ));
    assert_eq!(field(set(BITS_OFFSET, 1)), "bits");
    assert_eq!(field(set(V4_GROUP_LOG2_OFFSET, 9)), "group_log2");
    assert_eq!(field(set(V4_SUPER_LOG2_OFFSET, 4)), "super_log2");
    assert_eq!(field(set(V4_SUPER_LOG2_OFFSET, 11)), "super_log2");
    assert_eq!(field(set(V4_SCALE_BITS_OFFSET, 0)), "scale_bits");
    assert_eq!(field(set(V4_MIN_BITS_OFFSET, 9)), "min_bits");
    assert_eq!(field(set(V4_FLAGS_OFFSET, 0x80)), "flags");
    assert_eq!(field(set(V4_RESERVED_OFFSET, 1)), "reserved");
    let mut zero_n = b.clone();
    zero_n[V4_VALUES_OFFSET..V4_VALUES_OFFSET + 4].copy_from_slice(&[0; 4]);
    assert_eq!(field(SegmentV4::parse(&zero_n).map(|_| ())), "values");
    // Units: a NaN scale unit, a negative scale unit, an infinite min unit.
    let unit = V4_HEADER_LEN + V4_SUPER_BYTES; // the second super-block's
    for (off, bits, index) in [
        (unit, 0x7E00u16, 2),
        (unit, 0xBC00, 2),
        (unit + 2, 0x7C00, 3),
    ] {
        let mut m = b.clone();
        m[off..off + 2].copy_from_slice(&bits.to_le_bytes());
        assert!(
            matches!(SegmentV4::parse(&m), Err(QuantError::CorruptScale { index: i, offset, .. }) if i == index && offset == off),
            "{bits:#x}"
        );
    }
    // Truncation in every region, and a trailing byte.
    for cut in [10, V4_HEADER_LEN + 3, V4_HEADER_LEN + 9, b.len() - 1] {
        assert!(
            matches!(
                SegmentV4::parse(&b[..cut]),
                Err(QuantError::Truncated { .. })
            ),
            "{cut}"
        );
    }
    let mut long = b.clone();
    long.push(0);
    assert!(matches!(
        SegmentV4::parse(&long),
        Err(QuantError::TrailingBytes { .. })
    ));
    // A header claiming 2^32-1 values in a 40-byte file: an error, not an allocation.
    let mut huge = b[..V4_HEADER_LEN].to_vec();
    huge[V4_VALUES_OFFSET..V4_VALUES_OFFSET + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    huge.extend_from_slice(&[0; 16]);
    assert!(matches!(
        SegmentV4::parse(&huge),
        Err(QuantError::Truncated { .. })
    ));
    let seg = SegmentV4::parse(&b).unwrap();
    assert!(matches!(
        seg.decode(&mut [0f32; 3]),
        Err(QuantError::LengthMismatch { .. })
    ));
}

/// The format's decoder, pinned by an independent transcription: these bytes were written
/// field by field (not by the encoder) and decoded by `scripts/quant_v4_reference.py`
/// (docs/formats/quant.md §11 in numpy, f32 after every operation); the f32 bits below
/// are its output.
#[test]
fn golden_decode_matches_the_python_transcription() {
    let hex = include_str!("../../../tests/fixtures/quant/v4_golden.hex");
    let mut lines = hex.lines().filter(|l| !l.starts_with('#'));
    let unhex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    while let (Some(seg), Some(vals)) = (lines.next(), lines.next()) {
        let bytes = unhex(seg.trim());
        let want: Vec<u32> = vals
            .split_whitespace()
            .map(|v| u32::from_str_radix(v, 16).unwrap())
            .collect();
        let s = SegmentV4::parse(&bytes).unwrap();
        let mut y = vec![0f32; s.values()];
        s.decode(&mut y).unwrap();
        let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "segment {seg}");
    }
}

/// The encoder's output for a fixed input is pinned too (a change is a format-visible
/// change of tensorvault's writer and must be deliberate).
#[test]
fn encoder_output_is_stable() {
    let x: Vec<f32> = (0..32).map(|i| (i as f32 - 12.5) * 0.25).collect();
    let p = V4Params {
        clip_search: false,
        ..params(3, 3, 4, false)
    };
    let b = encode(&p, &x).unwrap();
    let hex: String = b.iter().map(|v| format!("{v:02x}")).collect();
    assert_eq!(
        hex,
        include_str!("../../../tests/fixtures/quant/v4_encoder.hex").trim()
    );
}

/// The norm-matched encoder's output for a fixed input is pinned as well (what codec 4
/// writes for embeddings; a change must be deliberate).
#[test]
fn norm_matched_encoder_output_is_stable() {
    let x = weights(64, 7);
    let p = params(3, 3, 5, true);
    let b = encode_with(&p, V4Encoder { norm_match: true }, &x).unwrap();
    let hex: String = b.iter().map(|v| format!("{v:02x}")).collect();
    assert_eq!(
        hex,
        include_str!("../../../tests/fixtures/quant/v4_encoder_norm_matched.hex").trim()
    );
    // Only the units differ from the fitted encoder's output.
    let f = encode(&p, &x).unwrap();
    assert_eq!(b[32..], f[32..]);
    assert_ne!(b[24..32], f[24..32]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip_error_is_bounded(
        vals in proptest::collection::vec(-1000f32..1000.0, 1..700usize),
        bits in 2u8..=8,
        group_log2 in 2u8..=6,
        extra in 0u8..=3,
        scale_bits in 2u8..=8,
        min_bits in 2u8..=8,
        rotate in any::<bool>(),
        seed in any::<u32>(),
        clip_search in any::<bool>(),
    ) {
        let p = V4Params { bits, group_log2, super_log2: group_log2 + extra, scale_bits, min_bits, rotate, seed, clip_search };
        let bytes = encode(&p, &vals).unwrap();
        let seg = SegmentV4::parse(&bytes).unwrap();
        prop_assert_eq!(seg.params(), V4Params { clip_search: false, ..p });
        let mut y = vec![0f32; vals.len()];
        seg.decode(&mut y).unwrap();
        // Each super-block's error is at most its own norm times a small factor (coarse
        // side codes may clip), so the total is bounded by the input's norm.
        let norm: f32 = vals.iter().map(|v| v * v).sum::<f32>().sqrt();
        let err: f32 = vals.iter().zip(&y).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
        prop_assert!(err <= 1.5 * norm + 1e-3, "err {} norm {}", err, norm);
        // 8-bit codes with 8-bit side codes are close.
        if bits == 8 && scale_bits == 8 && min_bits == 8 {
            prop_assert!(err <= 0.02 * norm + 1e-3, "err {} norm {}", err, norm);
        }
        prop_assert_eq!(encode(&p, &vals).unwrap(), bytes);
    }
}

/// Relative norm mismatch `| ||y|| / ||x|| - 1 |` of each whole super-block of `s` values.
fn super_norm_mismatch(x: &[f32], y: &[f32], s: usize) -> Vec<f64> {
    x.chunks(s)
        .zip(y.chunks(s))
        .map(|(a, b)| {
            let n = |v: &[f32]| v.iter().map(|t| f64::from(*t).powi(2)).sum::<f64>().sqrt();
            (n(b) / n(a) - 1.0).abs()
        })
        .collect()
}

fn decode_bytes(b: &[u8], n: usize) -> Vec<f32> {
    let mut y = vec![0f32; n];
    SegmentV4::parse(b).unwrap().decode(&mut y).unwrap();
    y
}

#[test]
fn norm_matched_units_keep_each_super_blocks_norm_and_only_change_the_units() {
    for (p, seed) in [
        (params(3, 5, 10, true), 3),
        (params(3, 5, 8, false), 4),
        (params(5, 6, 10, true), 5),
    ] {
        let x = weights(4096, seed);
        let fitted = encode(&p, &x).unwrap();
        assert_eq!(encode_with(&p, V4Encoder::default(), &x).unwrap(), fitted);
        let nm = encode_with(&p, V4Encoder { norm_match: true }, &x).unwrap();
        // Same length, header, scale/min codes and value codes: only units differ.
        let units = V4_HEADER_LEN + V4_SUPER_BYTES * 4096usize.div_ceil(p.super_block());
        assert_eq!(nm.len(), fitted.len());
        assert_eq!(nm[..V4_HEADER_LEN], fitted[..V4_HEADER_LEN]);
        assert_eq!(nm[units..], fitted[units..]);
        assert_ne!(nm[V4_HEADER_LEN..units], fitted[V4_HEADER_LEN..units]);
        let (yf, yn) = (decode_bytes(&fitted, 4096), decode_bytes(&nm, 4096));
        let sb = p.super_block();
        let worst = |v: Vec<f64>| v.into_iter().fold(0f64, f64::max);
        let (ef, en) = (
            worst(super_norm_mismatch(&x, &yf, sb)),
            worst(super_norm_mismatch(&x, &yn, sb)),
        );
        // f16 units round to 2^-11 relative: the norm is kept to ~0.1%; the fitted
        // units (clip search) are off by more.
        assert!(en < 1.5e-3, "norm-matched mismatch {en} ({p:?})");
        assert!(ef > 2.0 * en, "fitted {ef} vs norm-matched {en} ({p:?})");
        // The squared error grows only a little (same codes, units moved by ~1%).
        let (rf, rn) = (rel_rmse(&x, &yf), rel_rmse(&x, &yn));
        assert!(rn < rf * 1.1, "{rn} vs {rf} ({p:?})");
    }
}

#[test]
fn norm_matching_leaves_zero_and_constant_blocks_alone() {
    // Unrotated: a rotated constant block is one spike, a different test.
    let p = params(4, 5, 8, false);
    let nm = V4Encoder { norm_match: true };
    for x in [vec![0f32; 600], vec![0.75f32; 600]] {
        let b = encode_with(&p, nm, &x).unwrap();
        let y = decode_bytes(&b, x.len());
        let ex = encode(&p, &x).unwrap();
        if x[0] == 0.0 {
            assert_eq!(b, ex, "zero blocks have no gain to apply");
            assert!(y.iter().all(|&v| v == 0.0));
        } else {
            assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 2e-3), "{y:?}");
        }
    }
    // A super-block whose units would overflow f16 when scaled keeps its fitted units.
    assert_eq!(scaled_units(0x7BFF, 0, 2.0), None);
    assert_eq!(scaled_units(0x3C00, 0xBC00, 0.0), None);
    assert_eq!(scaled_units(0x3C00, 0xBC00, f32::NAN), None);
    assert_eq!(
        scaled_units(0x3C00, 0xBC00, 2.0),
        Some((f16::from_f32(2.0).to_bits(), f16::from_f32(-2.0).to_bits()))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn norm_matched_segments_round_trip_with_the_input_norm(
        vals in proptest::collection::vec(-1000f32..1000.0, 1..1500usize),
        bits in 2u8..=8,
        group_log2 in 3u8..=6,
        extra in 0u8..=3,
        rotate in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let p = V4Params { bits, group_log2, super_log2: group_log2 + extra, scale_bits: 6,
                           min_bits: 6, rotate, seed, clip_search: true };
        let bytes = encode_with(&p, V4Encoder { norm_match: true }, &vals).unwrap();
        prop_assert_eq!(bytes.len(), p.encoded_len(vals.len()).unwrap());
        let y = decode_bytes(&bytes, vals.len());
        let yf = decode_bytes(&encode(&p, &vals).unwrap(), vals.len());
        let sb = p.super_block();
        let (mn, mf) = (super_norm_mismatch(&vals, &y, sb), super_norm_mismatch(&vals, &yf, sb));
        for (i, (a, b)) in mn.iter().zip(&mf).enumerate() {
            // Never further from the input's norm than the fitted units (up to the f16
            // rounding of the scaled units), and within 0.2% wherever the block has any
            // norm (values >= ~1e-3 here keep the units normal f16 numbers).
            let norm: f32 = vals.chunks(sb).nth(i).unwrap().iter().map(|v| v * v).sum();
            if norm > 1.0 {
                prop_assert!(*a <= b + 2e-3, "super-block {}: {} vs fitted {}", i, a, b);
                prop_assert!(*a < 2e-3, "super-block {}: mismatch {}", i, a);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The fused AVX2 decode (where the CPU has it) gives the scalar decoder's bits for
    /// every group / super-block geometry, rotated or not, with a partial last super-block,
    /// including codes the encoder never writes (random bytes over the packed codes).
    #[test]
    fn fused_decode_matches_the_scalar_decoder_bit_for_bit(
        n in 1usize..2600,
        bits in 2u8..=8,
        group_log2 in 2u8..=8,
        extra in 0u8..=4,
        rotate in any::<bool>(),
        seed in any::<u32>(),
        noise in any::<u64>(),
    ) {
        let super_log2 = (group_log2 + extra).min(10);
        let p = V4Params { bits, group_log2, super_log2, scale_bits: 6, min_bits: 5, rotate, seed,
                           clip_search: false };
        let x = weights(n, seed);
        let mut bytes = encode(&p, &x).unwrap();
        let codes = packed_len(n, bits);
        let len = bytes.len();
        if noise & 1 == 1 {
            for (i, b) in bytes[len - codes..].iter_mut().enumerate() {
                *b = crate::rotation::splitmix64(seed, noise ^ i as u64) as u8;
            }
        }
        let seg = SegmentV4::parse(&bytes).unwrap();
        let (mut fused, mut scalar) = (vec![0f32; n], vec![1f32; n]);
        seg.decode_with(&mut fused, true).unwrap();
        seg.decode_with(&mut scalar, false).unwrap();
        let bits_of = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits_of(&fused), bits_of(&scalar));
    }
}
