use super::*;
use crate::layout::{
    RANS_L, V8_BITS_OFFSET, V8_HEADER_LEN, V8_LANES_LOG2_OFFSET, V8_MAX_VALUES, V8_RAW_ROWS_OFFSET,
    V8_STEP_OFFSET, V8_VALUES_OFFSET, V8_WIDTH_LOG2_OFFSET, VERSION_OFFSET,
};
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

fn params(bits: u8, width: u16, raw_rows: u16) -> V8Params {
    V8Params {
        bits,
        width,
        raw_rows,
        lanes_log2: 2,
    }
}

fn dec(bytes: &[u8]) -> Result<Vec<f32>, QuantError> {
    let mut y = Vec::new();
    decode(bytes, V8_MAX_VALUES, &mut y)?;
    Ok(y)
}

/// Where the step codes of a segment of `width` channels and `raw_rows` raw rows start.
fn codes_at_offset(width: usize, raw_rows: usize) -> usize {
    V8_HEADER_LEN + raw_rows * width * 2 + width * 2 + width
}

/// Every coded value whose code is not clamped is within its channel's step / 2 (plus
/// f32 rounding) of its input; raw rows are their f16 rounding. Returns how many values
/// were clamped.
fn assert_within_half_a_channel_step(p: &V8Params, x: &[f32], bytes: &[u8]) -> usize {
    let seg = SegmentV9::parse(bytes).unwrap();
    let y = dec(bytes).unwrap();
    assert_eq!(y.len(), x.len());
    let w = usize::from(p.width);
    let raw = usize::from(p.raw_rows) * w;
    for (a, b) in x[..raw].iter().zip(&y[..raw]) {
        assert_eq!(f16::from_f32(*a).to_f32(), *b);
    }
    let mut clamped = 0;
    for (i, (a, b)) in x.iter().zip(&y).enumerate().skip(raw) {
        let c = i % w;
        let step = seg.steps()[c];
        let m = seg.mean(c).unwrap();
        let inside = (1i32 << (p.bits - 1)) as f32 * step * 0.999;
        if (a - m).abs() < inside {
            let tol = step * 0.5 + (a.abs() + m.abs()) * 4.0 * f32::EPSILON;
            assert!((a - b).abs() <= tol, "{i}: {a} -> {b}, step {step}");
        } else {
            clamped += 1;
        }
    }
    clamped
}

#[test]
fn the_step_table_is_2_to_the_minus_i_sixteenths() {
    for (i, &b) in V9_STEP_FRACTION_BITS.iter().enumerate() {
        let want = 2f64.powf(-(i as f64) / 16.0);
        let got = f64::from(f32::from_bits(b));
        // The nearest f32: within half an ulp (2^-24 relative for values in [0.5, 1)).
        assert!(
            (got - want).abs() <= want * 2f64.powi(-24),
            "{i}: {got} {want}"
        );
    }
    assert_eq!(step_of(1.0, 0), 1.0);
    assert_eq!(step_of(1.0, 16), 0.5);
    assert_eq!(step_of(3.0, 8), 3.0 * f32::from_bits(0x3F35_04F3));
    assert_eq!(
        step_of(2.0, 255),
        2.0 * f32::from_bits(0x3F05_AAC3) / 32768.0
    );
}

#[test]
fn golden_bytes_are_pinned() {
    // 3 rows x 16 channels, row 0 raw, 3-bit codes, one lane, Δ = 1, codes across octaves.
    let x: Vec<f32> = (0..48)
        .map(|i| ((i % 16) as f32 - 8.0) * 0.5 + ((i * 7) % 5) as f32 * 0.125)
        .collect();
    let p = V8Params {
        bits: 3,
        width: 16,
        raw_rows: 1,
        lanes_log2: 0,
    };
    let codes = [0u8, 1, 8, 15, 16, 17, 31, 32, 0, 2, 4, 6, 48, 64, 3, 9];
    let bytes = encode(&p, &x, 1.0, &codes).unwrap();
    let want: Vec<u8> = vec![
        0x54, 0x51, 0x54, 0x43, 0x0D, 0x0A, 0x1A, 0x0A, // magic
        9, 3, 4, 0, // version, k, log2 w, lanes_log2
        48, 0, 0, 0, // n
        0x00, 0x00, 0x80, 0x3F, // Δ = 1.0
        1, 0, // raw rows
    ];
    assert_eq!(&bytes[..V8_HEADER_LEN], &want[..]);
    let at = codes_at_offset(16, 1);
    assert_eq!(&bytes[at..at + 16], &codes);
    assert_eq!(bytes, GOLDEN.to_vec(), "{bytes:02x?}");
    let y = dec(&bytes).unwrap();
    let yb: Vec<u32> = y[16..20].iter().map(|v| v.to_bits()).collect();
    assert_eq!(yb, GOLDEN_VALUES.to_vec(), "{:?}", &y[16..20]);
}

