use super::*;
use crate::layout::{RANS_L, V7_RATE_MIN, V8_BITS_OFFSET, VERSION_OFFSET};
use proptest::prelude::*;

/// Key-like rows: `rows x width`, each channel on its own offset and spread (a few
/// channels 30x wider than the rest), Gaussian-ish noise.
fn keys(rows: usize, width: usize, seed: u32) -> Vec<f32> {
    let mut s = seed | 1;
    let mut g = || {
        let mut acc = -1.5f32;
        for _ in 0..3 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            acc += (s & 0xFFFF) as f32 / 65535.0;
        }
        acc
    };
    (0..rows * width)
        .map(|i| {
            let c = i % width;
            let offset = ((c * 37 % 11) as f32 - 5.0) * 0.7;
            let spread = if c % 13 == 3 {
                3.0
            } else {
                0.1 + (c % 5) as f32 * 0.05
            };
            offset + g() * spread
        })
        .collect()
}

fn params(bits: u8, width: u16, raw_rows: u16, lanes_log2: u8) -> V8Params {
    V8Params {
        bits,
        width,
        raw_rows,
        lanes_log2,
    }
}

fn dec(bytes: &[u8]) -> Result<Vec<f32>, QuantError> {
    let mut y = Vec::new();
    decode(bytes, V8_MAX_VALUES, &mut y)?;
    Ok(y)
}

/// Every coded value whose code is not clamped is within step/2 (plus f32 rounding) of
/// its input; raw rows are their f16 rounding.
fn assert_within_half_a_step(p: &V8Params, x: &[f32], bytes: &[u8]) {
    let seg = SegmentV8::parse(bytes).unwrap();
    let y = dec(bytes).unwrap();
    assert_eq!(y.len(), x.len());
    let w = usize::from(p.width);
    let raw = usize::from(p.raw_rows) * w;
    for (a, b) in x[..raw].iter().zip(&y[..raw]) {
        assert_eq!(f16::from_f32(*a).to_f32(), *b);
    }
    let step = seg.step();
    let inside = (1i32 << (p.bits - 1)) as f32 * step * 0.999;
    for (i, (a, b)) in x[raw..].iter().zip(&y[raw..]).enumerate() {
        let m = seg.mean(i % w).unwrap();
        if (a - m).abs() < inside {
            let tol = step * 0.5 + step * 1e-3 + (a.abs() + m.abs()) * 4.0 * f32::EPSILON;
            assert!((a - b).abs() <= tol, "value {i}: {a} vs {b}, step {step}");
        }
    }
}

#[test]
fn golden_bytes_are_pinned() {
    // 3 rows x 16 channels, row 0 raw, 3-bit codes, one lane: every byte of the format.
    let x: Vec<f32> = (0..48)
        .map(|i| ((i % 16) as f32 - 8.0) * 0.5 + ((i * 7) % 5) as f32 * 0.125)
        .collect();
    let p = params(3, 16, 1, 0);
    let bytes = encode(&p, &x, 0.25).unwrap();
    let want: Vec<u8> = vec![
        0x54, 0x51, 0x54, 0x43, 0x0D, 0x0A, 0x1A, 0x0A, // magic
        8, 3, 4, 0, // version, k, log2 w, lanes_log2
        48, 0, 0, 0, // n
        0x00, 0x00, 0x80, 0x3E, // step 0.25
        1, 0, // raw rows
    ];
    assert_eq!(&bytes[..V8_HEADER_LEN], &want[..]);
    // Raw row 0 as f16: x[0] = -4.0 is 0xC400.
    assert_eq!(&bytes[V8_HEADER_LEN..V8_HEADER_LEN + 2], &[0x00, 0xC4]);
    assert_eq!(bytes.len(), GOLDEN.len(), "{bytes:02x?}");
    assert_eq!(bytes, GOLDEN.to_vec(), "{bytes:02x?}");
    let y = dec(&bytes).unwrap();
    let yb: Vec<u32> = y[16..20].iter().map(|v| v.to_bits()).collect();
    assert_eq!(yb, GOLDEN_VALUES.to_vec(), "{y:?}");
    assert_within_half_a_step(&p, &x, &bytes);
}

