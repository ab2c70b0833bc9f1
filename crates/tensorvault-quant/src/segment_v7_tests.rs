use super::*;
use crate::layout::{RANS_L, V7_BITS_OFFSET, V7_MAX_MAGNITUDE_LOG2, VERSION_OFFSET};
use proptest::prelude::*;

/// Gaussian-ish values with a block-varying scale and a few outliers.
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            let mut g = -1.5f32;
            for _ in 0..3 {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                g += (s & 0xFFFF) as f32 / 65535.0;
            }
            let scale = 0.02 * (1.0 + (i / 700 % 4) as f32);
            if i % 997 == 5 {
                g * scale * 20.0
            } else {
                g * scale
            }
        })
        .collect()
}

fn params(bits: u8, block_log2: u8, lanes_log2: u8) -> V7Params {
    V7Params {
        bits,
        block_log2,
        seed: 0x5EED,
        lanes_log2,
    }
}

/// The rotated values an encoder quantizes (whole blocks rotated).
fn rotated(p: &V7Params, x: &[f32]) -> Vec<f32> {
    rotate(p, x).unwrap().y
}

fn dec(bytes: &[u8]) -> Result<Vec<f32>, QuantError> {
    let mut y = Vec::new();
    decode(bytes, V7_MAX_VALUES, &mut y)?;
    Ok(y)
}

#[test]
fn golden_bytes_are_pinned() {
    // 8 values, 2 blocks of 4, 3-bit codes, 1 lane: every byte of the format.
    let x = [0.5f32, -1.25, 0.75, 2.0, -0.1, 0.05, 0.3, -0.2];
    let p = params(3, 2, 0);
    let bytes = encode(&p, &x, 0.25).unwrap();
    let want: Vec<u8> = vec![
        0x54, 0x51, 0x54, 0x43, 0x0D, 0x0A, 0x1A, 0x0A, // magic
        7, 3, 2, 0, // version, k, b, lanes_log2
        0xED, 0x5E, 0, 0, // seed
        8, 0, 0, 0, // n
        0x00, 0x00, 0x80, 0x3E, // step 0.25
    ];
    assert_eq!(&bytes[..V7_HEADER_LEN], &want[..]);
    assert_eq!(bytes, GOLDEN.to_vec(), "{bytes:02x?}");
    let y = dec(&bytes).unwrap();
    assert_eq!(y.len(), 8);
    let yb: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
    assert_eq!(yb, GOLDEN_VALUES.to_vec(), "{y:?}");
}

const GOLDEN: [u8; 32] = [
    0x54, 0x51, 0x54, 0x43, 0x0d, 0x0a, 0x1a, 0x0a, 0x07, 0x03, 0x02, 0x00, 0xed, 0x5e, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3e, 0x65, 0x3a, 0xfe, 0x50, 0x05, 0x00, 0xc4, 0xaf,
];
/// The decoding of [`GOLDEN`]: 0.0, -0.5, -0.0, 1.25, -0.25, 0.0, 0.25, -0.25 (the first
/// block's rotated values reach 2, past the 3-bit alphabet's 1.0 at this step: clamped).
const GOLDEN_VALUES: [u32; 8] = [
    0,
    3_204_448_256,
    2_147_483_648,
    1_067_450_368,
    3_196_059_648,
    0,
    1_048_576_000,
    3_196_059_648,
];

#[test]
fn round_trip_is_within_half_a_step_before_the_inverse_rotation() {
    let x = data(4096, 11);
    for (bits, lanes) in [(6u8, 0u8), (7, 2), (10, 3), (12, 1)] {
        let p = params(bits, 10, lanes);
        let bytes = encode_to_fit(&p, &x, 2688).unwrap().expect("fits");
        assert!(bytes.len() <= 2688);
        let seg = SegmentV7::parse(&bytes).unwrap();
        let y = dec(&bytes).unwrap();
        // Rotate the decoding forward again: each value within step/2 of the input's
        // rotation (up to f32 rounding of the two transforms).
        let ry = rotated(&p, &y);
        let rx = rotated(&p, &x);
        let tol = seg.step() * 0.5 + seg.step() * 1e-3;
        let inside = (1i32 << (bits - 1)) as f32 * seg.step() * 0.999;
        for (a, b) in rx.iter().zip(&ry) {
            if a.abs() < inside {
                assert!(
                    (a - b).abs() <= tol,
                    "bits {bits}: {a} vs {b}, step {}",
                    seg.step()
                );
            }
        }
    }
}