const GOLDEN: [u8; 126] = [
    0x54, 0x51, 0x54, 0x43, 0x0d, 0x0a, 0x1a, 0x0a, 0x09, 0x03, 0x04, 0x00, 0x30, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x3f, 0x01, 0x00, 0x00, 0xc4, 0x80, 0xc2, 0x00, 0xc1, 0xc0, 0xc0, 0x80, 0xbe,
    0x00, 0xbe, 0x00, 0xba, 0x00, 0x00, 0x00, 0x30, 0x00, 0x3b, 0x00, 0x3c, 0x00, 0x3f, 0x00, 0x41,
    0x40, 0x41, 0xc0, 0x42, 0x00, 0x43, 0x40, 0xc3, 0x60, 0xc2, 0x80, 0xc1, 0xa0, 0xc0, 0x80, 0xbf,
    0x80, 0xbc, 0x80, 0xb9, 0x00, 0xb4, 0x00, 0x32, 0x00, 0x39, 0x80, 0x3d, 0x40, 0x3f, 0x80, 0x40,
    0x60, 0x41, 0x40, 0x42, 0xc0, 0x43, 0x10, 0x1c, 0x18, 0x28, 0x20, 0x20, 0x38, 0x30, 0x18, 0x14,
    0x14, 0x20, 0x40, 0x58, 0x14, 0x18, 0x00, 0x01, 0x08, 0x0f, 0x10, 0x11, 0x1f, 0x20, 0x00, 0x02,
    0x04, 0x06, 0x30, 0x40, 0x03, 0x09, 0xd8, 0x88, 0xb9, 0x00, 0x9b, 0x39, 0xc7, 0xb4,
];
/// The decoding of [`GOLDEN`]'s first four coded values (row 1, channels 0..4, steps 1,
/// 2^(-1/16), 2^(-8/16), 2^(-15/16)): -4.125, -2.7086983, -3.1035533, -2.0514317.
const GOLDEN_VALUES: [u32; 4] = [3_229_876_224, 3_224_197_968, 3_225_854_110, 3_221_441_192];

#[test]
fn equal_step_codes_decode_as_v8_at_that_step() {
    // All codes e: every channel at step_of(Δ, e), which is what v8 does with that step.
    let p = params(8, 64, 1);
    let x = keys(64, 64, 3);
    for e in [0u8, 7, 16, 255] {
        let bytes = encode(&p, &x, 0.5, &[e; 64]).unwrap();
        let v8 = crate::segment_v8::encode(&p, &x, step_of(0.5, e)).unwrap();
        let (y9, mut y8) = (dec(&bytes).unwrap(), Vec::new());
        crate::segment_v8::decode(&v8, V8_MAX_VALUES, &mut y8).unwrap();
        assert_eq!(y9, y8, "code {e}");
        // The same header fields (but the step: Δ in v9), raw rows and means (v9's encoder writes its side bytes
        // on a coarser grid, so the streams differ).
        assert_eq!(bytes[9..V8_STEP_OFFSET], v8[9..V8_STEP_OFFSET]);
        assert_eq!(
            bytes[V8_RAW_ROWS_OFFSET..V8_HEADER_LEN],
            v8[V8_RAW_ROWS_OFFSET..V8_HEADER_LEN]
        );
        let means_end = V8_HEADER_LEN + 64 * 2 + 64 * 2;
        assert_eq!(
            bytes[V8_HEADER_LEN..means_end],
            v8[V8_HEADER_LEN..means_end]
        );
        assert!(SegmentV9::parse(&bytes)
            .unwrap()
            .sides()
            .iter()
            .all(|&j| j % 4 == 0));
    }
}

