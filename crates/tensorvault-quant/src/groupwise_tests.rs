//! Tests of the groupwise quantizer (a child module of `groupwise`).

use super::*;
use proptest::prelude::*;

/// Deterministic heavy-ish tailed values at magnitude `amp`.
pub(crate) fn signal(n: usize, seed: u64, amp: f32) -> Vec<f32> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .map(|_| {
            // Sum of uniforms (roughly normal) with an occasional 8x outlier.
            let u = next() + next() + next() - 1.5;
            let tail = if next() < 0.01 { 8.0 } else { 1.0 };
            u * amp * tail
        })
        .collect()
}

fn roundtrip(p: &QuantParams, x: &[f32]) -> (Vec<u16>, Vec<u8>, Vec<f32>, ClampStats) {
    let mut scales = vec![0u16; p.groups(x.len())];
    let mut packed = vec![0u8; p.packed_len(x.len())];
    let st = encode(p, x, &mut scales, &mut packed).unwrap();
    let mut y = vec![0f32; x.len()];
    decode(p, &scales, &packed, &mut y).unwrap();
    (scales, packed, y, st)
}

#[test]
fn parameters_are_validated() {
    for bits in [0u8, 1, 9, 255] {
        assert_eq!(
            QuantParams::new(bits, 64),
            Err(QuantError::InvalidBits { bits })
        );
        assert_eq!(
            QuantParams::for_bits(bits),
            Err(QuantError::InvalidBits { bits })
        );
    }
    for g in [0usize, 3, 8, 48, 100, 2048, 1 << 40] {
        assert_eq!(
            QuantParams::new(4, g),
            Err(QuantError::InvalidGroupSize { group_size: g })
        );
    }
    for g in [16usize, 32, 64, 128, 256, 512, 1024] {
        assert_eq!(QuantParams::new(4, g).unwrap().group_size(), g);
    }
    assert_eq!(QuantParams::for_bits(3).unwrap().group_size(), 512);
    assert_eq!(QuantParams::for_bits(8).unwrap().group_size(), 128);
}

