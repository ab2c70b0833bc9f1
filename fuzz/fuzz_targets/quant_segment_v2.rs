//! Fuzz the v2 (asymmetric) segment parser and decoder: arbitrary bytes must never panic
//! or allocate from an unchecked length; a segment that parses decodes, every quantized
//! value is finite (the parser bounds what the units can reach), and re-encoding the
//! decoded values with the segment's own settings (when their range fits f32) gives a
//! segment of the same length that decodes the raw rows identically.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v2::{encode, SegmentV2};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = SegmentV2::parse(data) else {
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
        // Values spanning more than f32's range (|reach| > f32::MAX / 2) cannot be refitted.
        let Ok(again) = encode(&p, &out) else {
            return;
        };
        assert_eq!(again.len(), data.len());
        let mut back = vec![0f32; n];
        SegmentV2::parse(&again).unwrap().decode(&mut back).unwrap();
        assert_eq!(back[..raw], out[..raw]);
    }
});