#[test]
fn fitted_segments_fit_and_shape_their_steps() {
    let p = params(8, 64, 1);
    let x = keys(256, 64, 7);
    for budget in [
        x.len() * 3 / 8,
        x.len() * 495 / 800,
        x.len() * 7 / 8,
        x.len() * 3,
    ] {
        let bytes = encode_to_fit(&p, &x, budget).unwrap().unwrap();
        assert!(bytes.len() <= budget);
        // The anti-clamp floor: nothing clamps.
        assert_eq!(assert_within_half_a_channel_step(&p, &x, &bytes), 0);
        let seg = SegmentV9::parse(&bytes).unwrap();
        // The coarsest channel has code 0, so Δ is its step.
        assert!(seg.step_codes().contains(&0));
    }
    // Within the 4.95 b/v budget, the wide channels (every 13th, from 3) get the coarsest steps
    // and the quiet ones finer.
    let bytes = encode_to_fit(&p, &x, x.len() * 495 / 800).unwrap().unwrap();
    let seg = SegmentV9::parse(&bytes).unwrap();
    assert!(
        seg.steps()[3] > 2.0 * seg.steps()[0],
        "{:?}",
        &seg.steps()[..8]
    );
    // Gamma 0: one step (up to the floors), as v8 picks.
    let flat = encode_to_fit_gamma(&p, &x, x.len() * 495 / 800, 0.0)
        .unwrap()
        .unwrap();
    let seg0 = SegmentV9::parse(&flat).unwrap();
    let distinct: std::collections::BTreeSet<u8> = seg0.step_codes().iter().copied().collect();
    assert!(
        distinct.len()
            < seg
                .step_codes()
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
    );
    // Deterministic.
    assert_eq!(
        encode_to_fit(&p, &x, x.len() * 495 / 800).unwrap().unwrap(),
        bytes
    );
    // Below the fixed regions nothing fits.
    assert_eq!(
        encode_to_fit(&p, &x, codes_at_offset(64, 1) + 63).unwrap(),
        None
    );
    assert!(encode_to_fit_gamma(&p, &x, 9999, f64::NAN).is_err());
}

#[test]
fn constant_and_zero_blocks_code() {
    let p = params(8, 16, 0);
    for x in [vec![0f32; 16 * 32], vec![2.5f32; 16 * 32]] {
        let bytes = encode_to_fit(&p, &x, 4096).unwrap().unwrap();
        // Mid-rise: a zero centred value decodes half the smallest step away.
        for (a, b) in x.iter().zip(&dec(&bytes).unwrap()) {
            assert!((a - b).abs() <= f32::MIN_POSITIVE, "{a} {b}");
        }
    }
}

#[test]
fn every_header_field_is_checked_at_its_offset() {
    let p = params(8, 64, 1);
    let x = keys(32, 64, 5);
    let good = encode_to_fit(&p, &x, 1 << 16).unwrap().unwrap();
    let corrupt_at = |off: usize, v: &[u8]| {
        let mut b = good.clone();
        b[off..off + v.len()].copy_from_slice(v);
        match SegmentV9::parse(&b).and_then(|s| s.decode(V8_MAX_VALUES, &mut Vec::new())) {
            Err(QuantError::CorruptField { offset, .. }) => offset,
            other => panic!("{off}: {other:?}"),
        }
    };
    assert_eq!(corrupt_at(V8_BITS_OFFSET, &[13]), V8_BITS_OFFSET);
    assert_eq!(corrupt_at(V8_BITS_OFFSET, &[1]), V8_BITS_OFFSET);
    assert_eq!(corrupt_at(V8_WIDTH_LOG2_OFFSET, &[3]), V8_WIDTH_LOG2_OFFSET);
    assert_eq!(
        corrupt_at(V8_WIDTH_LOG2_OFFSET, &[11]),
        V8_WIDTH_LOG2_OFFSET
    );
    assert_eq!(corrupt_at(V8_LANES_LOG2_OFFSET, &[4]), V8_LANES_LOG2_OFFSET);
    assert_eq!(
        corrupt_at(V8_VALUES_OFFSET, &0u32.to_le_bytes()),
        V8_VALUES_OFFSET
    );
    assert_eq!(
        corrupt_at(V8_VALUES_OFFSET, &100u32.to_le_bytes()),
        V8_VALUES_OFFSET
    );
    assert_eq!(
        corrupt_at(V8_VALUES_OFFSET, &(1u32 << 21).to_le_bytes()),
        V8_VALUES_OFFSET
    );
    for bad in [0f32, -1.0, f32::NAN, f32::INFINITY, 1e38] {
        assert_eq!(
            corrupt_at(V8_STEP_OFFSET, &bad.to_le_bytes()),
            V8_STEP_OFFSET
        );
    }
    assert_eq!(
        corrupt_at(V8_RAW_ROWS_OFFSET, &32u16.to_le_bytes()),
        V8_RAW_ROWS_OFFSET
    );
    let nan = f16::NAN.to_bits().to_le_bytes();
    assert_eq!(corrupt_at(V8_HEADER_LEN + 10, &nan), V8_HEADER_LEN + 10);
    let mean3 = V8_HEADER_LEN + 64 * 2 + 3 * 2;
    assert_eq!(corrupt_at(mean3, &nan), mean3);
    // The version byte and the magic.
    let mut b = good.clone();
    b[VERSION_OFFSET] = 10;
    assert!(matches!(
        SegmentV9::parse(&b),
        Err(QuantError::UnsupportedVersion { version: 10, .. })
    ));
    b[0] ^= 1;
    assert!(matches!(SegmentV9::parse(&b), Err(QuantError::BadMagic)));
    // A v8 segment is not a v9 one.
    let v8 = crate::segment_v8::encode(&p, &x, 0.1).unwrap();
    assert!(matches!(
        SegmentV9::parse(&v8),
        Err(QuantError::UnsupportedVersion { version: 8, .. })
    ));
}