#[test]
fn encode_to_fit_is_deterministic_and_takes_the_finest_fitting_rung() {
    let x = data(4096, 3);
    let p = params(7, 10, 2);
    let a = encode_to_fit(&p, &x, 2688).unwrap().unwrap();
    let b = encode_to_fit(&p, &x, 2688).unwrap().unwrap();
    assert_eq!(a, b);
    // The next finer rung does not fit.
    let r = rotate(&p, &x).unwrap();
    let s0 = (r.max_abs / 64.0).max(f32::MIN_POSITIVE);
    let step = SegmentV7::parse(&a).unwrap().step();
    let t = (V7_RATE_MIN..=V7_RATE_RUNGS)
        .find(|&t| step_at(s0, t) == step)
        .unwrap();
    assert!(t > 0);
    assert!(encode_at(&p, &r, step_at(s0, t - 1)).len() > 2688);
    // A budget too small for anything.
    assert!(encode_to_fit(&p, &x, 40).unwrap().is_none());
    // A generous budget: from the clamp-free step down while the error falls; the next
    // finer rung has no less error.
    let big = encode_to_fit(&p, &x, 1 << 20).unwrap().unwrap();
    let step = SegmentV7::parse(&big).unwrap().step();
    let t = (V7_RATE_MIN..=0).find(|&t| step_at(s0, t) == step).unwrap();
    let err = |t| squared_error(&r, step_at(s0, t), 64);
    assert!(t < 0, "some clamping pays on Gaussian-like blocks");
    assert!(err(t) < err(0) && err(t - 1) >= err(t), "rung {t}");
}

#[test]
fn a_tighter_budget_gives_a_coarser_step_and_more_error() {
    let x = data(4096, 5);
    let p = params(10, 10, 2);
    let err = |budget: usize| {
        let b = encode_to_fit(&p, &x, budget).unwrap().unwrap();
        let y = dec(&b).unwrap();
        x.iter()
            .zip(&y)
            .map(|(a, b)| f64::from(a - b).powi(2))
            .sum::<f64>()
    };
    let (e1, e2, e3) = (err(4224), err(2688), err(1728));
    assert!(e1 < e2 && e2 < e3, "{e1} {e2} {e3}");
}

#[test]
fn a_short_last_block_is_coded_unrotated() {
    let x = data(1000, 9); // 3 blocks of 256 and one of 232
    let p = params(8, 8, 1);
    let bytes = encode(&p, &x, 0.004).unwrap();
    let seg = SegmentV7::parse(&bytes).unwrap();
    assert_eq!(seg.sides().len(), 4);
    let y = dec(&bytes).unwrap();
    for (a, b) in x[768..].iter().zip(&y[768..]) {
        assert!((a - b).abs() <= 0.002 + 1e-6, "{a} {b}");
    }
}

#[test]
fn all_zero_input_decodes_to_near_zero() {
    let x = vec![0f32; 512];
    let bytes = encode_to_fit(&params(6, 9, 0), &x, 200).unwrap().unwrap();
    assert!(dec(&bytes).unwrap().iter().all(|v| v.abs() < 1e-30));
}

#[test]
fn bad_input_and_settings_are_refused() {
    let mut x = data(64, 1);
    x[17] = f32::NAN;
    assert!(matches!(
        encode(&params(6, 4, 0), &x, 0.01),
        Err(QuantError::NonFinite { index: 17, .. })
    ));
    assert!(matches!(
        encode_to_fit(&params(6, 4, 0), &x, 1000),
        Err(QuantError::NonFinite { index: 17, .. })
    ));
    let x = data(64, 1);
    for (p, field) in [
        (params(1, 4, 0), "bits"),
        (params(13, 4, 0), "bits"),
        (params(6, 1, 0), "block_log2"),
        (params(6, 11, 0), "block_log2"),
        (params(6, 4, 4), "lanes_log2"),
    ] {
        assert!(
            matches!(encode(&p, &x, 0.01), Err(QuantError::InvalidParam { field: f, .. }) if f == field),
            "{field}"
        );
    }
    for step in [0.0, -1.0, f32::NAN, f32::INFINITY, 1e38] {
        assert!(matches!(
            encode(&params(6, 4, 0), &x, step),
            Err(QuantError::InvalidParam { field: "step", .. })
        ));
    }
    assert!(matches!(
        encode(&params(6, 4, 0), &[], 0.01),
        Err(QuantError::InvalidParam {
            field: "values",
            ..
        })
    ));
    // Values so large the rotation overflows.
    let huge = vec![f32::MAX; 16];
    assert!(matches!(
        encode(&params(6, 4, 0), &huge, 1.0),
        Err(QuantError::ScaleOverflow { .. })
    ));
}