const GOLDEN: [u8; 110] = [
    0x54, 0x51, 0x54, 0x43, 0x0d, 0x0a, 0x1a, 0x0a, 0x08, 0x03, 0x04, 0x00, 0x30, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x3e, 0x01, 0x00, 0x00, 0xc4, 0x80, 0xc2, 0x00, 0xc1, 0xc0, 0xc0, 0x80, 0xbe,
    0x00, 0xbe, 0x00, 0xba, 0x00, 0x00, 0x00, 0x30, 0x00, 0x3b, 0x00, 0x3c, 0x00, 0x3f, 0x00, 0x41,
    0x40, 0x41, 0xc0, 0x42, 0x00, 0x43, 0x40, 0xc3, 0x60, 0xc2, 0x80, 0xc1, 0xa0, 0xc0, 0x80, 0xbf,
    0x80, 0xbc, 0x80, 0xb9, 0x00, 0xb4, 0x00, 0x32, 0x00, 0x39, 0x80, 0x3d, 0x40, 0x3f, 0x80, 0x40,
    0x60, 0x41, 0x40, 0x42, 0xc0, 0x43, 0x30, 0x39, 0x30, 0x39, 0x30, 0x30, 0x39, 0x30, 0x39, 0x30,
    0x30, 0x39, 0x30, 0x39, 0x30, 0x30, 0xc0, 0x06, 0x1c, 0x00, 0xb4, 0x4d, 0x7b, 0xbc,
];
/// The decoding of [`GOLDEN`]'s first four coded values (row 1, channels 0..4): -3.75,
/// -3.0625, -2.875, -2.1875.
const GOLDEN_VALUES: [u32; 4] = [3_228_565_504, 3_225_681_920, 3_224_895_488, 3_222_011_904];

#[test]
fn round_trip_is_within_half_a_step() {
    let x = keys(256, 64, 11);
    for (bits, lanes, raw) in [(6u8, 0u8, 0u16), (8, 2, 1), (10, 3, 1), (12, 1, 5)] {
        let p = params(bits, 64, raw, lanes);
        let bytes = encode_to_fit(&p, &x, 10_240).unwrap().expect("fits");
        assert!(bytes.len() <= 10_240);
        assert_within_half_a_step(&p, &x, &bytes);
    }
}

#[test]
fn centring_is_what_lets_one_step_serve_every_channel() {
    // Per-channel offsets 100x the spread: a v7-style zero-mean model would spend most
    // of the budget on the offsets; v8 codes them once per channel.
    let x: Vec<f32> = keys(256, 64, 5)
        .iter()
        .enumerate()
        .map(|(i, v)| v * 0.01 + (i % 64) as f32 * 2.0)
        .collect();
    let p = params(10, 64, 0, 2);
    let bytes = encode_to_fit(&p, &x, 8192).unwrap().unwrap();
    let y = dec(&bytes).unwrap();
    let seg = SegmentV8::parse(&bytes).unwrap();
    for c in 0..64 {
        let m = seg.mean(c).unwrap();
        assert!((m - c as f32 * 2.0).abs() < 0.1, "channel {c}: mean {m}");
    }
    let err: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum();
    let centred: f64 = x
        .iter()
        .enumerate()
        .map(|(i, a)| f64::from(a - seg.mean(i % 64).unwrap()).powi(2))
        .sum();
    // About 4 bits per value spent on the spread alone: a few percent of the centred
    // signal, a few millionths of the whole.
    let total: f64 = x.iter().map(|&a| f64::from(a).powi(2)).sum();
    assert!(
        err < centred * 0.01,
        "relative error {}",
        (err / centred).sqrt()
    );
    assert!(
        err < total * 1e-7,
        "relative error {}",
        (err / total).sqrt()
    );
}

