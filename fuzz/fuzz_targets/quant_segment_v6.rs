//! Fuzz the v6 (row-gain envelope) parser and decoder: arbitrary bytes must never panic,
//! hang or allocate from an unchecked length (the caller's bound, 1 << 16 values here,
//! caps the rebuilt inner segment's decoding); an envelope that decodes gives the inner
//! segment's values times its gains, and re-wrapping the inner segment against those
//! values gives gain codes that decode again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v5::decode_any;
use tensorvault_quant::segment_v6::{decode, wrap, SegmentV6};

const MAX_VALUES: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(seg) = SegmentV6::parse(data) else {
        return;
    };
    let mut values = Vec::new();
    if seg.decode(MAX_VALUES, &mut values).is_err() {
        return;
    }
    assert_eq!(values.len(), seg.values());
    let inner = seg.inner();
    let mut plain = Vec::new();
    decode_any(&inner, MAX_VALUES, &mut plain).unwrap();
    // Every value is its inner value times one of the gains.
    let gains: Vec<f32> = seg.gains().collect();
    assert!(values
        .iter()
        .zip(&plain)
        .all(|(v, p)| gains.iter().any(|g| (p * g).to_bits() == v.to_bits())));
    // The envelope's header says where the rows are; re-wrap against the decoded values.
    let width = u16::from_le_bytes([data[16], data[17]]);
    let first = u16::from_le_bytes([data[18], data[19]]);
    if values.iter().all(|v| v.is_finite()) {
        let again = wrap(&inner, &values, width, first).unwrap();
        let mut back = Vec::new();
        decode(&again, MAX_VALUES, &mut back).unwrap();
        assert_eq!(back.len(), values.len());
    }
});
