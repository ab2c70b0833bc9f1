use super::*;
use crate::layout::{V2_VALUES_OFFSET, V5_DEFAULT_LANES_LOG2};
use crate::levels::LevelSet;
use crate::segment_rot::{self, ScaleRule, V3Params};
use crate::segment_v2::{self, Axis, V2Params};
use proptest::prelude::*;

fn kv_like(tokens: usize, width: usize) -> Vec<f32> {
    let mut s = 0x1234_5678u32;
    (0..tokens * width)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let g = (0..3)
                .map(|k| ((s >> (k * 10)) & 1023) as f32 / 1023.0)
                .sum::<f32>()
                - 1.5;
            let c = i % width;
            g * if c % 16 == 3 { 5.0 } else { 1.0 } + 0.05 * c as f32
        })
        .collect()
}

fn v2(bits: u8, axis: Axis, raw_rows: u16, x: &[f32]) -> Vec<u8> {
    let p = V2Params {
        bits,
        group_log2: 6,
        axis,
        width: 64,
        raw_rows,
        clip_search: false,
    };
    segment_v2::encode(&p, x).unwrap()
}

fn v3(bits: u8, x: &[f32]) -> Vec<u8> {
    let p = V3Params {
        bits,
        levels: LevelSet::LloydMax,
        block_log2: 6,
        rotate: true,
        seed: 7,
        width: 64,
        raw_rows: 1,
        scale: ScaleRule::Rms,
        wide_scales: false,
    };
    segment_rot::encode(&p, x).unwrap()
}

fn v4(bits: u8, rotate: bool, x: &[f32]) -> Vec<u8> {
    let p = crate::segment_v4::V4Params {
        bits,
        group_log2: 5,
        super_log2: 8,
        scale_bits: 6,
        min_bits: 6,
        rotate,
        seed: 3,
        clip_search: false,
    };
    crate::segment_v4::encode(&p, x).unwrap()
}