#[test]
fn encode_to_fit_is_deterministic_and_takes_the_finest_fitting_rung() {
    let x = keys(256, 64, 3);
    let p = params(10, 64, 1, 2);
    let budget = 10_240;
    let a = encode_to_fit(&p, &x, budget).unwrap().unwrap();
    let b = encode_to_fit(&p, &x, budget).unwrap().unwrap();
    assert_eq!(a, b);
    let c = centre(&p, &x, 0).unwrap();
    let s0 = (c.max_abs / 512.0).max(f32::MIN_POSITIVE);
    let step = SegmentV8::parse(&a).unwrap().step();
    let t = (V7_RATE_MIN..=V7_RATE_RUNGS)
        .find(|&t| step_at(s0, t) == step)
        .unwrap();
    assert!(t > 0);
    assert!(encode_at(&p, &c, step_at(s0, t - 1)).len() > budget);
    // Below the fixed regions: nothing fits, no rung is tried.
    assert!(encode_to_fit(&p, &x, 22 + 128 + 192 - 1).unwrap().is_none());
    // A budget too small for the coarsest rung.
    assert!(encode_to_fit(&p, &x, 22 + 128 + 192 + 8).unwrap().is_none());
    // A generous budget: from the clamp-free step down while the error falls.
    let big = encode_to_fit(&p, &x, 1 << 20).unwrap().unwrap();
    let step = SegmentV8::parse(&big).unwrap().step();
    let t = (V7_RATE_MIN..=0).find(|&t| step_at(s0, t) == step).unwrap();
    let err = |t| squared_error(&c, step_at(s0, t), 512);
    assert!(
        t <= 0 && (t == V7_RATE_MIN || err(t - 1) >= err(t)),
        "rung {t}"
    );
}

#[test]
fn a_tighter_budget_gives_a_coarser_step_and_more_error() {
    let x = keys(256, 64, 5);
    let p = params(10, 64, 1, 2);
    let err = |budget: usize| {
        let b = encode_to_fit(&p, &x, budget).unwrap().unwrap();
        let y = dec(&b).unwrap();
        x.iter()
            .zip(&y)
            .map(|(a, b)| f64::from(a - b).powi(2))
            .sum::<f64>()
    };
    let (e1, e2, e3) = (err(16_384), err(10_240), err(6_144));
    assert!(e1 < e2 && e2 < e3, "{e1} {e2} {e3}");
}

#[test]
fn constant_channels_decode_to_their_mean_within_half_a_step() {
    let x: Vec<f32> = (0..32 * 16).map(|i| (i % 16) as f32 - 3.0).collect();
    let p = params(4, 16, 0, 0);
    let bytes = encode_to_fit(&p, &x, 400).unwrap().unwrap();
    let seg = SegmentV8::parse(&bytes).unwrap();
    let y = dec(&bytes).unwrap();
    for (a, b) in x.iter().zip(&y) {
        assert!((a - b).abs() <= seg.step() * 0.5 + 1e-6, "{a} {b}");
    }
}

#[test]
fn bad_input_and_settings_are_refused() {
    let mut x = keys(4, 16, 1);
    x[17] = f32::NAN;
    assert!(matches!(
        encode(&params(6, 16, 0, 0), &x, 0.01),
        Err(QuantError::NonFinite { index: 17, .. })
    ));
    assert!(matches!(
        encode_to_fit(&params(6, 16, 0, 0), &x, 1000),
        Err(QuantError::NonFinite { index: 17, .. })
    ));
    let x = keys(4, 16, 1);
    for (p, field) in [
        (params(1, 16, 0, 0), "bits"),
        (params(13, 16, 0, 0), "bits"),
        (params(6, 8, 0, 0), "width"),
        (params(6, 24, 0, 0), "width"),
        (params(6, 2048, 0, 0), "width"),
        (params(6, 16, 0, 4), "lanes_log2"),
        (params(6, 16, 4, 0), "raw_rows"),
        (params(6, 128, 0, 0), "values"),
    ] {
        let r = encode(&p, &x, 0.01);
        assert!(
            matches!(r, Err(QuantError::InvalidParam { field: f, .. }) if f == field),
            "{field}: {r:?}"
        );
    }
    assert!(matches!(
        encode(&params(6, 16, 0, 0), &[], 0.01),
        Err(QuantError::InvalidParam {
            field: "values",
            ..
        })
    ));
    for step in [0.0, -1.0, f32::NAN, f32::INFINITY, 2f32.powi(126 - 5)] {
        assert!(
            matches!(
                encode(&params(6, 16, 0, 0), &x, step),
                Err(QuantError::InvalidParam { field: "step", .. })
            ),
            "{step}"
        );
    }
    // A channel mean past f16's range is refused (the store then keeps its other layout).
    let big: Vec<f32> = (0..64)
        .map(|i| if i % 16 == 2 { 70_000.0 } else { 1.0 })
        .collect();
    assert!(matches!(
        encode(&params(6, 16, 0, 0), &big, 0.5),
        Err(QuantError::OutOfRange {
            index: 2,
            target: "f16 (channel mean)",
            ..
        })
    ));
    // So is a raw value past it.
    assert!(matches!(
        encode(&params(6, 16, 1, 0), &big, 0.5),
        Err(QuantError::OutOfRange {
            index: 2,
            target: "f16 (raw row)",
            ..
        })
    ));
}

