//! Fuzz the rate-controlled encoder (`tensorvault_quant::ecsq::encode_to_fit`): arbitrary
//! f32 values (any bits: NaN, infinities, subnormals, huge magnitudes) and settings must
//! never panic; a result fits its budget, is deterministic, and decodes through the
//! version 5/3 readers to finite values of the right count.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::ecsq::{encode_to_fit, EcsqParams};
use tensorvault_quant::segment_v5::decode_any;

fuzz_target!(|data: &[u8]| {
    let [bits, log2, budget_lo, budget_hi, flags, rest @ ..] = data else {
        return;
    };
    let p = EcsqParams {
        bits: 2 + bits % 7,
        block_log2: 2 + log2 % 9,
        seed: u32::from(*flags),
        rotate: flags & 1 == 0,
        lanes_log2: (flags >> 1) % 4,
    };
    let x: Vec<f32> = rest
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let budget = usize::from(u16::from_le_bytes([*budget_lo, *budget_hi]));
    let Ok(got) = encode_to_fit(&p, &x, budget) else {
        return;
    };
    let Some(bytes) = got else {
        return;
    };
    assert!(bytes.len() <= budget);
    assert_eq!(encode_to_fit(&p, &x, budget).unwrap().unwrap(), bytes);
    let mut y = Vec::new();
    decode_any(&bytes, x.len(), &mut y).unwrap();
    assert_eq!(y.len(), x.len());
    assert!(y.iter().all(|v| v.is_finite()));
});