#[test]
fn crafted_step_codes() {
    let p = params(8, 64, 1);
    let x = keys(32, 64, 9);
    let at = codes_at_offset(64, 1);
    // 255 on every channel: the finest steps, 2^-15.94 of Δ; valid and decodes finite.
    let finest = encode(&p, &x, 1.0, &[255; 64]).unwrap();
    let y = dec(&finest).unwrap();
    assert!(y.iter().all(|v| v.is_finite()));
    // A step code whose step would fall below the smallest normal f32 (it cannot
    // overflow: every code makes the step finer than Δ): refused at its offset, by the
    // encoder too.
    let delta = f32::MIN_POSITIVE * 100.0;
    let mut codes = [0u8; 64];
    codes[17] = 255;
    assert!(matches!(
        encode(&p, &x, delta, &codes),
        Err(QuantError::InvalidParam {
            field: "step code",
            ..
        })
    ));
    let mut b = encode(&p, &x, delta, &[0; 64]).unwrap();
    b[at + 17] = 255;
    match SegmentV9::parse(&b) {
        Err(QuantError::CorruptField {
            field,
            offset,
            value,
            ..
        }) => {
            assert_eq!((field, offset, value), ("step code", at + 17, 255));
        }
        other => panic!("{other:?}"),
    }
    // The code that just stays normal is accepted.
    b[at + 17] = 106; // 100 * 2^(-106/16) = 100 / 98.7 > 1
    assert!(SegmentV9::parse(&b).is_ok());
    assert!(matches!(
        encode(&p, &x, 1.0, &[0; 63]),
        Err(QuantError::LengthMismatch { .. })
    ));
}

