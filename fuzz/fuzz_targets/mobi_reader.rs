//! Fuzz the MOBI reader (v1 and v2): full validation and the header-only parse must
//! never panic; a valid file's tensors dequantize (per tensor and per axis) without
//! panicking, range by range with the same bits as whole, it re-encodes (as v2)
//! idempotently, and reading it with payloads shared (`Model::from_vec`, the path of
//! `Model::open`'s map) gives the same model and the same first error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::mobi::{validate_with, Header, Model, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let _ = Header::parse(data);
    let report = validate_with(
        data,
        &ReadOptions {
            max_tensor_bytes: 1 << 24,
            max_inflated_bytes: 1 << 26,
            ..ReadOptions::default()
        },
    );
    // The shared-payload reader agrees with the copying one, error for error.
    assert_eq!(Model::from_vec(data.to_vec()), Model::from_bytes(data));
    if report.is_ok() {
        let m = Model::from_bytes(data).expect("a valid file loads");
        for t in &m.tensors {
            // Parameters were validated: dequantization cannot fail.
            let v = t.to_f32().expect("a validated tensor dequantizes");
            assert_eq!(v.len() as u64, t.len());
            // Range by range (as the runtime packs weights), the same bits.
            let d = t.dequantizer().expect("a validated tensor dequantizes");
            let step = 1 + data.len() % 13;
            let mut pieces = vec![f32::NAN; v.len()];
            for (i, out) in pieces.chunks_mut(step).enumerate() {
                assert_eq!(d.fill(i * step, out), out.len());
            }
            let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&pieces), bits(&v));
        }
        // Valid files re-encode, and re-encoding is idempotent (byte-equal; NaN
        // parameters make model equality the wrong check).
        let again = m.to_bytes().expect("re-encode");
        let twice = Model::from_bytes(&again)
            .expect("reload")
            .to_bytes()
            .expect("re-encode");
        assert_eq!(again, twice);
    }
});