fn sample() -> Vec<u8> {
    encode(&params(7, 6, 2), &data(300, 2), 0.003).unwrap()
}

fn field_err(bytes: &[u8]) -> Option<(&'static str, usize)> {
    match SegmentV7::parse(bytes) {
        Err(QuantError::CorruptField { field, offset, .. }) => Some((field, offset)),
        _ => None,
    }
}

#[test]
fn every_header_field_out_of_range_is_named_with_its_offset() {
    let good = sample();
    assert!(dec(&good).is_ok());
    let set = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    for (at, v, field) in [
        (V7_BITS_OFFSET, vec![1u8], "bits"),
        (V7_BITS_OFFSET, vec![13], "bits"),
        (V7_BLOCK_LOG2_OFFSET, vec![1], "block_log2"),
        (V7_BLOCK_LOG2_OFFSET, vec![11], "block_log2"),
        (V7_LANES_LOG2_OFFSET, vec![4], "lanes_log2"),
        (V7_VALUES_OFFSET, 0u32.to_le_bytes().to_vec(), "values"),
        (
            V7_VALUES_OFFSET,
            (1u32 << 20 | 1).to_le_bytes().to_vec(),
            "values",
        ),
        (V7_STEP_OFFSET, 0f32.to_le_bytes().to_vec(), "step"),
        (V7_STEP_OFFSET, (-1f32).to_le_bytes().to_vec(), "step"),
        (V7_STEP_OFFSET, f32::NAN.to_le_bytes().to_vec(), "step"),
        (V7_STEP_OFFSET, f32::INFINITY.to_le_bytes().to_vec(), "step"),
        (
            V7_STEP_OFFSET,
            2f32.powi(V7_MAX_MAGNITUDE_LOG2 - 6 - 3)
                .to_le_bytes()
                .to_vec(),
            "step",
        ),
    ] {
        assert_eq!(field_err(&set(at, &v)), Some((field, at)), "{field} {v:?}");
    }
    assert!(matches!(
        SegmentV7::parse(&set(0, b"X")),
        Err(QuantError::BadMagic)
    ));
    assert!(matches!(
        SegmentV7::parse(&set(VERSION_OFFSET, &[6])),
        Err(QuantError::UnsupportedVersion { version: 6, .. })
    ));
    // The largest step the bound allows still parses.
    let edge = 2f32.powi(V7_MAX_MAGNITUDE_LOG2 - 6 - 3) * 0.99;
    assert!(SegmentV7::parse(&set(V7_STEP_OFFSET, &edge.to_le_bytes())).is_ok());
}

#[test]
fn truncation_at_every_offset_is_a_typed_error() {
    let good = sample();
    for len in 0..good.len() {
        let r = dec(&good[..len]);
        assert!(
            matches!(
                r,
                Err(QuantError::Truncated { .. }
                    | QuantError::CorruptField { .. }
                    | QuantError::TrailingBytes { .. })
            ),
            "len {len}: {r:?}"
        );
    }
    // Header and side bytes are named as truncated.
    assert!(matches!(
        SegmentV7::parse(&good[..V7_HEADER_LEN - 1]),
        Err(QuantError::Truncated {
            what: "v7 header",
            ..
        })
    ));
    assert!(matches!(
        SegmentV7::parse(&good[..V7_HEADER_LEN + 2]),
        Err(QuantError::Truncated {
            what: "v7 side bytes",
            ..
        })
    ));
    // A trailing word is refused.
    let mut long = good.clone();
    long.extend_from_slice(&[0, 0]);
    assert!(matches!(dec(&long), Err(QuantError::TrailingBytes { .. })));
    // The caller's bound.
    let mut y = Vec::new();
    assert!(matches!(
        decode(&good, 299, &mut y),
        Err(QuantError::LengthMismatch { .. })
    ));
}

