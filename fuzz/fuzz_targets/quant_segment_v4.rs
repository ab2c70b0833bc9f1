//! Fuzz the v4 (super-block) segment parser and decoder: arbitrary bytes must never panic
//! or allocate from an unchecked length; a segment that parses decodes to finite values
//! (f16 units times codes of at most 8 bits cannot overflow f32, nor can the inverse
//! rotation of a super-block), and re-encoding them with the segment's own settings gives
//! a segment of the same length that parses, with the fitted units and with the
//! norm-matched ones (what codec 4 writes for embeddings), whose decoding stays finite.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v4::{encode, encode_with, SegmentV4, V4Encoder};

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
    let nm = encode_with(&s.params(), V4Encoder { norm_match: true }, &out).unwrap();
    assert_eq!(nm.len(), data.len());
    let mut back = vec![0f32; out.len()];
    SegmentV4::parse(&nm).unwrap().decode(&mut back).unwrap();
    assert!(back.iter().all(|v| v.is_finite()));
});