#[test]
fn non_finite_input_is_named_by_index() {
    let p = QuantParams::new(8, 16).unwrap();
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut x = vec![0.5f32; 100];
        x[77] = bad;
        x[90] = bad;
        let mut s = vec![0; p.groups(100)];
        let mut q = vec![0; p.packed_len(100)];
        match encode(&p, &x, &mut s, &mut q) {
            Err(QuantError::NonFinite { index: 77, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let p = QuantParams::new(3, 16).unwrap();
    let x = vec![1.0f32; 40];
    let mut s = vec![0; 3];
    let mut q = vec![0; p.packed_len(40)];
    assert!(matches!(
        encode(&p, &x, &mut s[..2], &mut q),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        encode(&p, &x, &mut s, &mut q[1..]),
        Err(QuantError::LengthMismatch { .. })
    ));
    encode(&p, &x, &mut s, &mut q).unwrap();
    let mut y = vec![0f32; 41];
    assert!(matches!(
        decode(&p, &s, &q, &mut y),
        Err(QuantError::LengthMismatch { .. })
    ));
}

#[test]
fn scale_overflow_is_an_error() {
    let p = QuantParams::new(2, 16).unwrap();
    let mut x = vec![0f32; 32];
    x[20] = 1.0e6;
    let mut s = vec![0; 2];
    let mut q = vec![0; p.packed_len(32)];
    assert_eq!(
        encode(&p, &x, &mut s, &mut q),
        Err(QuantError::ScaleOverflow {
            group: 1,
            max_abs: 1.0e6
        })
    );
}

#[test]
fn zero_group_has_zero_scale_and_zero_codes() {
    let p = QuantParams::new(5, 16).unwrap();
    let mut x = vec![-0.0f32; 32];
    x[20] = 3.0;
    let (s, packed, y, st) = roundtrip(&p, &x);
    assert_eq!(s[0], 0);
    let mut codes = vec![0u8; 32];
    bitpack::unpack(&packed, 5, &mut codes).unwrap();
    assert!(codes[..16].iter().all(|&c| i32::from(c) == p.bias()));
    assert!(y[..16].iter().all(|&v| v == 0.0));
    assert_eq!(st.clamped, 0);
}

#[test]
fn corrupt_scales_are_rejected_on_decode() {
    let p = QuantParams::new(4, 16).unwrap();
    let q = vec![0u8; 8];
    let mut y = vec![0f32; 16];
    for (bits, reason) in [
        (0x7c00u16, "not finite"),
        (0x7e00, "not finite"),
        (0xbc00, "negative in a symmetric segment"),
    ] {
        match decode(&p, &[bits], &q, &mut y) {
            Err(QuantError::CorruptScale {
                index: 0,
                reason: r,
                ..
            }) => assert_eq!(r, reason),
            other => panic!("{other:?}"),
        }
    }
    decode(&p.with_levels(Levels::Full), &[0xbc00], &q, &mut y).unwrap();
}

#[test]
fn full_levels_follow_the_q4_0_rule() {
    // The extreme is positive, so the scale is negative and the extreme maps to -8.
    let p = QuantParams::new(4, 16).unwrap().with_levels(Levels::Full);
    let mut x = vec![0.1f32; 16];
    x[3] = 0.8;
    x[5] = -0.8; // same magnitude, later: clamped to +7 (error = |s|)
    let (s, _, y, st) = roundtrip(&p, &x);
    let d = f16::from_bits(s[0]).to_f32();
    assert!(d < 0.0 && (d + 0.1).abs() < 1e-4, "{d}");
    assert_eq!(y[3], -8.0 * d);
    assert_eq!(y[5], 7.0 * d);
    assert_eq!(st.clamped, 1);
    assert!((st.max_clamp_error - 0.1).abs() < 1e-3);
}

#[test]
fn scale_is_rounded_up_so_the_extreme_fits() {
    // 1/127 rounds down in f16; the stored scale must not be smaller than the quotient.
    let p = QuantParams::new(8, 16).unwrap();
    for m in [1.0f32, 0.3, 7.7e-6, 1.0e-9, 1000.0] {
        let mut x = vec![0f32; 16];
        x[0] = m;
        x[1] = -m;
        let (s, _, y, st) = roundtrip(&p, &x);
        assert!(f16::from_bits(s[0]).to_f32() * 127.0 >= m, "m = {m}");
        assert_eq!(st.clamped, 0);
        assert!((y[0] - m).abs() <= f16::from_bits(s[0]).to_f32() * 0.5);
    }
}

fn check_bound(p: &QuantParams, x: &[f32]) -> Result<(), TestCaseError> {
    let (scales, packed, y, st) = roundtrip(p, x);
    let mut codes = vec![0u8; x.len()];
    bitpack::unpack(&packed, p.bits(), &mut codes).unwrap();
    let mut clamped = 0u64;
    for (i, ((&v, &w), &c)) in x.iter().zip(&y).zip(&codes).enumerate() {
        let sb = scales[i / p.group_size()];
        // The vectorised kernel equals the scalar reference code for code.
        prop_assert_eq!(c, reference_code(p, v, sb), "value {} at {}", v, i);
        let s = f16::from_bits(sb).to_f32().abs();
        let r = f64::from(
            v * if s == 0.0 {
                0.0
            } else {
                1.0 / f16::from_bits(sb).to_f32()
            },
        )
        .round();
        if r < f64::from(p.qmin()) || r > f64::from(p.qmax()) {
            clamped += 1;
            continue;
        }
        let tol = s * 0.5 * (1.0 + 1e-6) + v.abs() * 1e-7;
        prop_assert!((v - w).abs() <= tol, "|{} - {}| > {}/2 at {}", v, w, s, i);
    }
    prop_assert_eq!(clamped, st.clamped);
    if p.levels() == Levels::Symmetric {
        prop_assert_eq!(st.clamped, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn error_bound_holds_for_every_width(
        bits in 2u8..=8, glog in 4u32..=10, len in 0usize..2500, seed in any::<u64>(),
        exp in -8i32..4, full in any::<bool>(),
    ) {
        let levels = if full { Levels::Full } else { Levels::Symmetric };
        let p = QuantParams::new(bits, 1 << glog).unwrap().with_levels(levels);
        let x = signal(len, seed, 10f32.powi(exp));
        check_bound(&p, &x)?;
    }

    #[test]
    fn ties_and_exact_levels_round_half_away(bits in 2u8..=8, seed in any::<u64>()) {
        // Values on and halfway between levels of a scale that is exact in f16.
        let p = QuantParams::new(bits, 16).unwrap();
        let qmax = p.qmax();
        let mut s = seed | 1;
        let x: Vec<f32> = (0..64).map(|i| {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            let k = (s % (2 * qmax as u64 + 1)) as i32 - qmax;
            let half = if i % 2 == 0 { 0.0 } else { 0.5f32.copysign(k as f32) };
            if i % 16 == 0 { qmax as f32 * 0.25 } else { ((k as f32) + half).clamp(-qmax as f32, qmax as f32) * 0.25 }
        }).collect();
        check_bound(&p, &x)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// The runtime-dispatched kernel (AVX2 where present) equals the baseline build.
    #[test]
    fn dispatched_kernel_equals_baseline(bits in 2u8..=8, glog in 4u32..=10, len in 1usize..3000, seed in any::<u64>(), full in any::<bool>()) {
        let levels = if full { Levels::Full } else { Levels::Symmetric };
        let p = QuantParams::new(bits, 1 << glog).unwrap().with_levels(levels);
        let x = signal(len, seed, 3.0);
        let (scales, packed, _, st) = roundtrip(&p, &x);
        let mut base = vec![0u8; packed.len()];
        let st2 = quantize_baseline(&p, &x, &scales, &mut base);
        prop_assert_eq!(base, packed);
        prop_assert_eq!(st, st2);
    }
}
