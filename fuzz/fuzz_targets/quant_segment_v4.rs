//! Fuzz the v4 (super-block) segment parser and decoder: arbitrary bytes must never panic
//! or allocate from an unchecked length; a segment that parses decodes to finite values
//! (f16 units times codes of at most 8 bits cannot overflow f32, nor can the inverse
//! rotation of a super-block), and re-encoding them with the segment's own settings gives
//! a segment of the same length that parses.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v4::{encode, SegmentV4};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = SegmentV4::parse(data) else {
        return;
    };
    // Parse checked every region against `data`: n <= code bytes * 4.
    let mut out = vec![0f32; s.values()];
    s.decode(&mut out).unwrap();
    assert!(out.iter().all(|v| v.is_finite()));
    let Ok(again) = encode(&s.params(), &out) else {
        return;
    };
    assert_eq!(again.len(), data.len());
    SegmentV4::parse(&again).unwrap();
});
