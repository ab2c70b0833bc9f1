//! Fuzz the v8 (channel-centred model-coded ECSQ) parser and decoder: arbitrary bytes
//! must never panic, hang or allocate from an unchecked length (the caller's bound, 1 <<
//! 16 values here, caps the decoding); a segment that decodes gives finite values, and
//! re-encoding them with the segment's own settings and step decodes again to as many
//! values.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v8::{decode, encode, SegmentV8, V8Params};

const MAX_VALUES: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(seg) = SegmentV8::parse(data) else {
        return;
    };
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
    if let Ok(again) = encode(&p, &values, seg.step()) {
        let mut back = Vec::new();
        decode(&again, MAX_VALUES, &mut back).unwrap();
        assert_eq!(back.len(), values.len());
    }
});
