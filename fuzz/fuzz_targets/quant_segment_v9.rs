//! Fuzz the v9 (channel-centred model-coded ECSQ, one step per channel) parser and
//! decoder: arbitrary bytes must never panic, hang or allocate from an unchecked length
//! (the caller's bound, 1 << 16 values here, caps the decoding); a segment that parses
//! has a normal step on every channel, never coarser than Δ; one that decodes gives
//! finite values, and re-encoding them with the segment's own settings, Δ and step codes
//! decodes again to as many values.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v8::V8Params;
use tensorvault_quant::segment_v9::{decode, encode, SegmentV9};

const MAX_VALUES: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(seg) = SegmentV9::parse(data) else {
        return;
    };
    assert_eq!(seg.steps().len(), seg.width());
    assert!(seg
        .steps()
        .iter()
        .all(|&s| s.is_normal() && s > 0.0 && s <= seg.delta()));
    let mut values = Vec::new();
    if seg.decode(MAX_VALUES, &mut values).is_err() {
        return;
    }
    assert_eq!(values.len(), seg.values());
    assert!(values.iter().all(|v| v.is_finite()));
    let p = V8Params {
        bits: seg.bits(),
        width: u16::try_from(seg.width()).unwrap(),
        raw_rows: u16::try_from(seg.raw_rows()).unwrap(),
        lanes_log2: data[11],
    };
    // Decoded values far past f16 can give channel means f16 cannot hold (the encoder
    // refuses them); re-encode only what encodes.
    if let Ok(again) = encode(&p, &values, seg.delta(), seg.step_codes()) {
        let mut back = Vec::new();
        decode(&again, MAX_VALUES, &mut back).unwrap();
        assert_eq!(back.len(), values.len());
    }
});
