//! The `.npy` header parser on arbitrary bytes: never panics, and whatever it accepts
//! describes a header that lies inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::npy::{parse_header, MAX_NDIM};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_header(data, data.len() as u64) {
        assert!(h.data_offset <= data.len() as u64);
        assert!(h.shape.len() <= MAX_NDIM);
    }
});
