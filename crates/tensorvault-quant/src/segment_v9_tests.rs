use super::*;
use crate::layout::V8_MAX_VALUES;

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

#[test]
fn fitted_segment_round_trips_within_half_a_channel_step() {
    let p = params(8, 64, 1);
    let x = keys(256, 64, 7);
    let budget = x.len() * 495 / 800;
    let bytes = encode_to_fit(&p, &x, budget).unwrap().unwrap();
    assert!(bytes.len() <= budget);
    let seg = SegmentV9::parse(&bytes).unwrap();
    let y = dec(&bytes).unwrap();
    for (i, (a, b)) in x.iter().zip(&y).enumerate().skip(64) {
        let step = seg.steps()[i % 64];
        assert!((a - b).abs() <= step * 0.5 * 1.001 + 1e-6, "{i}: {a} {b} {step}");
    }
    // The shaped steps differ between channels.
    let codes = seg.step_codes();
    assert!(codes.iter().any(|&e| e != codes[0]));
}
