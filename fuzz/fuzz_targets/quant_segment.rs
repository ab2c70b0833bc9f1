//! Fuzz the quantized segment parser and decoder: arbitrary bytes must never panic or
//! allocate from an unchecked length; when they parse, single-frame decodes must agree
//! with the whole-segment decode.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::segment::Segment;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = Segment::parse(data) else {
        return;
    };
    // Parse checked every region against `data`, so these buffers are bounded by its size
    // (times 8 / bits * 4 at most).
    let n = s.values_per_frame();
    let mut all = vec![0f32; n * s.frame_count()];
    s.decode_all(&mut all).unwrap();
    let mut one = vec![0f32; n];
    for i in [0, s.frame_count() - 1] {
        s.decode_frame(i, &mut one).unwrap();
        let want = &all[i * n..(i + 1) * n];
        assert!(one
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    assert!(s.decode_frame(s.frame_count(), &mut one).is_err());
});
