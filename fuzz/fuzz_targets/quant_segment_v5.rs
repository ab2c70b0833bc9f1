//! Fuzz the v5 (entropy-coded envelope) parser and decoder: arbitrary bytes must never
//! panic, hang or allocate from an unchecked length (the caller's bound, 1 << 16 values
//! here, caps the codes and the rebuilt segment); an envelope that decodes rebuilds a
//! valid inner segment, and wrapping that segment again decodes to the same values.
//! `SegmentV5::decode` (the codes straight into the v2/v3 decoder) accepts exactly the
//! envelopes whose rebuilt inner segment decodes, with the same values.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment_v5::{decode_any, encode_smallest, SegmentV5};

const MAX_VALUES: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(seg) = SegmentV5::parse(data) else {
        return;
    };
    let mut direct = Vec::new();
    let direct_ok = seg.decode(MAX_VALUES, &mut direct).is_ok();
    let mut values = Vec::new();
    let rebuilt = seg
        .inner(MAX_VALUES)
        .and_then(|inner| decode_any(&inner, MAX_VALUES, &mut values).map(|()| inner));
    assert_eq!(direct_ok, rebuilt.is_ok());
    let Ok(inner) = rebuilt else {
        return;
    };
    assert_eq!(
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        direct.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let mut again = Vec::new();
    decode_any(data, MAX_VALUES, &mut again).unwrap();
    assert_eq!(
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        again.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let rewrapped = encode_smallest(inner.clone()).unwrap();
    let mut back = Vec::new();
    decode_any(&rewrapped, MAX_VALUES, &mut back).unwrap();
    assert_eq!(
        back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
});
