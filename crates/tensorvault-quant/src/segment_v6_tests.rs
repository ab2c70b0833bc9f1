use super::*;
use crate::ecsq::{encode_to_fit, EcsqParams};
use crate::layout::V6_INNER_SKIP;
use crate::levels::LevelSet;
use crate::segment_rot::{self, ScaleRule, V3Params};
use crate::segment_v5::wrap as v5_wrap;
use proptest::prelude::*;

/// Rows of `width` values with norms that differ from row to row (what a gain corrects).
fn rows(n: usize, width: usize, seed: u32) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let u = (s & 0xFFFF) as f32 / 65535.0 - 0.5;
            u * (1.0 + (i / width % 5) as f32 * 0.3)
        })
        .collect()
}

fn v3(bits: u8, block_log2: u8, x: &[f32]) -> Vec<u8> {
    let p = V3Params {
        bits,
        levels: LevelSet::Uniform,
        block_log2,
        rotate: true,
        seed: 7,
        width: 1,
        raw_rows: 0,
        scale: ScaleRule::Max,
        wide_scales: false,
    };
    segment_rot::encode(&p, x).unwrap()
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

#[test]
fn parts_count_row_pieces() {
    assert_eq!(parts(4096, 576, 0).unwrap(), 8); // 7 whole rows + 64 values
    assert_eq!(parts(4096, 576, 512).unwrap(), 8);
    assert_eq!(parts(4096, 576, 513).unwrap(), 9);
    assert_eq!(parts(4096, 4096, 0).unwrap(), 1);
    assert_eq!(parts(10, 3, 2).unwrap(), 4); // [0], [1..4], [4..7], [7..10]
    assert_eq!(envelope_len(10, 3, 2).unwrap(), 20 + 4 - 10);
    let parts_of = |n, w, f| row_parts(n, w, f).collect::<Vec<_>>();
    assert_eq!(parts_of(10, 3, 2), vec![0..1, 1..4, 4..7, 7..10]);
    assert_eq!(parts_of(5, 8, 1), vec![0..5]);
    assert_eq!(parts_of(6, 3, 0), vec![0..3, 3..6]);
}

#[test]
fn gains_make_each_row_part_unbiased() {
    let x = rows(4096, 576, 3);
    for (inner, first) in [(v3(5, 6, &x), 0u16), (v3(3, 10, &x), 300)] {
        let bytes = wrap(&inner, &x, 576, first).unwrap();
        assert_eq!(
            bytes.len(),
            envelope_len(4096, 576, first).unwrap() + inner.len()
        );
        let seg = SegmentV6::parse(&bytes).unwrap();
        assert_eq!(seg.inner(), inner);
        let (mut plain, mut y) = (Vec::new(), Vec::new());
        decode_any(&inner, 4096, &mut plain).unwrap();
        seg.decode(4096, &mut y).unwrap();
        let gains: Vec<f32> = seg.gains().collect();
        assert_eq!(gains.len(), parts(4096, 576, first).unwrap());
        let mut moved = 0;
        for (r, g) in row_parts(4096, 576, first).zip(&gains) {
            // Exactly the inner decoding times the gain.
            for (a, b) in y[r.clone()].iter().zip(&plain[r.clone()]) {
                assert_eq!(a.to_bits(), (b * g).to_bits());
            }
            // Unbiased within f16 rounding of the gain; the plain decoding is not.
            let (xx, before, after) = (
                dot(&x[r.clone()], &x[r.clone()]),
                dot(&x[r.clone()], &plain[r.clone()]),
                dot(&x[r.clone()], &y[r.clone()]),
            );
            assert!((after / xx - 1.0).abs() < 3e-4, "{after} vs {xx}");
            if (before / xx - 1.0).abs() > 2e-3 {
                moved += 1;
            }
        }
        assert!(moved > 0, "no row part was biased: the test proves nothing");
    }
}

#[test]
fn wraps_v5_envelopes_and_ecsq_fits_with_the_budget() {
    let x = rows(4096, 384, 5);
    let p = EcsqParams {
        bits: 5,
        block_log2: 10,
        seed: 9,
        rotate: true,
        lanes_log2: 0,
    };
    let budget = 1728 - envelope_len(4096, 384, 128).unwrap();
    let inner = encode_to_fit(&p, &x, budget).unwrap().unwrap();
    assert_eq!(inner[VERSION_OFFSET], 5);
    let bytes = wrap(&inner, &x, 384, 128).unwrap();
    assert!(bytes.len() <= 1728);
    let mut y = Vec::new();
    decode(&bytes, 4096, &mut y).unwrap();
    let err = x.iter().zip(&y).map(|(a, b)| (a - b).powi(2)).sum::<f32>() / dot(&x, &x) as f32;
    assert!(err < 0.05, "relative MSE {err}");
    // v2 and v4 inner segments too.
    let v2p = crate::segment_v2::V2Params {
        bits: 4,
        group_log2: 6,
        axis: crate::segment_v2::Axis::Flat,
        width: 1,
        raw_rows: 0,
        clip_search: false,
    };
    let v2 = crate::segment_v2::encode(&v2p, &x).unwrap();
    decode(&wrap(&v2, &x, 384, 0).unwrap(), 4096, &mut y).unwrap();
    let v4p = crate::segment_v4::V4Params {
        bits: 3,
        group_log2: 5,
        super_log2: 10,
        scale_bits: 5,
        min_bits: 4,
        rotate: true,
        seed: 1,
        clip_search: false,
    };
    let v4 = crate::segment_v4::encode(&v4p, &x).unwrap();
    decode(&wrap(&v4, &x, 384, 0).unwrap(), 4096, &mut y).unwrap();
    assert_eq!(y.len(), 4096);
}

/// Pinned bytes: 12 values, rows of 5, starting 3 values into a row (parts [0..2],
/// [2..7], [7..12]); inner = a v3 segment of 3-bit uniform levels over unrotated blocks
/// of 4 (`docs/formats/quant.md` §13 walks through this segment).
#[test]
fn golden_bytes() {
    let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.25).collect();
    let p = V3Params {
        bits: 3,
        levels: LevelSet::Uniform,
        block_log2: 2,
        rotate: false,
        seed: 0,
        width: 1,
        raw_rows: 0,
        scale: ScaleRule::Rms,
        wide_scales: false,
    };
    let inner = segment_rot::encode(&p, &x).unwrap();
    let bytes = wrap(&inner, &x, 5, 3).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(&bytes[..V6_HEADER_LEN + 3], &GOLDEN_HEAD[..], "{hex}");
    assert_eq!(&bytes[V6_HEADER_LEN + 3..], &inner[V6_INNER_SKIP..]);
    let mut y = Vec::new();
    decode(&bytes, 12, &mut y).unwrap();
    let want: Vec<u32> = GOLDEN_VALUES.to_vec();
    assert_eq!(
        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want,
        "{y:?}"
    );
}