fn sample() -> Vec<u8> {
    encode(&params(7, 16, 1, 2), &keys(20, 16, 2), 0.05).unwrap()
}

fn field_err(bytes: &[u8]) -> Option<(&'static str, usize)> {
    match SegmentV8::parse(bytes) {
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
        (V8_BITS_OFFSET, vec![1u8], "bits"),
        (V8_BITS_OFFSET, vec![13], "bits"),
        (V8_WIDTH_LOG2_OFFSET, vec![3], "width_log2"),
        (V8_WIDTH_LOG2_OFFSET, vec![11], "width_log2"),
        (V8_LANES_LOG2_OFFSET, vec![4], "lanes_log2"),
        (V8_VALUES_OFFSET, 0u32.to_le_bytes().to_vec(), "values"),
        (V8_VALUES_OFFSET, 321u32.to_le_bytes().to_vec(), "values"),
        (
            V8_VALUES_OFFSET,
            (1u32 << 20 | 16).to_le_bytes().to_vec(),
            "values",
        ),
        (V8_VALUES_OFFSET, u32::MAX.to_le_bytes().to_vec(), "values"),
        (V8_STEP_OFFSET, 0f32.to_le_bytes().to_vec(), "step"),
        (V8_STEP_OFFSET, (-1f32).to_le_bytes().to_vec(), "step"),
        (V8_STEP_OFFSET, f32::NAN.to_le_bytes().to_vec(), "step"),
        (V8_STEP_OFFSET, f32::INFINITY.to_le_bytes().to_vec(), "step"),
        (
            V8_STEP_OFFSET,
            2f32.powi(V8_MAX_MAGNITUDE_LOG2 - 6).to_le_bytes().to_vec(),
            "step",
        ),
        (V8_RAW_ROWS_OFFSET, 20u16.to_le_bytes().to_vec(), "raw_rows"),
        (
            V8_RAW_ROWS_OFFSET,
            u16::MAX.to_le_bytes().to_vec(),
            "raw_rows",
        ),
    ] {
        assert_eq!(field_err(&set(at, &v)), Some((field, at)), "{field} {v:?}");
    }
    assert!(matches!(
        SegmentV8::parse(&set(0, b"X")),
        Err(QuantError::BadMagic)
    ));
    assert!(matches!(
        SegmentV8::parse(&set(VERSION_OFFSET, &[7])),
        Err(QuantError::UnsupportedVersion { version: 7, .. })
    ));
    // The largest step the bound allows still parses.
    let edge = 2f32.powi(V8_MAX_MAGNITUDE_LOG2 - 6) * 0.99;
    assert!(SegmentV8::parse(&set(V8_STEP_OFFSET, &edge.to_le_bytes())).is_ok());
}

