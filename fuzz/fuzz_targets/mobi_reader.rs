//! Fuzz the MOBI reader: full validation and the header-only parse must never panic.
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
    if report.is_ok() {
        let m = Model::from_bytes(data).expect("a valid file loads");
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
