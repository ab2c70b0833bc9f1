//! Fuzz the ONNX importer: any bytes give a model or a typed error, never a panic; an
//! imported model always encodes to a MOBI file that reads back and re-encodes to the
//! same bytes (byte equality: NaN weights make model equality the wrong check).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::mobi::Model;
use tensorvault_onnx::{import, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let opts = ImportOptions {
        pin_symbolic_dims: Some(1),
        max_model_bytes: 1 << 20,
        ..ImportOptions::default()
    };
    if let Ok(m) = import(data, &opts) {
        let bytes = m.to_bytes().expect("an imported model encodes");
        let again = Model::from_bytes(&bytes).expect("and reads back");
        assert_eq!(again.to_bytes().expect("re-encode"), bytes);
    }
});
