//! Fuzz the v7 (model-coded ECSQ) parser and decoder: arbitrary bytes must never panic,
//! hang or allocate from an unchecked length (the caller's bound, 1 << 16 values here,
//! caps the decoding); a segment that decodes gives finite values, and re-encoding them
//! with the segment's own settings and step decodes again to as many values.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v7::{decode, encode, SegmentV7, V7Params};

const MAX_VALUES: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(seg) = SegmentV7::parse(data) else {
        return;
    };
    let mut values = Vec::new();
    if seg.decode(MAX_VALUES, &mut values).is_err() {
        return;
    }
    assert_eq!(values.len(), seg.values());
    assert!(values.iter().all(|v| v.is_finite()));
    let p = V7Params {
        bits: data[9],
        block_log2: data[10],
        seed: u32::from_le_bytes([data[12], data[13], data[14], data[15]]),
        lanes_log2: data[11],
    };
    // The decoded values of a whole block can exceed what the rotation keeps finite
    // (the bound is on the decoder's side); re-encode only what encodes.
    if let Ok(again) = encode(&p, &values, seg.step()) {
        let mut back = Vec::new();
        decode(&again, MAX_VALUES, &mut back).unwrap();
        assert_eq!(back.len(), values.len());
    }
});