#[test]
fn crafted_raw_values_and_means_are_refused_at_their_offsets() {
    let good = sample();
    let raw_at = V8_HEADER_LEN + 2 * 5;
    let mean_at = V8_HEADER_LEN + 16 * 2 + 2 * 9;
    for (at, field) in [(raw_at, "raw value"), (mean_at, "mean")] {
        for bad in [0x7C00u16, 0xFC00, 0x7E00, 0x7C01] {
            let mut b = good.clone();
            b[at..at + 2].copy_from_slice(&bad.to_le_bytes());
            assert_eq!(field_err(&b), Some((field, at)), "{field} {bad:#06x}");
        }
    }
    // A finite crafted mean decodes that channel around it: the largest f16 mean keeps
    // every decoded value finite.
    let mut b = good.clone();
    b[mean_at..mean_at + 2].copy_from_slice(&0x7BFFu16.to_le_bytes());
    let y = dec(&b).unwrap();
    assert!(y.iter().all(|v| v.is_finite()));
    assert!(y[16 + 9] > 65_000.0);
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
    for (len, what) in [
        (V8_HEADER_LEN - 1, "v8 header"),
        (V8_HEADER_LEN + 31, "v8 raw rows"),
        (V8_HEADER_LEN + 32 + 31, "v8 means"),
        (V8_HEADER_LEN + 64 + 15, "v8 side bytes"),
    ] {
        let r = SegmentV8::parse(&good[..len]);
        assert!(
            matches!(r, Err(QuantError::Truncated { what: w, .. }) if w == what),
            "{what}: {r:?}"
        );
    }
    // A trailing word is refused.
    let mut long = good.clone();
    long.extend_from_slice(&[0, 0]);
    assert!(matches!(dec(&long), Err(QuantError::TrailingBytes { .. })));
    // The caller's bound.
    let mut y = Vec::new();
    assert!(matches!(
        decode(&good, 319, &mut y),
        Err(QuantError::LengthMismatch { .. })
    ));
}

#[test]
fn lane_states_and_side_bytes_are_checked() {
    let good = sample();
    let states = V8_HEADER_LEN + 32 + 32 + 16;
    for lane in 0..4 {
        let mut b = good.clone();
        let at = states + lane * 4;
        b[at..at + 4].copy_from_slice(&(RANS_L - 1).to_le_bytes());
        assert!(
            matches!(dec(&b), Err(QuantError::CorruptField { field: "rans state", offset, .. }) if offset == at),
            "lane {lane}"
        );
    }
    let mut b = good.clone();
    b[states + 1] ^= 0x40;
    assert!(dec(&b).is_err());
    // A side byte changed: never a panic; the stream no longer ends where it must.
    let sides = V8_HEADER_LEN + 64;
    let mut caught = 0;
    for j in 0..5 {
        for delta in [1u8, 7, 128] {
            let mut b = good.clone();
            b[sides + j] = b[sides + j].wrapping_add(delta);
            if dec(&b).is_err() {
                caught += 1;
            }
        }
    }
    assert!(caught >= 12, "{caught} of 15 side-byte changes detected");
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

#[test]
fn a_decode_looks_each_side_byte_up_once() {
    // 64 channels naming one side byte between them: one table lookup.
    let x: Vec<f32> = keys(64, 64, 9).iter().map(|v| v * 0.0 + 1.0).collect();
    let mut x = x;
    for (i, v) in x.iter_mut().enumerate() {
        *v += if i % 2 == 0 { 0.1 } else { -0.1 };
    }
    let bytes = encode(&params(6, 64, 0, 0), &x, 0.05).unwrap();
    let seg = SegmentV8::parse(&bytes).unwrap();
    assert!(seg.sides().iter().all(|&j| j == seg.sides()[0]));
    let before = crate::ecsq_model::LOOKUPS.with(std::cell::Cell::get);
    dec(&bytes).unwrap();
    let after = crate::ecsq_model::LOOKUPS.with(std::cell::Cell::get);
    assert_eq!(after - before, 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn round_trip_within_the_budget(
        rows in 1usize..200,
        width_log2 in 4u8..=7,
        raw in 0u16..3,
        seed in any::<u32>(),
        bits in 2u8..=12,
        lanes_log2 in 0u8..=3,
        budget in 64usize..20_000,
    ) {
        let width = 1usize << width_log2;
        let raw = raw.min(rows as u16 - 1);
        let x = keys(rows, width, seed);
        let p = V8Params { bits, width: width as u16, raw_rows: raw, lanes_log2 };
        if let Some(bytes) = encode_to_fit(&p, &x, budget).unwrap() {
            prop_assert!(bytes.len() <= budget);
            assert_within_half_a_step(&p, &x, &bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut b = sample();
        b.truncate(V8_HEADER_LEN + 32 + 32 + 16 + 3);
        b.extend_from_slice(&tail);
        let _ = dec(&b);
    }
}