const GOLDEN_HEAD: [u8; 23] = [
    0x54, 0x51, 0x54, 0x43, 0x0d, 0x0a, 0x1a, 0x0a, // magic
    6, 3, 3, 0, // version 6, bits 3, inner version 3, reserved
    12, 0, 0, 0, // n = 12
    5, 0, // width = 5
    3, 0, // first = 3
    153, 0, 44, // gain codes: 1.0122, 0.9375 (clamped: 0.859 wanted), 0.9590
];
/// f32 bits of the decoding: -1.5397701, -0.9238621, -0.85567546 (x2), -0.38880026,
/// -0.07776006, 0.07776006, 0.3977103, 0.8752847 (x3), 1.4588078.
const GOLDEN_VALUES: [u32; 12] = [
    3217364784, 3211559482, 3210415500, 3210415500, 3200717012, 3181330603, 1033846955, 1053532335,
    1063260840, 1063260840, 1063260840, 1069201975,
];

fn envelope() -> Vec<u8> {
    let x = rows(256, 64, 11);
    wrap(&v3(4, 6, &x), &x, 64, 0).unwrap()
}

fn err_of(bytes: &[u8]) -> QuantError {
    match SegmentV6::parse(bytes) {
        Err(e) => e,
        Ok(s) => s.decode(1 << 20, &mut Vec::new()).unwrap_err(),
    }
}

fn field(e: &QuantError) -> (&'static str, usize) {
    match e {
        QuantError::CorruptField { field, offset, .. } => (field, *offset),
        other => panic!("not a CorruptField: {other:?}"),
    }
}

