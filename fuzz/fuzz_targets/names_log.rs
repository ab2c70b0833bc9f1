//! Fuzz the `names.log` reader: arbitrary file contents must never panic or allocate
//! from a length they claim; whatever loads is authenticated against ids derived from
//! the names (as the store does at open) without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_store::{tensor_id, Catalog};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("tv-fuzz-names-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("names.log");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(mut cat) = Catalog::open_read_only(&path) else {
        return;
    };
    let names: Vec<(u128, String)> = cat.iter().map(|(id, n)| (id, n.to_owned())).collect();
    for (id, name) in &names {
        assert!(!name.is_empty() && name.len() <= 100, "{id:x}: {name:?}");
    }
    cat.authenticate(|id, name| Some(tensor_id("t", "c", name, 0) == id));
    assert!(cat
        .iter()
        .all(|(id, name)| tensor_id("t", "c", name, 0) == id));
});