fn decoded(bytes: &[u8], n: usize) -> Vec<u32> {
    let mut out = Vec::new();
    decode_any(bytes, n, &mut out).unwrap();
    out.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn wrapping_is_lossless_and_smaller_for_v2_and_v3() {
    let x = kv_like(64, 64);
    for bits in [2u8, 3, 4, 5] {
        for inner in [
            v2(bits, Axis::Flat, 0, &x),
            v2(bits, Axis::Columns, 1, &x),
            v3(bits, &x),
            v4(bits, false, &x),
            v4(bits, true, &x),
        ] {
            let env = wrap(&inner, V5_DEFAULT_LANES_LOG2)
                .unwrap()
                .expect("shrinks");
            assert!(env.len() < inner.len());
            let seg = SegmentV5::parse(&env).unwrap();
            assert_eq!(seg.inner_version(), inner[VERSION_OFFSET]);
            assert_eq!(seg.inner(x.len()).unwrap(), inner);
            assert_eq!(decoded(&env, x.len()), decoded(&inner, x.len()));
        }
    }
}

#[test]
fn coding_that_does_not_shrink_falls_back_to_the_inner_segment() {
    // Uniformly spread 8-bit codes: the table costs more than coding saves.
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let inner = v2(8, Axis::Flat, 0, &x);
    assert!(wrap(&inner, 2).unwrap().is_none());
    assert_eq!(encode_smallest(inner.clone()).unwrap(), inner);
    // All raw rows: nothing to code.
    let inner = v2(3, Axis::Columns, 4, &kv_like(4, 64));
    assert!(wrap(&inner, 2).unwrap().is_none());
}

#[test]
fn wrapping_refuses_what_it_cannot_wrap() {
    let x = kv_like(64, 64);
    let mut v1 = v2(3, Axis::Flat, 0, &x);
    v1[VERSION_OFFSET] = 1;
    assert!(matches!(
        wrap(&v1, 2),
        Err(QuantError::UnsupportedVersion { version: 1, .. })
    ));
    let inner = v2(3, Axis::Flat, 0, &x);
    assert!(matches!(
        wrap(&inner, 7),
        Err(QuantError::InvalidParam {
            field: "lanes_log2",
            ..
        })
    ));
    let env = wrap(&inner, 2).unwrap().unwrap();
    assert!(matches!(
        wrap(&env, 2),
        Err(QuantError::UnsupportedVersion { version: 5, .. })
    ));
}

fn sample() -> (Vec<u8>, Vec<u8>) {
    let x = kv_like(64, 64);
    let inner = v2(3, Axis::Columns, 0, &x);
    let env = wrap(&inner, 2).unwrap().unwrap();
    (inner, env)
}

fn field_err(bytes: &[u8]) -> QuantError {
    SegmentV5::parse(bytes).unwrap_err()
}

#[test]
fn each_header_field_is_checked_with_its_offset() {
    let (_, env) = sample();
    let cases: [(usize, u8, &str); 5] = [
        (9, 9, "bits"),
        (V5_INNER_VERSION_OFFSET, 1, "inner_version"),
        (V5_INNER_VERSION_OFFSET, 5, "inner_version"),
        (V5_LANES_LOG2_OFFSET, 7, "lanes_log2"),
        (V5_PROB_BITS_OFFSET, 13, "prob_bits"),
    ];
    for (off, val, name) in cases {
        let mut b = env.clone();
        b[off] = val;
        let e = field_err(&b);
        assert!(
            matches!(e, QuantError::CorruptField { field, offset, .. } if field == name && offset == off),
            "{name}: {e}"
        );
    }
    let mut b = env.clone();
    b[0] ^= 1;
    assert!(matches!(field_err(&b), QuantError::BadMagic));
    let e = field_err(&env[..V5_HEADER_LEN - 1]);
    assert!(
        matches!(
            e,
            QuantError::Truncated {
                what: "v5 header",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_side_length_beyond_the_segment_is_truncated_without_allocating() {
    let (_, mut env) = sample();
    env[V5_SIDE_LEN_OFFSET..V5_SIDE_LEN_OFFSET + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = field_err(&env);
    assert!(
        matches!(e, QuantError::Truncated { what: "inner side data", end, .. } if end == V5_HEADER_LEN as u64 + u64::from(u32::MAX)),
        "{e}"
    );
}

#[test]
fn a_huge_code_count_is_refused_before_allocating() {
    let (_, mut env) = sample();
    env[V5_CODES_OFFSET..V5_CODES_OFFSET + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let seg = SegmentV5::parse(&env).unwrap();
    assert!(matches!(
        seg.inner(4096),
        Err(QuantError::LengthMismatch { .. })
    ));
    let mut out = Vec::new();
    assert!(matches!(
        decode_any(&env, 4096, &mut out),
        Err(QuantError::LengthMismatch { .. })
    ));
}

#[test]
fn a_code_count_that_disagrees_with_the_inner_header_is_refused() {
    let (_, env) = sample();
    // 4095 codes pack into the same 1536 bytes as 4096 at 3 bits: only the count check sees it.
    let mut b = env.clone();
    b[V5_CODES_OFFSET..V5_CODES_OFFSET + 4].copy_from_slice(&4095u32.to_le_bytes());
    let e = SegmentV5::parse(&b).unwrap().inner(4096).unwrap_err();
    // The stream was coded for 4096 symbols: decoding 4095 leaves a lane off its start
    // state or a word unread, unless the count check itself fires.
    assert!(
        matches!(
            e,
            QuantError::CorruptField {
                field: "codes" | "rans final state",
                ..
            } | QuantError::TrailingBytes { .. }
        ),
        "{e}"
    );
}

#[test]
fn an_inner_header_changed_under_the_envelope_is_caught_by_the_inner_parser() {
    let (_, env) = sample();
    let mut b = env.clone();
    // n lives at inner offset 12 = side byte 2.
    let at = V5_HEADER_LEN + V2_VALUES_OFFSET - V5_INNER_SKIP;
    b[at..at + 4].copy_from_slice(&8192u32.to_le_bytes());
    let e = SegmentV5::parse(&b).unwrap().inner(1 << 20).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::Truncated { .. } | QuantError::CorruptField { .. }
        ),
        "{e}"
    );
}

#[test]
fn every_truncation_and_trailing_byte_is_a_typed_error() {
    let (_, env) = sample();
    for cut in 0..env.len() {
        let mut out = Vec::new();
        assert!(decode_any(&env[..cut], 4096, &mut out).is_err(), "{cut}");
    }
    let mut b = env.clone();
    b.push(0);
    let mut out = Vec::new();
    assert!(decode_any(&b, 4096, &mut out).is_err());
}

/// The byte layout is a format: this envelope must rebuild this v2 segment forever. The
/// bytes were computed independently by `scripts/rans_v5_golden.py`, a Python
/// transcription of docs/formats/quant.md §12 (table quantization, rANS, layout).
#[test]
fn golden_envelope_bytes() {
    // 512 values, mostly 0.1 with a 1.0 every 8th and a -1.0 every 16th (offset 4):
    // one group of 512, codes mostly 2.
    let x: Vec<f32> = (0..512)
        .map(|i| match (i % 8, i % 16) {
            (0, _) => 1.0,
            (_, 4) => -1.0,
            _ => 0.1,
        })
        .collect();
    let p = V2Params {
        bits: 2,
        group_log2: 9,
        axis: Axis::Flat,
        width: 1,
        raw_rows: 0,
        clip_search: false,
    };
    let inner = segment_v2::encode(&p, &x).unwrap();
    let env = wrap(&inner, 0).unwrap().unwrap();
    let hex = |b: &[u8]| b.iter().map(|v| format!("{v:02x}")).collect::<String>();
    assert_eq!(hex(&inner), GOLDEN_INNER);
    assert_eq!(hex(&env), GOLDEN_ENVELOPE);
    assert_eq!(SegmentV5::parse(&env).unwrap().inner(512).unwrap(), inner);
}

const GOLDEN_INNER: &str = concat!(
    "545154430d0a1a0a02020009000200000100000001562b3b000080bf00000000ff00",
    "aba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaa",
    "aba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaa",
    "aba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaa",
    "aba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaaaba8abaa",
);
const GOLDEN_ENVELOPE: &str = concat!(
    "545154430d0a1a0a0502020004000200001800000000090002000001000000",
    "01562b3b000080bf00000000ff0001000d02aec68b180506912d0324233ae5",
    "f14a1d296c39dd1b1820f08da5ec5bcb7207ace64c8bf84141180296abc669",
    "1cc317ea639c17262ddea1d5b6b2",
);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn envelopes_round_trip(
        tokens in 1usize..40,
        bits in 2u8..=8,
        columns in any::<bool>(),
        raw in 0u16..2,
        lanes in 0u8..=6,
        seed in any::<u32>(),
    ) {
        let mut s = seed | 1;
        let x: Vec<f32> = (0..tokens * 64).map(|i| {
            s ^= s << 13; s ^= s >> 17; s ^= s << 5;
            ((s % 2001) as f32 / 1000.0 - 1.0).powi(3) * (1.0 + (i % 64) as f32 * 0.1)
        }).collect();
        let axis = if columns { Axis::Columns } else { Axis::Flat };
        let inner = v2(bits, axis, raw.min(tokens as u16), &x);
        if let Some(env) = wrap(&inner, lanes).unwrap() {
            prop_assert!(env.len() < inner.len());
            let seg = SegmentV5::parse(&env).unwrap();
            prop_assert_eq!(seg.inner(x.len()).unwrap(), inner.clone());
            prop_assert_eq!(decoded(&env, x.len()), decoded(&inner, x.len()));
        }
        let stored = encode_smallest(inner.clone()).unwrap();
        prop_assert_eq!(decoded(&stored, x.len()), decoded(&inner, x.len()));
    }
}

/// `bytes` with the `len` bytes at `at` replaced by `with`, and the side length `P`
/// adjusted by the difference (the table and stream are untouched, so the envelope
/// still parses: only the inner head is wrong).
fn resized_side(env: &[u8], at: usize, len: usize, with: &[u8]) -> Vec<u8> {
    let p = u32::from_le_bytes(
        env[V5_SIDE_LEN_OFFSET..V5_SIDE_LEN_OFFSET + 4]
            .try_into()
            .unwrap(),
    );
    let p = (p as usize + with.len() - len) as u32;
    let mut b = env[..at].to_vec();
    b.extend_from_slice(with);
    b.extend_from_slice(&env[at + len..]);
    b[V5_SIDE_LEN_OFFSET..V5_SIDE_LEN_OFFSET + 4].copy_from_slice(&p.to_le_bytes());
    b
}

#[test]
fn decoding_from_codes_checks_the_inner_head_as_its_parser_does() {
    let (inner, env) = sample();
    let n = 4096;
    let side_end = V5_HEADER_LEN + (inner.len() - packed_len(n, 3) - V5_INNER_SKIP);
    let mut out = Vec::new();
    // One side byte too many: the inner head has bytes after its group parameters.
    let b = resized_side(&env, side_end, 0, &[0]);
    let e = SegmentV5::parse(&b)
        .unwrap()
        .decode(n, &mut out)
        .unwrap_err();
    assert!(matches!(e, QuantError::TrailingBytes { .. }), "{e}");
    // One too few: the group parameters are cut.
    let b = resized_side(&env, side_end - 1, 1, &[]);
    let e = SegmentV5::parse(&b)
        .unwrap()
        .decode(n, &mut out)
        .unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::Truncated {
                what: "group parameters",
                ..
            }
        ),
        "{e}"
    );
    // A code count that disagrees with the inner header, before any stream is decoded.
    let mut b = env.clone();
    b[V5_CODES_OFFSET..V5_CODES_OFFSET + 4].copy_from_slice(&4095u32.to_le_bytes());
    let e = SegmentV5::parse(&b)
        .unwrap()
        .decode(n, &mut out)
        .unwrap_err();
    assert!(
        matches!(e, QuantError::CorruptField { field: "codes", offset, .. } if offset == V5_CODES_OFFSET),
        "{e}"
    );
    // More values than the caller expects: refused before the codes are allocated.
    let e = SegmentV5::parse(&env)
        .unwrap()
        .decode(n - 1, &mut out)
        .unwrap_err();
    assert!(matches!(e, QuantError::LengthMismatch { .. }), "{e}");
    // The inner header's own fields keep their checks (width 0 at inner offset 16).
    let mut b = env.clone();
    let at = V5_HEADER_LEN + crate::layout::V2_WIDTH_OFFSET - V5_INNER_SKIP;
    b[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
    let e = SegmentV5::parse(&b)
        .unwrap()
        .decode(n, &mut out)
        .unwrap_err();
    assert!(
        matches!(e, QuantError::CorruptField { field: "width", offset, .. } if offset == crate::layout::V2_WIDTH_OFFSET),
        "{e}"
    );
    // A v3 head that lost a block scale.
    let x = kv_like(64, 64);
    let inner = v3(4, &x);
    let env = wrap(&inner, 2).unwrap().unwrap();
    let side_end = V5_HEADER_LEN + (inner.len() - packed_len(63 * 64, 4) - V5_INNER_SKIP);
    let b = resized_side(&env, side_end - 1, 1, &[]);
    let e = SegmentV5::parse(&b)
        .unwrap()
        .decode(n, &mut out)
        .unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::Truncated {
                what: "block scales",
                ..
            }
        ),
        "{e}"
    );
}

/// The oracle: the rebuilt inner segment, decoded by its own parser.
fn oracle(env: &[u8], n: usize) -> Vec<u32> {
    let inner = SegmentV5::parse(env).unwrap().inner(n).unwrap();
    let mut out = Vec::new();
    decode_inner(&inner, n, &mut out).unwrap();
    out.iter().map(|v| v.to_bits()).collect()
}

/// `inner` with its packed codes replaced by pseudo-random codes below `2^bits` (every
/// level, including the extremes an encoder rarely picks).
fn with_random_codes(inner: &[u8], seed: u32) -> Vec<u8> {
    let (at, m) = code_region(inner).unwrap();
    let bits = inner[crate::layout::BITS_OFFSET];
    let mut s = seed | 1;
    let codes: Vec<u8> = (0..m)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            // Skewed towards small codes so the envelope still shrinks.
            ((s % 1000) * (s % 1000) / 1000 * (1u32 << bits) / 1000) as u8
        })
        .collect();
    let mut b = inner.to_vec();
    pack_unchecked(&codes, bits, &mut b[at..]);
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// `SegmentV5::decode` (codes straight into the v2/v3 decoder) gives the bits of the
    /// rebuilt inner segment's decode, for encoder output and for arbitrary codes, on
    /// the AVX2 and the scalar v3 paths.
    #[test]
    fn decoding_from_codes_matches_the_rebuilt_segment(
        tokens in 1usize..24,
        bits in 2u8..=8,
        version3 in any::<bool>(),
        columns in any::<bool>(),
        group_log2 in 2u8..=8,
        uniform in any::<bool>(),
        block_log2 in 2u8..=6,
        rotate in any::<bool>(),
        wide in any::<bool>(),
        raw in 0u16..2,
        lanes in 0u8..=6,
        random_codes in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let x = kv_like(tokens, 64);
        let n = x.len();
        let raw_rows = raw.min(tokens as u16 - 1);
        let inner = if version3 {
            let p = V3Params {
                bits,
                levels: if uniform { LevelSet::Uniform } else { LevelSet::LloydMax },
                block_log2,
                rotate,
                seed,
                width: 64,
                raw_rows,
                scale: ScaleRule::Rms,
                wide_scales: wide,
            };
            segment_rot::encode(&p, &x).unwrap()
        } else {
            let p = V2Params {
                bits,
                group_log2,
                axis: if columns { Axis::Columns } else { Axis::Flat },
                width: 64,
                raw_rows,
                clip_search: false,
            };
            segment_v2::encode(&p, &x).unwrap()
        };
        let inner = if random_codes { with_random_codes(&inner, seed) } else { inner };
        if let Some(env) = wrap(&inner, lanes).unwrap() {
            let seg = SegmentV5::parse(&env).unwrap();
            let mut out = Vec::new();
            seg.decode(n, &mut out).unwrap();
            let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(&got, &oracle(&env, n));
            prop_assert_eq!(got, decoded(&inner, n));
            if version3 {
                // The scalar path from code bytes against the scalar path from packed codes.
                let (at, m) = code_region(&inner).unwrap();
                let mut codes = vec![0u8; m];
                unpack_unchecked(&inner[at..], bits, &mut codes);
                let head = SegmentV3::parse_head(&inner[..at]).unwrap();
                let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
                head.decode_codes_with(&codes, &mut a, false).unwrap();
                SegmentV3::parse(&inner).unwrap().decode_with(&mut b, false).unwrap();
                prop_assert_eq!(
                    a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn the_wide_writer_stores_64_lanes_that_decode_to_the_same_values() {
    use crate::layout::V5_WIDE_LANES_LOG2;
    // One KV block: 256 tokens x 64 channels, 4-bit per channel (codec 4 tier 3 keys).
    let x = kv_like(256, 64);
    let inner = v2(4, Axis::Columns, 1, &x);
    let narrow = encode_smallest(inner.clone()).unwrap();
    let wide = encode_smallest_with(inner.clone(), V5_WIDE_LANES_LOG2).unwrap();
    assert_eq!(
        (narrow[V5_LANES_LOG2_OFFSET], wide[V5_LANES_LOG2_OFFSET]),
        (2, 6)
    );
    // 60 more lane states (240 bytes), less the stream words their extra bits replace.
    let extra = wide.len() as i64 - narrow.len() as i64;
    assert!((120..=260).contains(&extra), "{extra}");
    assert_eq!(decoded(&wide, x.len()), decoded(&narrow, x.len()));
    assert_eq!(decoded(&wide, x.len()), decoded(&inner, x.len()));
}

/// The golden test's pattern over 4096 values (eight groups of 512), whose envelopes with
/// 16 and 64 lanes are shorter than the segment.
fn golden_wide_inner() -> Vec<u8> {
    let x: Vec<f32> = (0..4096)
        .map(|i| match (i % 8, i % 16) {
            (0, _) => 1.0,
            (_, 4) => -1.0,
            _ => 0.1,
        })
        .collect();
    let p = V2Params {
        bits: 2,
        group_log2: 9,
        axis: Axis::Flat,
        width: 1,
        raw_rows: 0,
        clip_search: false,
    };
    segment_v2::encode(&p, &x).unwrap()
}

/// 16 and 64 lanes (session 15), written as `scripts/rans_v5_golden.py INNER_HEX 4` (and
/// `6`) writes them: the independent transcription and the encoder agree byte for byte,
/// and both envelopes rebuild the segment.
#[test]
fn golden_wide_envelope_bytes() {
    let inner = golden_wide_inner();
    let hex = |b: &[u8]| b.iter().map(|v| format!("{v:02x}")).collect::<String>();
    for (lanes_log2, golden) in [
        (4u8, GOLDEN_ENVELOPE_16_LANES),
        (6, GOLDEN_ENVELOPE_64_LANES),
    ] {
        let env = wrap(&inner, lanes_log2).unwrap().unwrap();
        assert_eq!(hex(&env), golden, "lanes_log2 {lanes_log2}");
        assert_eq!(SegmentV5::parse(&env).unwrap().inner(4096).unwrap(), inner);
        assert_eq!(decoded(&env, 4096), decoded(&inner, 4096));
    }
}

const GOLDEN_ENVELOPE_16_LANES: &str = concat!(
    "545154430d0a1a0a050202040400100000260000000009001000000100000001",
    "562b3b000080bf00000000ff00ff00ff00ff00ff00ff00ff00ff0001000d020f",
    "000100a241c319a241c319a241c31900000100a241c319a241c319a241c3190f",
    "000100a241c319a241c319a241c319a241c319a241c319a241c319a241c319ff",
    "ff0000ffff0000ffffffff0000ffffffff0000ffff0000ffff0000ffffffff00",
    "00ffffffff0000ffff0000ffff0000ffffffff0000ffff6d3b6d3b6d3b6d3b6d",
    "3b6d3bffff6d3b6d3b6d3b6d3b6d3b6d3b6d3b0000ffff0000ffff0000ffffff",
    "ff0000ffffffff0000ffff0000ffff0000ffffffff0000ffffffff0000ffff00",
    "00ffff0000ffffffff0000ffffffff0000ca25ca25ca25ca25ca25ca25ca25ca",
    "25ca25ca25ca25ca25ca25ffff0000ffff0000ffffffff0000ffffffff0000ff",
    "ff0000ffff0000ffffffff0000ffffffff0000ffff0000ffff0000ffffffff00",
    "00ffffffff0000ffff0000ffff0000ffffabb4abb4abb4abb4abb4abb4ffffab",
    "b4abb4abb4abb4abb4abb4abb40000ffffffff0000ffff0000ffff0000ffffff",
    "ff0000ffffffff0000ffff0000ffff0000ffffffff0000ffffffff0000ffff00",
    "00ffff0000ffffffff0000ffff7dbb7dbb7dbb7dbb7dbb7dbbffff7dbb7dbb7d",
    "bb7dbb7dbb7dbb7dbb0000ffff0000ffff0000ffffffff0000ffffffff0000ff",
    "ff0000ffff0000ffffffff0000fefffeff0000feff0000feff0000fefffeff00",
    "00fefffeff0000",
);
const GOLDEN_ENVELOPE_64_LANES: &str = concat!(
    "545154430d0a1a0a050202060400100000260000000009001000000100000001",
    "562b3b000080bf00000000ff00ff00ff00ff00ff00ff00ff00ff0001000d020f",
    "000100f9020900f9020900f902090000000100f9020900f9020900f90209000f",
    "000100f9020900f9020900f9020900f9020900f9020900f9020900f90209000f",
    "000100f9020900f9020900f902090000000100f9020900f9020900f90209000f",
    "000100f9020900f9020900f9020900f9020900f9020900f9020900f90209000f",
    "000100f9020900f9020900f902090000000100f9020900f9020900f90209000f",
    "000100f9020900f9020900f9020900f9020900f9020900f9020900f90209000f",
    "000100f9020900f9020900f902090000000100f9020900f9020900f90209000f",
    "000100f9020900f9020900f9020900f9020900f9020900f9020900f9020900ff",
    "ff0000ffffffff0000ffffffff0000ffffffff0000ffff0000000000000000ff",
    "ffffffffffffffffffffffffffffff0000000000000000ffff7dbb7dbb7dbb7d",
    "bb7dbb7dbbffff7dbb7dbb7dbb7dbb7dbb7dbb7dbbffff7dbb7dbb7dbb7dbb7d",
    "bb7dbbffff7dbb7dbb7dbb7dbb7dbb7dbb7dbbffff7dbb7dbb7dbb7dbb7dbb7d",
    "bbffff7dbb7dbb7dbb7dbb7dbb7dbb7dbbffff7dbb7dbb7dbb7dbb7dbb7dbbff",
    "ff7dbb7dbb7dbb7dbb7dbb7dbb7dbb0000000000000000ffff0000ffffffff00",
    "00ffffffff0000ffffffff0000ffff0000000000000000ffffffffffffffffff",
    "ffffffffffffff0000000000000000ffffffffffffffffffffffffffffffff00",
    "00000000000000ffff0000ffffffff0000ffffffff0000ffffffff0000ffff00",
    "00000000000000ffffffffffffffffffffffffffffffff0000000000000000fe",
    "fffefffefffefffefffefffefffeff0000000000000000feff0000fefffeff00",
    "00fefffeff0000fefffeff0000feff0000000000000000fefffefffefffefffe",
    "fffefffefffeff0000000000000000fefffefffefffefffefffefffefffeff00",
    "00000000000000",
);

#[test]
fn wide_lanes_wrap_every_inner_version_and_7_or_more_is_refused() {
    // review15: 16, 32 and 64 lanes around a v2, a v3 and a v4 segment decode to the
    // inner segment's values (the vector kernel this CPU has), the codes agree with the
    // portable loop, and every lanes_log2 past 6 is refused naming the field and offset.
    let x = kv_like(256, 64);
    for inner in [v2(4, Axis::Columns, 1, &x), v3(5, &x), v4(4, true, &x)] {
        let want = decoded(&inner, x.len());
        for lanes in 4..=6u8 {
            let env = wrap(&inner, lanes).unwrap().expect("the codes compress");
            assert_eq!(env[V5_LANES_LOG2_OFFSET], lanes);
            assert_eq!(
                decoded(&env, x.len()),
                want,
                "inner v{} lanes {lanes}",
                inner[8]
            );
            let seg = SegmentV5::parse(&env).unwrap();
            assert_eq!(seg.inner(x.len()).unwrap(), inner);
            for bad in 7..=u8::MAX {
                let mut b = env.clone();
                b[V5_LANES_LOG2_OFFSET] = bad;
                let e = field_err(&b);
                assert!(
                    matches!(e, QuantError::CorruptField { field: "lanes_log2", offset, .. } if offset == V5_LANES_LOG2_OFFSET),
                    "{bad}: {e}"
                );
            }
        }
    }
}