#[test]
fn bits_out_of_range_around_a_v7_segment_name_v7s_range() {
    // Around a version 7 segment the envelope's bits may be 9..=12; beyond that the error
    // states v7's range, not the 2..=8 of the other inner versions.
    let mut b = envelope();
    b[10] = crate::layout::V7_VERSION;
    for (bits, want) in [
        (13u8, "must be in 2..=12 around a version 7 segment"),
        (1, "must be in 2..=12 around a version 7 segment"),
    ] {
        b[BITS_OFFSET] = bits;
        match SegmentV6::parse(&b) {
            Err(QuantError::CorruptField {
                field,
                offset,
                value,
                reason,
            }) => {
                assert_eq!(
                    (field, offset, value),
                    ("bits", BITS_OFFSET, u64::from(bits))
                );
                assert_eq!(reason, want);
            }
            other => panic!("bits {bits}: {other:?}"),
        }
    }
    // Other inner versions keep the common range's message.
    let mut b = envelope();
    b[BITS_OFFSET] = 9;
    match SegmentV6::parse(&b) {
        Err(QuantError::CorruptField { reason, .. }) => assert_eq!(reason, "must be in 2..=8"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn crafted_headers_are_refused_naming_field_and_offset() {
    let good = envelope();
    let set = |off: usize, v: &[u8]| {
        let mut b = good.clone();
        b[off..off + v.len()].copy_from_slice(v);
        b
    };
    assert!(matches!(
        err_of(&good[..10]),
        QuantError::Truncated {
            what: "v6 header",
            ..
        }
    ));
    assert_eq!(err_of(&set(0, b"X")), QuantError::BadMagic);
    assert!(matches!(
        err_of(&set(VERSION_OFFSET, &[7])),
        QuantError::UnsupportedVersion {
            version: 7,
            offset: 8
        }
    ));
    assert_eq!(field(&err_of(&set(BITS_OFFSET, &[9]))), ("bits", 9));
    assert_eq!(field(&err_of(&set(10, &[6]))), ("inner_version", 10));
    assert_eq!(field(&err_of(&set(10, &[1]))), ("inner_version", 10));
    assert_eq!(field(&err_of(&set(11, &[1]))), ("reserved", 11));
    assert_eq!(
        field(&err_of(&set(12, &0u32.to_le_bytes()))),
        ("values", 12)
    );
    assert_eq!(field(&err_of(&set(16, &0u16.to_le_bytes()))), ("width", 16));
    assert_eq!(
        field(&err_of(&set(18, &64u16.to_le_bytes()))),
        ("first", 18)
    );
    // A huge value count: the gains it implies are not there (nothing allocated).
    assert!(matches!(
        err_of(&set(12, &u32::MAX.to_le_bytes())),
        QuantError::Truncated {
            what: "v6 gains",
            ..
        }
    ));
    assert!(matches!(
        err_of(&good[..V6_HEADER_LEN + 3]),
        QuantError::Truncated {
            what: "v6 gains",
            offset: 20,
            end: 24,
            present: 23
        }
    ));
    // The rebuilt inner segment is checked by its own parser: cut short, or its header
    // made inconsistent through the envelope's inner_version / bits.
    let gains_end = V6_HEADER_LEN + 4 * V6_GAIN_BYTES;
    assert!(matches!(
        err_of(&good[..gains_end]),
        QuantError::Truncated { .. }
    ));
    assert!(matches!(
        err_of(&good[..good.len() - 1]),
        QuantError::Truncated { .. }
    ));
    assert!(err_of(&set(10, &[2])) != QuantError::BadMagic);
    assert!(err_of(&set(9, &[5])) != QuantError::BadMagic);
    // n says 255 values, the inner segment holds 256: refused before decoding it all,
    // naming the envelope's field (the caller's bound, 1 << 20, is not what is wrong).
    assert_eq!(
        field(&err_of(&set(12, &255u32.to_le_bytes()))),
        ("values", 12)
    );
    // n says 256 values (one row part either way), the inner segment holds 192.
    let x = rows(192, 64, 2);
    let mut b = wrap(&v3(4, 6, &x), &x, 1000, 0).unwrap();
    b[12..16].copy_from_slice(&256u32.to_le_bytes());
    assert_eq!(field(&err_of(&b)), ("values", 12));
}

#[test]
fn every_gain_code_is_a_gain() {
    assert_eq!(gain_of(0), 0.9375);
    assert_eq!(gain_of(V6_GAIN_ZERO), 1.0);
    assert_eq!(gain_of(255), 1.0 + 127.0 / 2048.0);
    assert!((0..=255u8).all(|c| gain_of(c) > 0.9 && gain_of(c) < 1.07));
}

#[test]
fn decode_is_bounded_by_the_callers_count() {
    let good = envelope();
    assert!(matches!(
        SegmentV6::parse(&good)
            .unwrap()
            .decode(255, &mut Vec::new()),
        Err(QuantError::LengthMismatch {
            input: 256,
            output: 255,
            ..
        })
    ));
}

/// A v2 segment of `n` copies of `v` (a value near f32's limit decodes to itself).
fn v2_const(v: f32, n: usize) -> Vec<u8> {
    use crate::segment_v2::{encode, Axis, V2Params};
    let p = V2Params {
        bits: 2,
        group_log2: 4,
        axis: Axis::Flat,
        width: 1,
        raw_rows: 0,
        clip_search: false,
    };
    encode(&p, &vec![v; n]).unwrap()
}

#[test]
fn a_gain_that_takes_a_value_past_f32_is_refused_naming_its_code() {
    // The inner segment decodes within f32 (its parser checks its reach), but
    // 3.3e38 * 1.0620 is not a finite f32.
    let x = vec![3.3e38f32; 32];
    let inner = v2_const(3.3e38, 32);
    let mut y = Vec::new();
    decode_any(&inner, 32, &mut y).unwrap();
    assert!(y.iter().all(|v| v.is_finite() && *v > 3.2e38));
    let mut b = wrap(&inner, &x, 16, 0).unwrap();
    // Two row parts (codes at offsets 20 and 21); the second's gain is made the largest.
    b[V6_HEADER_LEN + 1] = 255;
    let e = decode(&b, 32, &mut y).unwrap_err();
    assert_eq!(field(&e), ("gain", V6_HEADER_LEN + 1), "{e}");
    // The encoder never writes such a code: against values at f32::MAX the policy's code
    // (1.03125, rounded up from 1.0312) overflows this decoding, so wrap writes gain 1.
    let x = vec![f32::MAX; 32];
    decode_any(&inner, 32, &mut y).unwrap();
    let c = gain_code(&x[..16], &y[..16]);
    assert!(c > V6_GAIN_ZERO && !(y[0] * gain_of(c)).is_finite());
    let b = wrap(&inner, &x, 16, 0).unwrap();
    assert_eq!(b[V6_HEADER_LEN..V6_HEADER_LEN + 2], [V6_GAIN_ZERO; 2]);
    decode(&b, 32, &mut y).unwrap();
    assert!(y.iter().all(|v| v.is_finite()));
}

#[test]
fn wrap_refuses_bad_arguments() {
    let x = rows(256, 64, 1);
    let inner = v3(4, 6, &x);
    assert!(matches!(
        wrap(&inner, &x, 0, 0),
        Err(QuantError::CorruptField { field: "width", .. })
    ));
    assert!(matches!(
        wrap(&inner, &x, 64, 64),
        Err(QuantError::CorruptField { field: "first", .. })
    ));
    assert!(matches!(
        wrap(&inner, &x[..128], 64, 0),
        Err(QuantError::LengthMismatch { .. })
    ));
    let nested = wrap(&inner, &x, 64, 0).unwrap();
    assert!(matches!(
        wrap(&nested, &x, 64, 0),
        Err(QuantError::UnsupportedVersion { version: 6, .. })
    ));
}

#[test]
fn gain_policy() {
    assert_eq!(gain_code(&[1.0, 2.0], &[1.0, 2.0]), V6_GAIN_ZERO);
    assert_eq!(gain_code(&[1.0, 2.0], &[0.99, 1.98]), 149); // 1/0.99 = 1 + 20.7/2048
    assert_eq!(gain_code(&[1.0, 2.0], &[0.5, 1.0]), 255); // clamped
    assert_eq!(gain_code(&[1.0, 2.0], &[4.0, 8.0]), 0);
    assert_eq!(gain_code(&[1.0, 2.0], &[-1.0, -2.0]), V6_GAIN_ZERO); // not positive
    assert_eq!(gain_code(&[0.0, 0.0], &[0.0, 0.0]), V6_GAIN_ZERO);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn round_trip_is_the_inner_decoding_times_the_gains(
        seed in any::<u32>(),
        width in 1u16..700,
        first_frac in 0.0f64..1.0,
        blocks in 1usize..5,
        bits in 2u8..=8,
    ) {
        let n = blocks * 256;
        let x = rows(n, width as usize, seed);
        let first = ((f64::from(width) * first_frac) as u16).min(width - 1);
        let inner = v3(bits, 8, &x);
        let inner = v5_wrap(&inner, 0).unwrap().unwrap_or(inner);
        let bytes = wrap(&inner, &x, width, first).unwrap();
        let seg = SegmentV6::parse(&bytes).unwrap();
        prop_assert_eq!(seg.values(), n);
        let (mut plain, mut y) = (Vec::new(), Vec::new());
        decode_any(&inner, n, &mut plain).unwrap();
        seg.decode(n, &mut y).unwrap();
        let mut gains = seg.gains();
        for r in row_parts(n, width, first) {
            let g = gains.next().unwrap();
            prop_assert_eq!(g, gain_of(gain_code(&x[r.clone()], &plain[r.clone()])));
            for (a, b) in y[r.clone()].iter().zip(&plain[r]) {
                prop_assert_eq!(a.to_bits(), (b * g).to_bits());
            }
        }
        prop_assert!(gains.next().is_none());
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut b = envelope();
        let at = data.first().map_or(0, |&i| usize::from(i) % b.len());
        for (i, v) in data.iter().skip(1).enumerate() {
            if let Some(slot) = b.get_mut(at + i) {
                *slot = *v;
            }
        }
        if let Ok(s) = SegmentV6::parse(&b) {
            let _ = s.decode(1 << 12, &mut Vec::new());
        }
    }
}
