//! Fuzz the prefix cache's model manifest reader (`prefix.model`) and its counters reader
//! (`prefix.stats`): arbitrary bytes must never panic or allocate from the length they
//! claim; whatever decodes re-encodes to exactly the same bytes, and chunk names parse only
//! in their one canonical form.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_store::prefix::chain::{chunk_name, parse_chunk_name};
use tensorvault_store::prefix::{ModelCounts, ModelManifest};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ModelManifest::decode(data) {
        assert_eq!(m.encode().expect("a decoded manifest encodes"), data);
    }
    if let Ok(c) = ModelCounts::decode(data) {
        assert_eq!(c.encode(), data);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some((id, parent)) = parse_chunk_name(s) {
            assert_eq!(chunk_name(id, parent), s);
        }
    }
});
