//! Issue 25 class 1 in the registry: a FIFO (or another non-regular file) wherever the
//! registry reads a file is refused at once with `NotRegularFile` naming the path and its
//! type, never a hang (opening a FIFO used to block forever) and never "no such file".
#![cfg(unix)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use tensorvault_core::regular::{mkfifo, FileKind};
use tensorvault_registry::model::{resolve_source, INDEX_FILE, SINGLE_FILE};
use tensorvault_registry::safetensors_dtype::Dtype;
use tensorvault_registry::{
    LoadedModel, ModelRegistry, ModelTensor, Preset, RegistryError, SaveOptions, WeightVersion,
};

/// Runs `f` on a thread and fails the test if it has not returned within 10 s.
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("blocked on a FIFO for 10 s")
}

fn model_bytes() -> Vec<u8> {
    let t = ModelTensor::from_bytes("w", Dtype::F32, vec![2], vec![0; 8]).unwrap();
    let v = WeightVersion {
        version: String::new(),
        source_id: String::new(),
        created_at: String::new(),
        checksum: String::new(),
        metrics: None,
    };
    LoadedModel::new(v, BTreeMap::from([("w".to_owned(), t)]))
        .to_safetensors()
        .unwrap()
}

fn assert_fifo(r: Result<impl std::fmt::Debug, RegistryError>, fifo: &Path) {
    match r {
        Err(RegistryError::NotRegularFile { path, kind }) => {
            assert_eq!(path, fifo);
            assert_eq!(kind, FileKind::Fifo);
        }
        other => panic!(
            "expected NotRegularFile for {}, got {other:?}",
            fifo.display()
        ),
    }
}

#[test]
fn a_fifo_as_checkpoint_single_file_or_shard_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    // A single checkpoint file that is a FIFO: named as a FIFO, not "no such file".
    let single = tmp.path().join("model.safetensors");
    mkfifo(&single).unwrap();
    assert_fifo(resolve_source(&single).map(|_| ()), &single);
    let (r, s) = (root.clone(), single.clone());
    let res = within_10s(move || {
        ModelRegistry::open(&r, Preset::Any)
            .unwrap()
            .save_from_path(&s, SaveOptions::default())
    });
    assert_fifo(res, &single);
    // A model directory whose model.safetensors is a FIFO.
    let hf = tmp.path().join("hf");
    fs::create_dir(&hf).unwrap();
    mkfifo(&hf.join(SINGLE_FILE)).unwrap();
    assert_fifo(resolve_source(&hf).map(|_| ()), &hf.join(SINGLE_FILE));
    // A sharded directory whose second shard is a FIFO (the issue's hang).
    let sharded = tmp.path().join("sharded");
    fs::create_dir(&sharded).unwrap();
    fs::write(sharded.join("a.safetensors"), model_bytes()).unwrap();
    mkfifo(&sharded.join("b.safetensors")).unwrap();
    fs::write(
        sharded.join(INDEX_FILE),
        r#"{"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}}"#,
    )
    .unwrap();
    let (r, s) = (root.clone(), sharded.clone());
    let res = within_10s(move || {
        ModelRegistry::open(&r, Preset::Any)
            .unwrap()
            .save_from_path(&s, SaveOptions::default())
    });
    assert_fifo(res, &sharded.join("b.safetensors"));
    assert!(ModelRegistry::open(&root, Preset::Any)
        .unwrap()
        .list_versions()
        .is_empty());
}

#[test]
fn a_fifo_as_manifest_or_metadata_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    fs::create_dir(&root).unwrap();
    let manifest = root.join("registry.json");
    mkfifo(&manifest).unwrap();
    let r = root.clone();
    let res = within_10s(move || ModelRegistry::open(&r, Preset::Any).map(|_| ()));
    assert_fifo(res, &manifest);
    // metadata.json of a listed version.
    let root2 = tmp.path().join("reg2");
    let reg = ModelRegistry::open(&root2, Preset::Any).unwrap();
    let src = tmp.path().join("m.safetensors");
    fs::write(&src, model_bytes()).unwrap();
    reg.save_from_path(&src, SaveOptions::default()).unwrap();
    let meta = reg.version_dir("0.0.1").unwrap().join("metadata.json");
    fs::remove_file(&meta).unwrap();
    mkfifo(&meta).unwrap();
    let res = within_10s(move || reg.verify_version("0.0.1").map(|_| ()));
    assert_fifo(res, &meta);
}