#[test]
fn truncation_at_every_offset_is_a_typed_error() {
    let p = params(6, 16, 1);
    let x = keys(8, 16, 2);
    let bytes = encode_to_fit(&p, &x, 4096).unwrap().unwrap();
    for cut in 0..bytes.len() {
        match dec(&bytes[..cut]) {
            Err(QuantError::Truncated { .. } | QuantError::CorruptField { .. }) => {}
            other => panic!("cut {cut}: {other:?}"),
        }
    }
    let region = |cut: usize| match SegmentV9::parse(&bytes[..cut]) {
        Err(QuantError::Truncated { what, .. }) => what,
        other => panic!("{cut}: {other:?}"),
    };
    let at = codes_at_offset(16, 1);
    assert_eq!(region(V8_HEADER_LEN - 1), "v9 header");
    assert_eq!(region(V8_HEADER_LEN + 1), "v9 raw rows");
    assert_eq!(region(at - 1), "v9 side bytes");
    assert_eq!(region(at + 15), "v9 step codes");
    // The lane states come right after the codes.
    assert!(bytes.len() >= at + 16 + 4 * 4);
    let _ = RANS_L;
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(dec(&trailing).is_err());
    // The caller's bound comes before any allocation.
    let mut y = Vec::new();
    assert!(matches!(
        decode(&bytes, x.len() - 1, &mut y),
        Err(QuantError::LengthMismatch { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any block, width, bits and budget: a fitted segment fits, decodes to the input's
    /// length within half a channel step of every value (nothing clamps), and re-parses.
    #[test]
    fn round_trip_within_half_a_channel_step(
        rows in 2usize..40,
        wl in 4u32..8,
        bits in 3u8..=10,
        raw in 0u16..2,
        seed: u32,
        scale in 1e-3f32..1e3,
        bpv in 2.0f64..12.0,
    ) {
        let w = 1usize << wl;
        let p = params(bits, w as u16, raw);
        let x: Vec<f32> = keys(rows, w, seed).iter().map(|v| v * scale).collect();
        let budget = (x.len() as f64 * bpv / 8.0) as usize + codes_at_offset(w, usize::from(raw)) + 16;
        if let Some(bytes) = encode_to_fit(&p, &x, budget).unwrap() {
            prop_assert!(bytes.len() <= budget);
            prop_assert_eq!(assert_within_half_a_channel_step(&p, &x, &bytes), 0);
        }
    }

    /// Arbitrary bytes after a valid prefix: a typed error or a decoding, never a panic.
    #[test]
    fn mutated_segments_never_panic(pos in 0usize..400, v: u8, seed: u32) {
        let p = params(8, 16, 1);
        let x = keys(16, 16, seed);
        let mut b = encode_to_fit(&p, &x, 4096).unwrap().unwrap();
        let i = pos % b.len();
        b[i] = v;
        let _ = dec(&b);
    }
}

#[test]
fn rope_pairs_shape_both_channels_of_a_pair_alike() {
    // Every channel the same spread, energies set by per-pair offsets: under the pairing
    // the offsets follow, both channels of a pair want the same step.
    let w = 64usize;
    let rows = 128usize;
    let base = keys(rows, w, 17);
    for (pairs, partner) in [
        (
            RopePairs::Adjacent,
            (|c: usize, _w: usize| c ^ 1) as fn(usize, usize) -> usize,
        ),
        (RopePairs::Halves, |c: usize, w: usize| (c + w / 2) % w),
    ] {
        let x: Vec<f32> = base
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let c = i % w;
                let pair = match pairs {
                    RopePairs::Adjacent => c / 2,
                    RopePairs::Halves => c % (w / 2),
                };
                // Spread 0.1..0.3 around a pair offset of 0..15.5.
                (v - ((c * 37 % 11) as f32 - 5.0) * 0.7) * 0.1 + pair as f32 * 0.5
            })
            .collect();
        let p = params(8, 64, 0);
        let bytes = encode_to_fit_with(&p, &x, x.len() * 495 / 800, 1.0, pairs)
            .unwrap()
            .unwrap();
        let seg = SegmentV9::parse(&bytes).unwrap();
        let codes = seg.step_codes();
        let same = (0..w).filter(|&c| codes[c] == codes[partner(c, w)]).count();
        assert!(same >= w * 3 / 4, "{pairs:?}: {same} of {w}: {codes:?}");
        // And the other pairing does not see those pairs.
        let other = match pairs {
            RopePairs::Adjacent => RopePairs::Halves,
            RopePairs::Halves => RopePairs::Adjacent,
        };
        let b2 = encode_to_fit_with(&p, &x, x.len() * 495 / 800, 1.0, other)
            .unwrap()
            .unwrap();
        assert_ne!(SegmentV9::parse(&b2).unwrap().step_codes(), codes);
    }
}

/// review16: a RoPE pair of no energy (all zero, or constant) or of tiny values in an
/// otherwise ordinary block. Before the step ceiling it wanted a step ~10^6 times the
/// others': its zeros decoded at ±Δ/2 (thousands), every other channel's code clamped at
/// 255 (the shaping lost), and a tiny pair left no fitting rung on the ladder.
#[test]
fn a_dead_or_tiny_rope_pair_keeps_its_values_and_the_others_shaping() {
    let (rows, w) = (256usize, 64usize);
    let p = params(8, 64, 0);
    let budget = rows * w * 495 / 800;
    let base = keys(rows, w, 23);
    let plain = encode_to_fit(&p, &base, budget).unwrap().unwrap();
    let plain_codes = SegmentV9::parse(&plain).unwrap().step_codes().to_vec();
    let top = base.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (name, pair) in [
        ("zero", [0.0f32; 7]),
        ("constant", [0.5f32; 7]),
        ("tiny", [-3e-4, -2e-4, -1e-4, 0.0, 1e-4, 2e-4, 3e-4]),
    ] {
        let mut x = base.clone();
        for r in 0..rows {
            x[r * w] = pair[r % 7];
            x[r * w + 1] = pair[(r + 3) % 7];
        }
        let bytes = encode_to_fit(&p, &x, budget)
            .unwrap()
            .unwrap_or_else(|| panic!("{name}: no rung fits"));
        assert!(bytes.len() <= budget);
        let seg = SegmentV9::parse(&bytes).unwrap();
        let y = dec(&bytes).unwrap();
        // The pair decodes within its own spread (here at most 3e-4 about its mean)...
        for r in 0..rows {
            for c in 0..2 {
                let e = (x[r * w + c] - y[r * w + c]).abs();
                assert!(
                    e <= 1e-3,
                    "{name}: row {r} channel {c}: {} -> {}",
                    x[r * w + c],
                    y[r * w + c]
                );
            }
        }
        // ... Δ stays at the others' scale, and they keep their own steps.
        assert!(seg.delta() <= top, "{name}: Δ {}", seg.delta());
        let codes = seg.step_codes();
        let spread = codes[2..].iter().max().unwrap() - codes[2..].iter().min().unwrap();
        assert!(spread >= 8, "{name}: {codes:?}");
        // The shape (each code less channel 3's, a floor-bound channel) is the block's
        // without the pair, within a sixteenth of an octave or two.
        let rel = |k: &[u8], c: usize| i32::from(k[c]) - i32::from(k[3]);
        let same = (2..w)
            .filter(|&c| (rel(codes, c) - rel(&plain_codes, c)).abs() <= 2)
            .count();
        assert!(
            same >= w * 3 / 4,
            "{name}: {codes:?} against {plain_codes:?}"
        );
    }
}

/// review16: one huge outlier in one channel (up to near f16's limit) is never clamped
/// (that channel's anti-clamp floor sets Δ), and the other channels keep finer steps.
#[test]
fn a_huge_outlier_is_coded_unclamped() {
    let (rows, w) = (256usize, 64usize);
    let p = params(8, 64, 1);
    let budget = rows * w * 495 / 800;
    for big in [1.0e3f32, 1.0e4, 6.0e4] {
        let mut x = keys(rows, w, 41);
        x[100 * w + 7] = big;
        let bytes = encode_to_fit(&p, &x, budget).unwrap().unwrap();
        assert!(bytes.len() <= budget);
        assert_eq!(
            assert_within_half_a_channel_step(&p, &x, &bytes),
            0,
            "{big}"
        );
        let seg = SegmentV9::parse(&bytes).unwrap();
        assert_eq!(seg.step_codes()[7], 0, "{big}");
        assert!(seg.step_codes().iter().filter(|&&e| e > 64).count() > w / 2);
    }
}

/// review16: the same input gives the same bytes on any thread, while other threads
/// encode other blocks (the model-table cache is shared).
#[test]
fn fitted_bytes_do_not_depend_on_threads() {
    let (rows, w) = (256usize, 64usize);
    let p = params(8, 64, 1);
    let budget = rows * w * 495 / 800;
    let blocks: Vec<Vec<f32>> = (0..6).map(|s| keys(rows, w, 100 + s)).collect();
    let one: Vec<Vec<u8>> = blocks
        .iter()
        .map(|x| encode_to_fit(&p, x, budget).unwrap().unwrap())
        .collect();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let blocks = blocks.clone();
            std::thread::spawn(move || {
                let mut out: Vec<(usize, Vec<u8>)> = (0..blocks.len())
                    .map(|i| (i + t) % blocks.len())
                    .map(|i| (i, encode_to_fit(&p, &blocks[i], budget).unwrap().unwrap()))
                    .collect();
                out.sort_by_key(|(i, _)| *i);
                out.into_iter().map(|(_, b)| b).collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), one);
    }
}
