//! Fuzz the v3 (rotated) segment parser and decoder: arbitrary bytes must never panic or
//! allocate from an unchecked length; a segment that parses decodes, every quantized value
//! is finite (the parser bounds what the scale base can reach through the levels and the
//! inverse rotation), and re-encoding the decoded values with the segment's own settings
//! gives a segment of the same length that decodes the raw rows identically.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_rot::{encode, SegmentV3};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = SegmentV3::parse(data) else {
        return;
    };
    // Parse checked every region against `data`: n <= raw bytes / 2 + code bytes * 4.
    let n = s.values();
    let mut out = vec![0f32; n];
    s.decode(&mut out).unwrap();
    let p = s.params();
    let raw = usize::from(p.raw_rows) * usize::from(p.width);
    assert!(out[raw..].iter().all(|v| v.is_finite()));
    if out[..raw].iter().all(|v| v.is_finite()) {
        // Values whose rotation overflows f32 cannot be re-encoded (a typed error).
        let Ok(again) = encode(&p, &out) else {
            return;
        };
        assert_eq!(again.len(), data.len());
        let mut back = vec![0f32; n];
        SegmentV3::parse(&again).unwrap().decode(&mut back).unwrap();
        assert_eq!(back[..raw], out[..raw]);
    }
});