#[test]
fn lane_states_and_side_bytes_are_checked() {
    let good = sample();
    let states = V7_HEADER_LEN + 300usize.div_ceil(64);
    // A state below 2^16.
    for lane in 0..4 {
        let mut b = good.clone();
        let at = states + lane * 4;
        b[at..at + 4].copy_from_slice(&(RANS_L - 1).to_le_bytes());
        assert!(
            matches!(dec(&b), Err(QuantError::CorruptField { field: "rans state", offset, .. }) if offset == at),
            "lane {lane}"
        );
    }
    // Any other state change is caught by the final-state check or runs out of words.
    let mut b = good.clone();
    b[states + 1] ^= 0x40;
    assert!(dec(&b).is_err());
    // A side byte changed: never a panic; the stream no longer ends where it must.
    let mut caught = 0;
    for j in 0..5 {
        for delta in [1u8, 7, 128] {
            let mut b = good.clone();
            b[V7_HEADER_LEN + j] = b[V7_HEADER_LEN + j].wrapping_add(delta);
            if dec(&b).is_err() {
                caught += 1;
            }
        }
    }
    assert!(caught >= 12, "{caught} of 15 side-byte changes detected");
    // An odd-length stream.
    let mut b = good.clone();
    b.push(0);
    assert!(matches!(
        dec(&b),
        Err(QuantError::CorruptField {
            field: "rans stream",
            ..
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn round_trip_within_the_budget(
        n in 1usize..3000,
        seed in any::<u32>(),
        bits in 2u8..=12,
        block_log2 in 2u8..=10,
        lanes_log2 in 0u8..=3,
        budget in 64usize..6000,
    ) {
        let x = data(n, seed);
        let p = V7Params { bits, block_log2, seed, lanes_log2 };
        if let Some(bytes) = encode_to_fit(&p, &x, budget).unwrap() {
            prop_assert!(bytes.len() <= budget);
            let seg = SegmentV7::parse(&bytes).unwrap();
            let y = dec(&bytes).unwrap();
            prop_assert_eq!(y.len(), n);
            // Every value the step does not clamp is within step/2.
            let (rx, ry) = (rotated(&p, &x), rotated(&p, &y));
            let tol = seg.step() * 0.5 + seg.step() * 1e-3;
            let inside = (1i32 << (bits - 1)) as f32 * seg.step() * 0.999;
            for (a, b) in rx.iter().zip(&ry) {
                if a.abs() < inside {
                    prop_assert!((a - b).abs() <= tol, "{} vs {}", a, b);
                }
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut b = sample();
        b.truncate(V7_HEADER_LEN + 5);
        b.extend_from_slice(&tail);
        let _ = dec(&b);
    }
}

#[test]
fn a_row_gain_envelope_wraps_a_v7_segment() {
    use crate::segment_v6::{self, SegmentV6};
    let x = data(4096, 21);
    let (width, first) = (576u16, 64u16);
    let budget = 4224 - segment_v6::envelope_len(x.len(), width, first).unwrap();
    let inner = encode_to_fit(&params(10, 10, 0), &x, budget)
        .unwrap()
        .unwrap();
    let env = segment_v6::wrap(&inner, &x, width, first).unwrap();
    assert!(env.len() <= 4224);
    let seg = SegmentV6::parse(&env).unwrap();
    assert_eq!(seg.inner(), inner);
    let (mut plain, mut gained) = (Vec::new(), Vec::new());
    crate::segment_v5::decode_any(&inner, 4096, &mut plain).unwrap();
    segment_v6::decode(&env, 4096, &mut gained).unwrap();
    let gains: Vec<f32> = seg.gains().collect();
    assert!(gains.iter().any(|&g| g != 1.0));
    assert!(plain
        .iter()
        .zip(&gained)
        .all(|(p, v)| gains.iter().any(|g| (p * g).to_bits() == v.to_bits())));
    // The envelope's width byte: 2..=12 over a v7 inner segment, 2..=8 over any other.
    let mut bad = env.clone();
    bad[9] = 13;
    assert!(matches!(
        SegmentV6::parse(&bad),
        Err(QuantError::CorruptField {
            field: "bits",
            offset: 9,
            ..
        })
    ));
    let mut other = env.clone();
    other[10] = 3; // inner version 3 with 10-bit codes
    assert!(matches!(
        SegmentV6::parse(&other),
        Err(QuantError::CorruptField {
            field: "bits",
            offset: 9,
            ..
        })
    ));
}

#[test]
fn a_decode_looks_each_side_byte_up_once() {
    // review14: 4096 values in blocks of 4 (1024 side bytes) looked the shared cache up
    // once per block (lock, scan of up to 256 entries, and a rebuild per block when
    // another thread evicts); now once per distinct side byte.
    let bytes = encode(&params(6, 2, 0), &data(4096, 9), 0.004).unwrap();
    let seg = SegmentV7::parse(&bytes).unwrap();
    let mut distinct = seg.sides().to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 1 && distinct.len() < seg.sides().len());
    let before = crate::ecsq_model::LOOKUPS.with(std::cell::Cell::get);
    let y = dec(&bytes).unwrap();
    let after = crate::ecsq_model::LOOKUPS.with(std::cell::Cell::get);
    assert_eq!(y.len(), 4096);
    assert_eq!(after - before, distinct.len());
}
