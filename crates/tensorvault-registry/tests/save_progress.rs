//! Saves report progress in bytes through the workspace's one progress layer
//! (`tensorvault_core::progress`): a model copied from safetensors files (shards and index)
//! and a FuseMoE checkpoint written from memory.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use safetensors::tensor::{Dtype, TensorView};
use tensorvault_core::progress::ProgressFn;
use tensorvault_registry::checkpoint::WEIGHTS_FILE;
use tensorvault_registry::model::{CHUNK_BYTES, INDEX_FILE};
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, ModelRegistry, Preset, SaveOptions,
    WeightInitializer, WeightRegistry,
};

type Seen = Arc<Mutex<Vec<(u64, u64)>>>;

fn recorder() -> (ProgressFn, Seen) {
    let seen: Seen = Arc::default();
    let s = Arc::clone(&seen);
    (
        Arc::new(move |done, total| s.lock().unwrap().push((done, total))),
        seen,
    )
}

/// A safetensors file of one f32 tensor `name` with `n` values.
fn st_file(path: &Path, name: &str, n: usize) {
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let view = TensorView::new(Dtype::F32, vec![n], &data).unwrap();
    let meta = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    safetensors::serialize_to_file(vec![(name.to_owned(), view)], &Some(meta), path).unwrap();
}

fn check(seen: &[(u64, u64)], total: u64) {
    assert_eq!(seen.first(), Some(&(0, total)), "starts at 0 of the total");
    assert_eq!(seen.last(), Some(&(total, total)), "ends at the total");
    assert!(
        seen.iter().all(|&(d, t)| t == total && d <= total),
        "never past the total: {seen:?}"
    );
}

#[test]
fn a_sharded_model_reports_the_bytes_of_every_file_it_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("model");
    fs::create_dir_all(&src).unwrap();
    // A shard of 2.5 chunks (so chunk boundaries are reported on the way) and a small one.
    let big = (CHUNK_BYTES as usize) * 5 / 2 / 4;
    st_file(&src.join("model-00001-of-00002.safetensors"), "a", big);
    st_file(&src.join("model-00002-of-00002.safetensors"), "b", 10);
    let index = r#"{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}"#;
    fs::write(src.join(INDEX_FILE), index).unwrap();
    let total: u64 = fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();

    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    let (cb, seen) = recorder();
    let v = reg
        .save_from_path_progress(&src, SaveOptions::default(), Some(&cb))
        .unwrap();
    let meta = reg.metadata(&v.version).unwrap();
    assert_eq!(meta.files.iter().map(|f| f.bytes).sum::<u64>(), total);
    let seen = seen.lock().unwrap();
    check(&seen, total);
    assert!(seen.iter().any(|&(d, _)| d == CHUNK_BYTES), "{seen:?}");
    // The plain save reports nothing and gives the same checksum.
    let w = reg.save_from_path(&src, SaveOptions::default()).unwrap();
    assert_eq!(w.checksum, v.checksum);
}

#[test]
fn a_refused_source_reports_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.safetensors");
    fs::write(&bad, b"\xff\xff\xff\xff\xff\xff\xff\x7f{").unwrap();
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    let (cb, seen) = recorder();
    assert!(reg
        .save_from_path_progress(&bad, SaveOptions::default(), Some(&cb))
        .is_err());
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn a_fusemoe_save_reports_the_weights_file_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = FusionConfig::tiny();
    let reg = WeightRegistry::with_config(
        tmp.path(),
        Device::Cpu,
        InitializationConfig::default(),
        cfg.clone(),
    )
    .unwrap();
    let w = WeightInitializer::new(7).init_all(&cfg, true).unwrap();
    let (cb, seen) = recorder();
    let v = reg.save_checkpoint_progress(&w, None, Some(&cb)).unwrap();
    let total = fs::metadata(reg.version_dir(&v.version).unwrap().join(WEIGHTS_FILE))
        .unwrap()
        .len();
    check(&seen.lock().unwrap(), total);
}
